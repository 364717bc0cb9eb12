/*
 * idle_notify.pml - the wake decision of the idle protocol, shared by
 * spec/idle.pml and spec/driver_watch.pml (each #includes it after
 * declaring the idle word and the tokens: unparked, searching, mtx,
 * sleepers[NW], nsleep, token[NW], and NONE). One copy, so that the two
 * models check the same notify_one.
 *
 * Mirrors src/scheduler/idle.hpp (idle_state::should_wake,
 * worker_to_notify) and src/scheduler/multi_thread.cpp (notify_one) with
 * src/scheduler/park.hpp (parker::unpark).
 *
 * notify_one's `kind` names the caller for idle.pml's -DWITNESS=<kind>
 * vacuity checks; a model with other witnesses passes 0, which no WITNESS
 * value equals.
 */

/* should_wake(): searching(s) == 0 && parked(s) != 0 (parked = NW - unparked
 * here, as in idle.pml), one seq_cst
 * load. (c): when the answer is "no", at this very step either somebody is
 * searching (it will re-check or chain-wake) or nobody sleeps. unparked is
 * decremented and the sleeper pushed in one locked step of to_parked, so
 * unparked < NW <=> nsleep > 0 is also checked here. */
inline should_wake_step(res) {
  atomic {
    assert(unparked + nsleep == NW);
    if
    :: searching == 0 && unparked < NW -> res = 1
    :: else -> res = 0; assert(searching > 0 || nsleep == 0)
    fi
  }
}

/* idle_state::worker_to_notify + multi_thread_scheduler::notify_one:
 * w is the woken worker or NONE. */
inline notify_one(w, res, kind) {
  w = NONE;
  should_wake_step(res);
  if
  :: res ->
     /* lock(); the re-check and sleepers_.empty() (sleepers_ only changes
        under the lock, so taking the lock and reading are one step; on "no"
        the unlock is folded in too: nothing else happens in between) */
     atomic {
       mtx == 0 -> mtx = 1;
       if
       :: searching == 0 && unparked < NW && nsleep > 0 -> res = 1
       :: else -> res = 0; assert(searching > 0 || nsleep == 0); mtx = 0
       fi
     }
     if
     :: res ->
        /* state_.fetch_add(one_unparked_searcher); sleepers_.back(); pop_back(); unlock */
        d_step { unparked++; searching++; nsleep--; w = sleepers[nsleep]; sleepers[nsleep] = 0; mtx = 0 }
     :: else -> skip
     fi
  :: else -> skip
  fi;
  if
  :: w != NONE ->
     d_step {
#ifdef WITNESS
       assert(kind != WITNESS);   /* vacuity check: this kind of wake happens */
#endif
       token[w] = 1; w = 0; res = 0   /* parker::unpark, after the unlock */
     }
  :: else -> d_step { w = 0; res = 0 }
  fi
}
