/*
 * task_state.pml - the task state word (flags + reference count) of one
 * spawned task, with every thread that touches it, checked with spin.
 *
 * Mirrors (read these side by side):
 *   include/aspen/detail/task_header.hpp   the state word, its flags and the
 *                                          transition table
 *   src/task/task_core.cpp                 poll_task, start_poll, finish_poll,
 *                                          complete, cancel_running,
 *                                          waker_wake_by_ref, waker_wake,
 *                                          waker_drop, abort_task,
 *                                          register_join_waker,
 *                                          drop_join_handle, ref_inc, ref_dec,
 *                                          on_last_ref, start_inline,
 *                                          try_complete_exclusive, continue_join,
 *                                          try_complete_alone, end_adopted
 *   include/aspen/join_handle.hpp          awaiter::await_ready / poll_thunk,
 *                                          take_result, detach
 *   src/scheduler/multi_thread.cpp         run_task (requeue / yield push)
 * The code points back here (task_header.hpp: "Model: spec/task_state.pml").
 *
 * Each load, CAS, fetch_add/sub of task_header::state is one atomic step; a
 * failed CAS re-reads the word (compare_exchange_weak's spurious failure is
 * just one more retry and is not modelled). Promela is sequentially
 * consistent, so this checks the protocol (the order of RMWs on the one word),
 * not the acquire/release annotations.
 *
 * Threads:
 *   poller(0), poller(1)   two workers popping the task from the run queue
 *                          (queued is the number of run-queue entries) and
 *                          running poll_task. The task waits on two event
 *                          sources and completes after consuming both events;
 *                          a poll may also yield once (yield_current).
 *   source(0), source(1)   event sources (leaves) that got a waker clone
 *                          (ref_inc during a poll) and fire once from their own
 *                          thread: source 0 wakes by value (waker_wake =
 *                          wake_by_ref + ref_dec), source 1 wake_by_ref (maybe
 *                          twice) and then drops the waker (waker_drop). An
 *                          event published before the wake is seen by any poll
 *                          that starts after the wake.
 *   aborter                holds its own reference (as shutdown's cancellation
 *                          snapshot, or a handle's): maybe abort_task, then
 *                          ref_dec.
 *   joiner                 the join_handle: maybe an earlier awaiter registers
 *                          waker A and is dropped mid-await; then either awaits
 *                          (await_ready / register_join_waker / wait for the
 *                          join waker / take_result) with waker B, or detaches;
 *                          finally drop_join_handle(observed).
 *                          With -DINLINE=1 the awaiting joiner first runs the
 *                          task nested in its own poll while the task sits in
 *                          the run queue and never suspended on a leaf
 *                          (continue_join / take_local / start_inline, or in
 *                          one step suspend_on_join's fast path): no
 *                          RUNNING CAS, the task keeps NOTIFIED while it runs
 *                          (a wake adds REWOKEN); if it finishes, complete()
 *                          tries the exclusive store (try_complete_exclusive);
 *                          if it suspends, settle_inlined takes RUNNING and
 *                          keeps NOTIFIED iff REWOKEN, then finish_poll as for
 *                          any poll. An adopted run (the word exactly
 *                          NOTIFIED|JOIN_INTEREST|3 refs when taken) ends in the
 *                          joiner's end_adopted: with still 3 refs and no
 *                          JOIN_WAKER the block is freed there (the handle gives
 *                          it back), else the CAS path. Its aborter then aborts
 *                          through the awaited handle: no reference of its own,
 *                          and done before the await's end (a join_handle is
 *                          not for concurrent use) and before the handle is
 *                          dropped.
 *
 * Properties (assertions; "ACC" = every touch of the task's memory):
 *   - RUNNING is held by at most one thread: polling <= 1;
 *   - a popped task is NOTIFIED, not RUNNING, not COMPLETE; a task is in at
 *     most one run queue (queued <= 1);
 *   - the frame is destroyed exactly once (destroys), never resumed after
 *     destruction, and the result is read only from a live frame;
 *   - the memory is freed exactly once, only when the refcount is 0 and the
 *     task is COMPLETE, and no thread touches it afterwards (ACC);
 *   - the refcount never goes negative; at the end it is 0 and memory freed;
 *   - no lost wake: at the end (nothing can move) the task is COMPLETE - it
 *     needs both events, so a lost wake leaves it incomplete (the aborter may
 *     choose not to abort, so aborting cannot hide a lost wake);
 *   - join: the completer moves the join waker out only while it owns it
 *     (JOIN_WAKER seen by its COMPLETE CAS) and the awaiter writes it only
 *     while it owns it; a joiner that registered successfully is woken
 *     (else it blocks: invalid end state); at the end each waker was woken
 *     exactly as often as its registration stood at completion (0 or 1);
 *   - an unobserved exception is reported exactly once (by complete() or
 *     drop_join_handle()), an observed one never.
 *
 * Two problems found in the code (see README.md). The model follows the
 * code as it is by default, and then FAILS; each has a proposed fix behind a
 * switch, and spec/run.sh checks the scenarios with both fixes on and shows
 * that each as-coded path fails:
 *   (An unobserved handle of a task that is not complete yet - a detach
 *   right after spawn - drops flag and ref in one CAS instead; the life ref
 *   keeps the task alive and its completer reports. -DBROKEN_DETACH_ANY
 *   takes that path also for a complete task, and spin must fail.)
 *   -DOLD_BUG_DROP_JOIN (restores the bug)  drop_join_handle reads t->error and
 *       t->frame_destroyed AFTER its fetch_sub gave up the handle's
 *       reference; if a waker, the aborter/shutdown snapshot or the completer
 *       drops the last reference in between, the read is a use after free
 *       (assert freed == 0). Fix: an unobserved handle first clears
 *       JOIN_INTEREST keeping its ref, reads, then ref_dec.
 *   -DOLD_BUG_WILL_WAKE (restores the bug)  register_join_waker reads t->join_waker
 *       (will_wake) while JOIN_WAKER is set, i.e. while the field belongs to
 *       the task side, and a concurrent complete() moves it out: a data race
 *       on a non-atomic field (assert !jw_busy). Fix: with JOIN_WAKER set,
 *       always take the field back with the clearing CAS first.
 */

