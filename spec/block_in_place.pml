/*
 * block_in_place.pml - the hand-back of a worker lent to a stand-in thread
 * (aspen::block_in_place) is never lost, and leaves the worker's idle
 * bookkeeping as the rest of the idle protocol expects. Checked with spin.
 *
 * Mirrors (read these side by side):
 *   src/scheduler/multi_thread.cpp  the "block_in_place" protocol comment,
 *                                   multi_thread_scheduler::block_in_place
 *                                   (the hand-back: the flag, unpark_self,
 *                                   unpark, join), stand_in, run_loop (the
 *                                   flag at the loop's head), park (the
 *                                   check after to_parked)
 *   src/scheduler/idle.hpp          idle_state::to_parked, unpark_self,
 *                                   worker_to_notify (each one locked step)
 *   src/scheduler/park.hpp          parker::park, park_on_driver, unpark
 *
 * Processes: A, the task's thread, which ran the function and now hands
 * back (stores the flag, takes the worker off the sleepers if it is listed
 * there and unparks it, then joins B); B, the stand-in running the worker
 * loop, which finds no work (the worst case: it heads for sleep); N, an
 * optional notifier (a producer's notify_one picking this sleeper). B's park
 * may also end by itself (a driver park returning on I/O: SPONTANEOUS),
 * after which it counts itself back as the code does (unpark_self, or park
 * once more to consume a notifier's unpark on its way).
 *
 * Memory model: Promela is sequentially consistent; the code's flag store
 * is release and its loads acquire, and the race between the hand-back and
 * B's listing is ordered by idle_state's mutex (both sides change or read
 * the sleepers list under it, the flag written before A's locked step and
 * read after B's), which is what this model's total order assumes.
 *
 * Checked: no invalid end state (A's join always ends: B always leaves its
 * loop), and when B has left: it is not listed as a sleeper, counted awake,
 * and no unpark is left pending on its token (a stale token would end a
 * later park that nobody counted). BROKEN_NO_RECHECK drops the check in
 * park(): spin must find the hang; WITNESS shows that the check's branch
 * is reached (the flag set between the loop's check and the listing).
 */

#define EMPTY    0
#define PARKED   1
#define NOTIFIED 2

bool flag = false;     /* the hand-back request */
bool listed = false;   /* B's worker in idle_state's sleepers */
bool awake = true;     /* counted unparked in the idle word */
byte token = EMPTY;    /* B's parker */
bool b_done = false;   /* B's thread ended (A's join returns) */

#ifndef SPONTANEOUS
#define SPONTANEOUS 1
#endif

inline unpark() {
    d_step {
        token = NOTIFIED  /* the futex wake / eventfd write are implied: B's wait below ends */
    }
}

/* parker::park: consume a pending unpark, else sleep until one comes (or,
   parked on the driver, until the driver returns by itself). */
inline park_token(allow_spontaneous) {
    atomic {
        if
        :: token == NOTIFIED -> token = EMPTY; woke_by_unpark = true
        :: token == EMPTY -> token = PARKED
        fi
    }
    if
    :: woke_by_unpark -> skip
    :: else ->
        if
        :: token == NOTIFIED -> token = EMPTY; woke_by_unpark = true
        :: allow_spontaneous && spont > 0 ->
            /* park_on_driver's leave(): exchange(empty), woken by an
               unpark iff that read `notified` */
            atomic { spont--; woke_by_unpark = (token == NOTIFIED); token = EMPTY }
        fi
    fi
}

proctype StandIn() {
    bool woke_by_unpark = false;
    byte spont = SPONTANEOUS;
loop:
    if
    :: flag -> goto out            /* run_loop's head */
    :: else -> skip
    fi;
    /* park(): to_parked */
    d_step { listed = true; awake = false };
#ifndef BROKEN_NO_RECHECK
    if
    :: flag ->
#ifdef WITNESS
        assert(7 != 7);             /* vacuity: the race this check closes happens */
#endif
        bool took_self;
        d_step {                    /* unpark_self */
            if
            :: listed -> listed = false; awake = true; took_self = true
            :: else -> took_self = false
            fi
        };
        if
        :: !took_self -> woke_by_unpark = false; park_token(false)  /* consume the unpark on its way */
        :: else -> skip
        fi;
        goto loop
    :: else -> skip
    fi;
#endif
    woke_by_unpark = false;
    park_token(true);
    if
    :: !woke_by_unpark ->           /* the driver returned by itself */
        bool took;
        d_step {
            if
            :: listed -> listed = false; awake = true; took = true
            :: else -> took = false
            fi
        };
        if
        :: !took -> park_token(false)
        :: else -> skip
        fi
    :: else -> skip
    fi;
    goto loop;
out:
    assert(!listed);
    assert(awake);
    b_done = true
}

proctype HandBack() {
    bool unparks;
    flag = true;
    d_step {                        /* unpark_self for w */
        if
        :: listed -> listed = false; awake = true; unparks = true
        :: else -> unparks = false
        fi
    };
    if
    :: unparks -> unpark()
    :: else -> skip
    fi;
    b_done;                         /* join */
    assert(token == EMPTY)
}

proctype Notifier() {
    bool unparks;
    d_step {                        /* worker_to_notify picking B */
        if
        :: listed -> listed = false; awake = true; unparks = true
        :: else -> unparks = false
        fi
    };
    if
    :: unparks -> unpark()
    :: else -> skip
    fi
}

init {
    atomic {
        run StandIn();
        run HandBack();
#ifndef NO_NOTIFIER
        run Notifier()
#endif
    }
}
