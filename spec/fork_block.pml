/*
 * fork_block.pml - the block one parallel-algorithm call shares between its
 * root (the task awaiting the call) and its pieces (detached tasks that may
 * spawn more pieces). Checked with spin.
 *
 * Mirrors (read side by side):
 *   include/aspen/detail/fork_block.hpp  the protocol comment (invariants
 *                                        1-5), add_piece, piece_ref,
 *                                        spawn_piece, root_guard
 *   src/parallel/fork_block.cpp          finish_piece, drop_last_unit,
 *                                        drop_ref, fail, root_poll,
 *                                        root_leave
 *   include/aspen/parallel.hpp           chunk_job::split (a piece spawns
 *                                        pieces before running its chunk)
 *
 * State: the word's two halves as `units` and `refs` (every RMW and CAS on
 * the word is one step; Promela is sequentially consistent, so the model
 * checks the protocol's interleavings, not its memory_order annotations:
 * see spec/README.md), `waker` (the root's stored waker), `wakes` (wakes
 * delivered to the root), `deleted`, per piece `written` (its result).
 *
 * Actors: the root spawns ROOT_PIECES pieces, the first of which spawns
 * one more (a nested split); every piece writes its result, then finishes.
 * The root waits (its first poll stores the waker and drops its unit; then
 * it is polled again when woken, or up to SPURIOUS times without a wake,
 * as any task may be) or, with ABORT, may instead leave while pieces run
 * (an aborted caller).
 *
 * Properties:
 *   - nothing touches the block once it is deleted (assert(!deleted) at
 *     every access), and it is deleted exactly once;
 *   - when the root's wait ends, every piece's result is written
 *     (invariant 5 in its sequentially consistent form);
 *   - no lost wakeup: a root that waits is not left blocked (pan's invalid
 *     end state), and at the end the block is gone (no leak).
 * Broken variants, which spin must catch:
 *   BROKEN_LAST_ONE_STEP   the last unit's piece drops unit and ref in one
 *                          step and then wakes the root: the root may have
 *                          deleted the block in between;
 *   BROKEN_WAKER_LATE      the root drops its unit before storing its waker:
 *                          the last piece may find no waker, and the root
 *                          waits forever;
 *   BROKEN_ROOT_DELETES    the root deletes the block when its wait ends,
 *                          without a ref count: a piece still inside
 *                          drop_last_unit touches freed memory.
 * Vacuity witness (-DWITNESS=1): the root's wait ends through a wake (not
 * at its first poll) must be reachable.
 */

#ifndef ROOT_PIECES
#define ROOT_PIECES 2
#endif
#define PIECES (ROOT_PIECES + 1)   /* piece 0 spawns piece ROOT_PIECES */
#ifndef SPURIOUS
#define SPURIOUS 1                 /* re-polls of the root without a wake */
#endif

byte units = 1;      /* the root's unit */
byte refs = 1;       /* the root's ref */
bool waker = false;  /* the root stored its waker */
byte wakes = 0;
bool deleted = false;
byte deletions = 0;
bool written[PIECES];
bool spawned[PIECES];
bool stop = false;
byte ended = 0;      /* actors that ran to their end */

inline touch() { assert(!deleted) }

inline delete_block() {
    assert(!deleted);
    deleted = true;
    deletions++
}

/* add_piece, then the spawn that makes piece i runnable */
inline spawn_piece(i) {
    touch();
    atomic { units++; refs++ };
    spawned[i] = true
}

inline drop_ref() {
    atomic {
        touch();
        refs--;
        if
        :: refs == 0 -> delete_block()
        :: else -> skip
        fi
    }
}

/* finish_piece: invariant 2 (not the last unit: unit and ref in one CAS),
 * invariant 3 (the last: unit, then the wake under the ref, then the ref) */
inline finish_piece() {
    if
    :: atomic { units > 1 -> touch(); units--; refs-- }
    :: atomic { units == 1 ->
#ifdef BROKEN_LAST_ONE_STEP
           touch(); units--; refs--; if :: refs == 0 -> delete_block() :: else -> skip fi
#else
           touch(); units--
#endif
       };
       /* drop_last_unit's wake: reads the stored waker */
       atomic { touch(); if :: waker -> wakes++ :: else -> skip fi };
#ifndef BROKEN_LAST_ONE_STEP
       drop_ref()
#endif
    fi
}

proctype piece(byte i) {
    spawned[i];
    touch();
    if
    :: i == 0 -> spawn_piece(ROOT_PIECES)   /* a nested split */
    :: else -> skip
    fi;
    if
    :: !stop -> touch(); written[i] = true   /* its chunk's result */
    :: else -> skip                          /* stopping: skips its chunk */
    fi;
    finish_piece();
    ended++
}

inline all_written(ok) {
    m = 0;
    ok = true;
    do
    :: m < PIECES -> if :: !written[m] -> ok = false :: else -> skip fi; m++
    :: else -> break
    od
}

proctype root() {
    bool done = false;
    bool ok;
    byte k = 0;
    byte m;
    byte spurious = 0;
    do
    :: k < ROOT_PIECES -> spawn_piece(k); k++
    :: else -> break
    od;
    /* the root's own chunk: nothing shared */

    /* root_poll, first call: store the waker, then drop the unit (4) */
#ifdef BROKEN_WAKER_LATE
    atomic { touch(); units--; done = (units == 0) };
    touch(); waker = true;
#else
    touch(); waker = true;
    atomic { touch(); units--; done = (units == 0) };
#endif
    do
    :: done -> break
    :: !done && wakes > 0 ->                 /* woken: poll again */
       atomic { touch(); wakes--; done = (units == 0) }
#ifdef WITNESS
       ; assert(!done)
#endif
    :: !done && spurious < SPURIOUS ->       /* polled without a wake */
       atomic { touch(); spurious++; done = (units == 0) }
#ifdef ABORT
    :: !done ->                              /* aborted while waiting */
       atomic { touch(); stop = true };
       goto leave
#endif
    od;
    all_written(ok);
    assert(ok);                              /* (5) every result is in */
#ifdef BROKEN_ROOT_DELETES
    delete_block();
    ended++;
    goto out;
#endif
leave:
    drop_ref();                              /* root_leave */
    ended++;
out:
    skip
}

/* At the end (every actor ran to its end; pan reports an actor left
 * blocked as an invalid end state): the block was deleted, once. */
active proctype end_check() {
    ended == PIECES + 1;
#ifndef BROKEN_ROOT_DELETES
    assert(deleted && deletions == 1)
#endif
}

init {
    atomic {
        byte i = 0;
        do
        :: i < PIECES -> run piece(i); i++
        :: else -> break
        od;
        run root()
    }
}