#define RUNNING        1
#define NOTIFIED       2
#define COMPLETE       4
#define CANCELLED      8
#define JOIN_INTEREST 16
#define JOIN_WAKER    32
#define REWOKEN       64
#define REF          128          /* state::ref_one */
#define refs(x)       ((x) >> 7)

/* Scenario switches (spec/run.sh runs several combinations; the whole
 * product of all actors at once is too large to enumerate in a minute). */
#ifndef SOURCES
#define SOURCES 2                 /* event sources (1 or 2); the task needs them all */
#endif
#define NEED SOURCES
#ifndef ABORTER
#define ABORTER 1                 /* 1: an aborter thread exists */
#endif
#ifndef EARLY_AWAITER
#define EARLY_AWAITER 1           /* 1: an earlier awaiter may register A and be dropped */
#endif
#ifndef JOIN_AWAIT
#define JOIN_AWAIT 2              /* 0: detach only, 1: await only, 2: either */
#endif
#ifndef REPOLL
#define REPOLL 1                  /* 1: the waiting joiner may be re-polled spuriously */
#endif
#ifndef SRC1_TWICE
#define SRC1_TWICE 0              /* 1: source 1 may call wake_by_ref twice */
#endif
#ifndef POLLERS
#define POLLERS 1                 /* worker threads popping the task (1 or 2) */
#endif
#ifndef YIELDS
#define YIELDS 1                  /* self-wakes (yield_current) the task may do */
#endif
#ifndef INLINE
#define INLINE 0                  /* 1: the joiner may run the task nested (join inlining) */
#endif
#if INLINE
#ifdef ABORTER_OWN_REF
#define ABORTER_REF ABORTER       /* an abort_handle's reference: nested runs
                                     then see 4 refs and take the CAS paths */
#else
#define ABORTER_REF 0             /* aborts through the awaited handle */
#endif
#else
#define ABORTER_REF ABORTER       /* a snapshot's or a second handle's reference */
#endif

/* spawn_root / spawn_on_worker (build_spawned_header): NOTIFIED |
 * JOIN_INTEREST, refs: handle + life + queue, and the
 * aborter's own reference */
short st = NOTIFIED | JOIN_INTEREST | (3 + ABORTER_REF) * REF;

/* task_header fields */
bit frame_destroyed = 0;   /* t->frame_destroyed */
bit root_done = 0;         /* t->root_done */
bit yield_requested = 0;   /* t->yield_requested */
bit has_error = 0;         /* t->error != nullptr */
byte jw = 0;               /* t->join_waker: 0 empty, A or B */
#define WA 1
#define WB 2

/* the run queue: entries for this task */
byte queued = 1;

/* event sources (leaves) */
byte wslot[2];             /* 1: the source holds a waker clone; 2: it fired */
bit ready[2];              /* the event was published */
bit consumed[2];
byte progress = 0;         /* events consumed by polls */
byte yields_left = YIELDS;

/* ghosts */
byte freed = 0;            /* times the memory was freed */
byte destroys = 0;         /* times the coroutine frame was destroyed */
byte polling = 0;          /* threads holding RUNNING */
bit jw_busy = 0;           /* complete() is moving join_waker out */
byte woken[3];             /* join waker wakes, per waker */
bit jw_reg[3];             /* the waker's registration stands (JOIN_WAKER set with it) */
byte reports = 0;          /* unobserved-exception reports */
bit observed = 0;          /* the handle took the result */
bit joiner_waiting = 0;
bit gcomplete = 0;         /* ghost copy of COMPLETE, for the sources' exit */
bit inl = 0;               /* the joiner runs the task nested: it owns the frame without RUNNING */
bit leafed = 0;            /* the task suspended on a leaf (leaf_poll set): take_local refuses it */
bit abort_done = 0;        /* the aborter is finished with the handle */
byte adopt = 0;            /* 1: the nested run is adopted; 2: it ended so (final_awaiter -> resume_adopter), end_adopted follows */

/* The thread that owns the frame: RUNNING, or the nested runner (NOTIFIED kept). */
#define OWNS(x) (((x) & RUNNING) || inl)

/* Vacuity checks: -DWITNESS=<kind> makes reaching that point an error, so
 * spec/run.sh can show that the interesting paths are really explored. */
#define W_JOIN_WAKE   1   /* complete() wakes a registered join waker */
#define W_ABORT_IDLE  2   /* abort_task claims an idle task and destroys it */
#define W_REQUEUE     3   /* a wake during the poll: finish_poll re-queues */
#define W_INLINE_EXCL 4   /* a nested run completes with the exclusive store */
#define W_INLINE_REQ  5   /* a nested run suspends after a wake (REWOKEN): re-queued */
#define W_ALONE_START 6   /* start_poll takes RUNNING with a plain store (nobody else holds the task) */
#define W_ALONE_END   7   /* complete() frees a task nobody else holds, without an RMW */
#define W_GIVEN_BACK  8   /* end_adopted frees the block at the join (the handle gives it back) */
#ifdef WITNESS
#define WITNESS_AT(k) assert(k != WITNESS)
#else
#define WITNESS_AT(k) skip
#endif

/* Every access to the task's memory. */
#define ACC assert(freed == 0)

/* One CAS on the word: success runs G in the same step. */
#define CAS_G(s, nx, ok, G) \
  atomic { ACC; if :: st == s -> assert((nx) >= 0); st = nx; ok = 1; G :: else -> s = st; ok = 0 fi }
#define CAS(s, nx, ok) CAS_G(s, nx, ok, skip)
#define LOAD(s) atomic { ACC; s = st }

/* on_last_ref: the caller saw the count drop from 1 to 0. */
inline on_last_ref() {
  d_step {
    ACC;
    assert(refs(st) == 0);
    assert(st & COMPLETE);
    if
    :: frame_destroyed -> skip           /* free_task_memory */
    :: else ->                           /* releasing; destroy() the finished frame, */
       destroys++; assert(destroys == 1) /* whose operator delete frees the block */
    fi;
    freed++;
    assert(freed == 1)
  }
}

inline ref_dec(prev) {
  atomic { ACC; prev = st; st = st - REF; assert(refs(prev) >= 1) }
  if
  :: refs(prev) == 1 -> on_last_ref()
  :: else -> skip
  fi;
  prev = 0
}

inline ref_inc() {
  atomic { ACC; st = st + REF }
}

/* complete()'s CAS path (publish_completion): RUNNING is ours.
 * (report_error reads fields only the RUNNING holder writes, so it is
 * folded into the first load.) */
inline complete_cas(s, nx, ok, wa, rep, w) {
  atomic { ACC; rep = has_error && !frame_destroyed; s = st }
  do
  :: atomic {
       ACC;
       wa = (s & JOIN_WAKER) || (rep && !(s & JOIN_INTEREST));  /* work_after */
       if
       :: st == s ->
          st = ((s | COMPLETE) & ~(RUNNING | NOTIFIED | REWOKEN)) - (wa -> REF : 2 * REF);
          assert(st >= 0); assert(OWNS(s)); assert(!(s & COMPLETE));
          polling--; inl = 0; gcomplete = 1;
          if :: (s & JOIN_WAKER) -> jw_busy = 1 :: else -> skip fi;
          ok = 1
       :: else -> s = st; ok = 0
       fi
     }
     if :: ok -> break :: else -> skip fi
  od;
  if
  :: !wa ->
     if
     :: refs(s) == 2 -> on_last_ref()
     :: else -> skip
     fi
  :: else ->
     if
     :: (s & JOIN_WAKER) ->
        /* aspen::waker w = std::move(t->join_waker); w.wake(); */
        d_step { ACC; assert(jw != 0); assert(jw_reg[jw]); w = jw; jw = 0; jw_busy = 0; WITNESS_AT(W_JOIN_WAKE) }
        d_step { woken[w]++; w = 0 }
     :: else -> skip
     fi;
     if
     :: rep && !(s & JOIN_INTEREST) -> d_step { ACC; reports++ }   /* report(t) */
     :: else -> skip
     fi;
     ref_dec(nx)
  fi;
  atomic { s = 0; nx = 0; ok = 0; wa = 0; rep = 0 }
}

/* complete(): try_complete_alone, then the CAS path. Alone: the word shows
 * only the life ref and ours, so nobody else holds the task; no RMW, the
 * memory is freed at once. The d_step checks that nothing changed the word
 * since the load (a plain store would have lost that change) and settles
 * the ghost word, which the code never writes. */
inline complete(s, nx, ok, wa, rep, w) {
  atomic { ACC; rep = has_error && !frame_destroyed; s = st }
  if
#ifdef BROKEN_ALONE_ANY
  :: !(s & (JOIN_INTEREST | JOIN_WAKER | CANCELLED | REWOKEN)) ->   /* broken: the refs not checked */
#else
  :: (s & ~(RUNNING | NOTIFIED)) == 2 * REF ->
#endif
     if :: rep -> d_step { ACC; reports++ } :: else -> skip fi;   /* report(t) */
     d_step {
       ACC; assert(st == s); assert(OWNS(s));
       st = ((s | COMPLETE) & ~(RUNNING | NOTIFIED | REWOKEN)) - 2 * REF;
       polling--; inl = 0; gcomplete = 1;
       WITNESS_AT(W_ALONE_END)
     };
     on_last_ref();
     atomic { s = 0; rep = 0 }
  :: else -> complete_cas(s, nx, ok, wa, rep, w)
  fi
}

/* cancel_running(): RUNNING and CANCELLED are ours. */
inline cancel_running(s, nx, ok, wa, rep, w) {
  d_step {
    ACC; assert(OWNS(st)); assert(st & CANCELLED);
    assert(!frame_destroyed);
    frame_destroyed = 1; destroys++; assert(destroys == 1)
  }
  complete(s, nx, ok, wa, rep, w)
}

/* the run queue push (schedule / push_local / injector push) */
inline enqueue() {
  d_step { ACC; assert(queued == 0); queued++ }
}

/* waker_wake_by_ref */
inline wake_by_ref(s, ok) {
  LOAD(s);
  do
  :: (s & COMPLETE) -> break
  :: !(s & COMPLETE) && (s & NOTIFIED) && (s & (RUNNING | REWOKEN)) -> break
  :: !(s & COMPLETE) && (s & NOTIFIED) && !(s & (RUNNING | REWOKEN)) ->
     CAS(s, s | REWOKEN, ok);              /* queued or run nested: record it */
     if :: ok -> break :: else -> skip fi
  :: !(s & (COMPLETE | NOTIFIED)) ->
     if
     :: (s & RUNNING) ->
        CAS(s, s | NOTIFIED, ok);          /* re-queued after the poll */
        if :: ok -> break :: else -> skip fi
     :: else ->
        CAS(s, (s | NOTIFIED) + REF, ok);  /* the queue's ref */
        if :: ok -> enqueue(); break :: else -> skip fi   /* t->sched->schedule */
     fi
  od;
  atomic { s = 0; ok = 0 }
}

/* finish_poll + run_task's requeue / yield push */
inline finish_poll(s, nx, ok, wa, rep, w) {
  /* std::exchange(t->yield_requested, false) (ours while RUNNING), then load */
  atomic { yield_requested = 0; LOAD(s) }
  do
  :: (s & CANCELLED) ->
     cancel_running(s, nx, ok, wa, rep, w);
     break
  :: else ->
     /* next = s & ~RUNNING, minus the poll ref unless NOTIFIED */
     CAS_G(s, (s & ~RUNNING) - ((s & NOTIFIED) -> 0 : REF), ok, assert(s & RUNNING); polling--);
     if
     :: ok ->
        if
        :: (s & NOTIFIED) ->   /* requeue / yield: the poll ref is the queue's */
           WITNESS_AT(W_REQUEUE);
           enqueue()
        :: else -> skip                  /* idle: the poll ref was dropped */
        fi;
        break
     :: else -> skip
     fi
  od;
  atomic { s = 0; nx = 0; ok = 0 }
}

/* complete() called by the nested runner for the joiner awaiting this very
 * handle: try_complete_exclusive, then the CAS path. The plain store may
 * overwrite a concurrent abort's CANCELLED and nothing else: any other
 * change to the word in between is a lost update the final check catches. */
inline complete_exclusive(s, nx, ok, wa, rep, w) {
  LOAD(s);
  if
#ifdef BROKEN_EXCL_ANY
  :: true ->   /* broken: store whatever the word says */
#else
  :: refs(s) == 3 && !(s & (JOIN_WAKER | COMPLETE)) && (s & JOIN_INTEREST) ->
#endif
     atomic {
       ACC; assert(OWNS(st)); assert(!(st & COMPLETE));
       st = ((s | COMPLETE) & ~(RUNNING | NOTIFIED | REWOKEN | CANCELLED)) - 2 * REF;
       polling--; inl = 0; gcomplete = 1;
       WITNESS_AT(W_INLINE_EXCL)
     };
     s = 0
  :: else -> complete_cas(s, nx, ok, wa, rep, w)
  fi
}

/* the poll itself, by the RUNNING holder or the nested runner (excl: the
 * joiner awaiting this task's handle) */
inline run_poll(s, nx, ok, wa, rep, w, excl) {
  /* resume: the leaf poll - consume published events, or store a waker
     clone in every source that has none (ref_inc while we hold the poll
     ref) - one step, as a leaf does it under its own lock */
  atomic {
    ACC; assert(!frame_destroyed); assert(OWNS(st));
    if :: ready[0] && !consumed[0] -> consumed[0] = 1; progress++ :: else -> skip fi;
    if :: ready[1] && !consumed[1] -> consumed[1] = 1; progress++ :: else -> skip fi;
    if
    :: progress == NEED ->
       /* the root coroutine returns (or throws): on_root_final */
       if :: root_done = 1 :: root_done = 1; has_error = 1 fi
    :: else ->
       leafed = 1;   /* suspends on the leaves: leaf_poll is set */
       if :: wslot[0] == 0 -> st = st + REF; wslot[0] = 1 :: else -> skip fi;
       if :: SOURCES > 1 && wslot[1] == 0 -> st = st + REF; wslot[1] = 1 :: else -> skip fi
    fi
  }
  if
  :: !root_done && yields_left > 0 ->   /* yield_current: a self-wake */
     d_step { yields_left--; yield_requested = 1 }
     wake_by_ref(s, ok)
  :: true -> skip
  fi;
  if
  :: root_done && excl && adopt -> adopt = 2   /* final_awaiter -> resume_adopter: the joiner ends it (end_adopted) */
  :: root_done && excl && !adopt -> complete_exclusive(s, nx, ok, wa, rep, w)
  :: root_done && !excl -> complete(s, nx, ok, wa, rep, w)
  :: else ->
     if
     :: inl ->
        /* settle_inlined: take RUNNING, keep NOTIFIED iff REWOKEN */
        LOAD(s);
        do
#ifdef BROKEN_SETTLE
        /* broken: forget a wake that came during the nested run */
        :: CAS_G(s, (s & ~(NOTIFIED | REWOKEN)) | RUNNING, ok,
#else
        :: CAS_G(s, (s & ~(NOTIFIED | REWOKEN)) | RUNNING | ((s & REWOKEN) -> NOTIFIED : 0), ok,
#endif
                 assert(s & NOTIFIED); assert(!(s & RUNNING)); inl = 0;
                 if :: (s & REWOKEN) -> WITNESS_AT(W_INLINE_REQ) :: else -> skip fi);
           if :: ok -> break :: else -> skip fi
        od
     :: else -> skip
     fi;
     finish_poll(s, nx, ok, wa, rep, w)
  fi
}

/* poll_task */
proctype poller(byte id) {
  short s, nx;
  bit ok, wa, rep;
  byte w;
end:
  do
  :: atomic { queued > 0 -> queued--; ACC; s = st } ->
     /* start_poll (its load is folded into the pop). Alone (only the life
        ref and the queue's, no handle): a plain store takes RUNNING; the
        d_step checks that nothing changed the word since the load */
     if
#ifdef BROKEN_ALONE_ANY
     :: (s & ~(REF * 15)) == NOTIFIED ->   /* broken: the refs not checked */
#else
     :: s == (NOTIFIED | 2 * REF) ->
#endif
        d_step {
          ACC; assert(st == s);
          st = RUNNING | (s & (REF * 15)); polling++; assert(polling == 1);
          WITNESS_AT(W_ALONE_START)
        }
     :: else ->
        do
        :: CAS_G(s, (s & ~(NOTIFIED | REWOKEN)) | RUNNING, ok,
                 assert(s & NOTIFIED); assert(!(s & RUNNING)); assert(!(s & COMPLETE));
                 polling++; assert(polling == 1));
           if :: ok -> break :: else -> skip fi
        od
     fi;
     if
     :: (s & CANCELLED) ->
        cancel_running(s, nx, ok, wa, rep, w)
     :: else -> run_poll(s, nx, ok, wa, rep, w, 0)
     fi;
     s = 0
  od
}

/* an event source holding a waker clone */
proctype source(byte i) {
  short s, prev;
  bit ok;
  if
  :: wslot[i] == 1 ->
     d_step { ready[i] = 1; wslot[i] = 2 }   /* publish the event, take the waker */
     if
     :: i == 0 ->
        wake_by_ref(s, ok); ref_dec(prev)      /* waker_wake: wake by value */
     :: i == 1 ->
        wake_by_ref(s, ok);                    /* wake_by_ref ... */
        if :: SRC1_TWICE -> wake_by_ref(s, ok) :: skip fi;   /* ... maybe again (spurious) */
        ref_dec(prev)                          /* waker_drop */
     fi
  :: wslot[i] == 0 && gcomplete -> skip      /* finished before it ever waited here */
  fi
}

/* abort_task (with a reference of its own), then ref_dec */
proctype aborter() {
  short s, nx, prev;
  bit ok, wa, rep;
  byte w;
  if
  :: LOAD(s);
     do
     :: (s & (COMPLETE | CANCELLED)) -> break
     :: else ->
        if
        :: (s & (RUNNING | NOTIFIED)) ->
           CAS(s, s | CANCELLED, ok);    /* the poller destroys the frame */
           if :: ok -> break :: else -> skip fi
        :: else ->
           /* idle: claim RUNNING | CANCELLED and a poll ref */
           CAS_G(s, (s | CANCELLED | RUNNING) + REF, ok, polling++; assert(polling == 1));
           if
           :: ok -> WITNESS_AT(W_ABORT_IDLE); cancel_running(s, nx, ok, wa, rep, w); break
           :: else -> skip
           fi
        fi
     od
  :: skip                                 /* no abort: only drop the reference */
  fi;
  if
  :: ABORTER_REF -> ref_dec(prev)
  :: else -> skip                         /* aborted through the handle: no ref */
  fi;
  abort_done = 1
}

/* register_join_waker(t, x): r = 1 if registered, 0 if the task is complete */
inline register_join_waker(x, r, s, ok) {
  LOAD(s);
  if
  :: (s & COMPLETE) -> r = 0
  :: else ->
     r = 2;   /* undecided */
     if
     :: (s & JOIN_WAKER) ->
#ifdef OLD_BUG_WILL_WAKE
        /* the code before the fix: t->join_waker.will_wake(w) - reads the field while
           JOIN_WAKER says it belongs to the task side */
        d_step { ACC; assert(!jw_busy); ok = (jw == x) }
#else
        /* the code now: never read the field while JOIN_WAKER is set; always
           take it back first (below), then compare / replace it */
        ok = 0;
#endif
        if
        :: ok -> r = 1
        :: else ->
           /* take the field back before replacing it */
           do
           :: (s & COMPLETE) -> break
           :: else ->
              CAS_G(s, s & ~JOIN_WAKER, ok, jw_reg[jw] = 0);
              if :: ok -> break :: else -> skip fi
           od;
           if :: (s & COMPLETE) -> r = 0 :: else -> skip fi
        fi
     :: else -> skip
     fi;
     if
     :: r == 2 ->
        /* t->join_waker = w: ours while JOIN_WAKER is clear */
        d_step { ACC; assert(!jw_busy); assert(!(st & JOIN_WAKER)); jw = x }
        LOAD(s);
        do
        :: (s & COMPLETE) ->
           d_step { ACC; assert(!jw_busy); assert(!(st & JOIN_WAKER)); jw = 0 }  /* reset() */
           r = 0; break
        :: else ->
           CAS_G(s, s | JOIN_WAKER, ok, jw_reg[x] = 1);
           if :: ok -> r = 1; break :: else -> skip fi
        od
     :: else -> skip
     fi
  fi;
  atomic { s = 0; ok = 0 }
}

/* join_handle::take_result */
inline take_result() {
  d_step {
    ACC; assert(st & COMPLETE);
    observed = 1;
    /* is_cancelled_outcome, or the promise's value in the live frame */
    if :: !frame_destroyed -> assert(destroys == 0) :: else -> skip fi
  }
}

/* end_adopted: the joiner took the adopted task's outcome from its frame.
 * A join_handle is not for concurrent use, so an abort() through it came
 * before this await's end (the wait on abort_done). With nothing but the
 * handle's, the life's and the poll's refs and no JOIN_WAKER, only the
 * handle could reach the task: the block is freed at once and the word is
 * never written again (the d_step checks that nobody wrote it since the
 * load, and settles the ghost word for the final check). Otherwise the
 * task completes through the CAS path and the handle keeps the block. */
inline end_adopted(s, nx, ok, wa, rep, w, gone) {
#ifndef BROKEN_NO_ABORT_WAIT
  (!ABORTER || ABORTER_REF || abort_done);
#endif
  LOAD(s);
  if
  :: refs(s) == 3 && !(s & (JOIN_WAKER | COMPLETE)) && (s & JOIN_INTEREST) ->
     d_step {
       ACC; assert(st == s); assert(OWNS(st));
       st = COMPLETE; polling--; inl = 0; gcomplete = 1;
       observed = 1;                      /* take_adopted moved the outcome out */
       destroys++; assert(destroys == 1); /* the emptied frame ends with its block */
       freed++; assert(freed == 1);
       gone = 1;
       WITNESS_AT(W_GIVEN_BACK)
     };
     s = 0
  :: else ->
     /* finish_adopted: the emptied frame ends (nothing in it to destroy),
        the block stays with the handle */
     d_step { ACC; frame_destroyed = 1; destroys++; assert(destroys == 1) };
     complete_cas(s, nx, ok, wa, rep, w)
  fi
}

proctype joiner() {
  short s, prev, nx;
  bit ok, wa, rep;
  byte r, w;
  byte x = WA;
  bit gone = 0;   /* the handle gave the block back (end_adopted) */

  /* maybe an earlier awaiter registered A and was dropped mid-await (the
     handle stays valid: awaited_ is set only by take_result) */
  if
  :: EARLY_AWAITER -> register_join_waker(WA, r, s, ok); x = WB
  :: skip
  fi;
  if
  :: JOIN_AWAIT >= 1 -> /* co_await handle */
     LOAD(s);                                     /* await_ready: is_complete */
#if INLINE
     /* continue_join: while the task is not complete and sits in this
        worker's queue without a leaf, take it (take_local) and run it nested */
     do
     :: (s & COMPLETE) -> break
     :: else ->
        if
        :: atomic { queued > 0 && !leafed -> queued--; ACC; polling++; assert(polling == 1); inl = 1 } ->
           /* start_inline: a load, no CAS; the task keeps NOTIFIED */
           LOAD(s);
           assert(s & NOTIFIED); assert(!(s & RUNNING));
           if
           :: (s & CANCELLED) -> cancel_running(s, nx, ok, wa, rep, w)
           :: else ->
              /* adoptable: exactly NOTIFIED | JOIN_INTEREST and the refs of
                 the handle, the life and the queue, and not registered. Here
                 every poll that does not finish the task leaves it on a leaf,
                 where take_local refuses it; in the code a task that yielded
                 is registered and may be taken nested, not adopted: either
                 way may happen (its end is then try_complete_exclusive) */
              if
              :: adopt = (s == (NOTIFIED | JOIN_INTEREST | 3 * REF))
              :: adopt = 0
              fi;
              run_poll(s, nx, ok, wa, rep, w, 1);
              if
              :: adopt == 2 -> end_adopted(s, nx, ok, wa, rep, w, gone)
              :: else -> skip
              fi;
              adopt = 0
           fi;
           if :: gone -> break :: else -> skip fi;
           LOAD(s)                                /* is_complete(target) */
        :: else -> break
        fi
     od;
#endif
     if
     :: gone -> skip                              /* taken by end_adopted's joiner */
     :: !gone && (s & COMPLETE) -> take_result()
     :: !gone && !(s & COMPLETE) ->
        register_join_waker(x, r, s, ok);         /* poll_thunk */
        if
        :: r == 0 -> take_result()
        :: else ->
           joiner_waiting = 1;
           if
           :: woken[x] > 0 -> skip                /* the completer woke us */
           :: REPOLL -> register_join_waker(x, r, s, ok);   /* re-polled for another reason */
              if
              :: r == 0 -> skip
              :: else -> woken[x] > 0
              fi
           fi;
           joiner_waiting = 0;
           register_join_waker(x, r, s, ok);      /* the join leaf's poll after the wake */
           assert(r == 0);
           take_result()
        fi
     fi
  :: JOIN_AWAIT != 1 -> skip   /* detach(), or dropped without awaiting */
  fi;

  /* drop_join_handle(t, observed) */
#ifdef OLD_BUG_DROP_JOIN
  /* the code before the fix: one fetch_sub(JOIN_INTEREST + ref_one), then t->error and
     t->frame_destroyed are read - after our reference is gone */
  atomic { ACC; prev = st; assert(st & JOIN_INTEREST); st = st - JOIN_INTEREST - REF }
  if
  :: (prev & COMPLETE) && !observed ->
     d_step { ACC; if :: has_error && !frame_destroyed -> reports++ :: else -> skip fi }
  :: else -> skip
  fi;
  if
  :: refs(prev) == 1 -> on_last_ref()
  :: else -> skip
  fi
#else
  /* the code now: an unobserved handle clears JOIN_INTEREST keeping its ref
     (fetch_and), reads the outcome, then drops the ref (ref_dec); an observed
     one keeps the single fetch_sub */
  (!ABORTER || ABORTER_REF || abort_done);    /* abort() through the handle ended */
  if
  :: gone -> skip                             /* given back: the handle holds no block */
  :: !gone && observed ->
     /* one reference left: ours, nobody else can reach the task; free
        without an RMW (the d_step checks that nothing changed meanwhile and
        settles the ghost word) */
     LOAD(prev);
#ifdef BROKEN_DROP_FAST
     if
     :: true ->
#else
     if
     :: refs(prev) == 1 ->
#endif
        d_step { ACC; assert(st == prev); st = st - JOIN_INTEREST - REF };
        on_last_ref()
     :: else ->
        atomic { ACC; prev = st; assert(st & JOIN_INTEREST); st = st - JOIN_INTEREST - REF }
        if
        :: refs(prev) == 1 -> on_last_ref()
        :: else -> skip
        fi
     fi
  :: !gone && !observed ->
     /* not complete (a detach right after spawn): flag and ref in one CAS,
        retried while the task stays incomplete; the life ref keeps t
        alive and the completer reports the exception */
     LOAD(s);
     ok = 0;
     do
#ifndef BROKEN_DETACH_ANY
     :: (s & COMPLETE) -> break
     :: else ->
#else
     :: true ->                   /* also when complete: the report and the free are lost */
#endif
        CAS(s, s - JOIN_INTEREST - REF, ok);
#ifndef BROKEN_DETACH_ANY
        if :: ok -> assert(refs(s) >= 2); break :: else -> skip fi   /* the life ref stays */
#else
        if :: ok -> break :: else -> skip fi
#endif
     od;
     if
     :: ok -> skip
     :: else ->
        atomic { ACC; prev = st; assert(st & JOIN_INTEREST); st = st - JOIN_INTEREST }
        if
        :: (prev & COMPLETE) ->
           d_step { ACC; if :: has_error && !frame_destroyed -> reports++ :: else -> skip fi }
        :: else -> skip
        fi;
        ref_dec(prev)
     fi
  fi
#endif
}

/* Nothing can move any more: the final state must be the clean end. */
active proctype final_check() {
end:
  timeout ->
  d_step {
    assert(st & COMPLETE);           /* no lost wake: the task finished */
    assert(refs(st) == 0);
    assert(freed == 1);
    assert(destroys == 1);
    assert(polling == 0);
    assert(queued == 0);
    assert(!joiner_waiting);         /* a registered joiner was woken */
    assert(woken[WA] == jw_reg[WA] && woken[WB] == jw_reg[WB]);
    assert(reports == (has_error && !frame_destroyed && !observed -> 1 : 0))
  }
}

init {
  atomic {
    run poller(0);
#if POLLERS > 1
    run poller(1);
#endif
    run source(0);
#if SOURCES > 1
    run source(1);
#endif
#if ABORTER
    run aborter();
#endif
    run joiner()
  }
}
