/*
 * idle.pml - the scheduler's idle protocol (who searches, who sleeps, who is
 * woken), checked for lost wakeups with spin.
 *
 * Mirrors (read these side by side):
 *   src/scheduler/idle.hpp          idle_state::worker_to_notify, should_wake,
 *                                   try_become_searching, stop_searching,
 *                                   to_parked (state_ = parked<<32|searching,
 *                                   modelled as unparked = NW - parked,
 *                                   sleepers_ under mutex_)
 *   src/scheduler/multi_thread.cpp  multi_thread_scheduler::run, next_task,
 *                                   pop_injector_batch, search, found_work,
 *                                   run_task, park, notify_one,
 *                                   notify_if_work_pending, schedule, push_local
 *   src/scheduler/park.hpp          parker::park / park_on_driver / unpark (the token)
 * The code points back here (idle.hpp: "model: spec/idle.pml").
 *
 * Memory model. Promela executes one statement at a time in a single global
 * order: its semantics is sequential consistency. That is exactly what the
 * code relies on: the publish of work (local_queue::push CAS, injector len_
 * fetch_add) and the checks of the idle word (should_wake,
 * try_become_searching) and the decrements (stop_searching, to_parked) and
 * the re-check loads (local_queue::is_empty, injector::is_empty) are all
 * seq_cst, so they lie in one total order S, which is what this model
 * enumerates. The argument of idle.hpp ("either the producer sees
 * searching == 0, or the last searcher's re-check sees the work") is a
 * statement about S; the model checks it. It does NOT check that every
 * access in the code really is seq_cst (a relaxed load would break the
 * argument but not this model) - that is a code review / TSan matter.
 *
 * Abstraction:
 *   - the packed word is the pair (unparked, searching), each RMW one step;
 *   - sleepers_ is an array stack, touched only under mtx (mutex_);
 *   - a queue (local ring, injector) is its number of tasks; a push / pop /
 *     steal claim is one atomic step (their own correctness is checked by
 *     tests/local_queue_test.cpp and injector_test.cpp, not here);
 *   - the parker is one token bit per worker;
 *   - "running a task" is a step that may produce more work: spawn
 *     (schedule: the LIFO next slot, displacing the previous occupant to the
 *     ring with push_local + notify_one), requeue (push_local + notify_one),
 *     yield (injector push + notify_one). An outside thread pushes
 *     EXT_ITEMS tasks into the injector, each followed by notify_one.
 *   - shutdown: once the outside thread is done and no task is left
 *     anywhere (pending == 0), workers may leave run() / park() - this stands
 *     for stopping_ + take_all_sleepers + unpark in shutdown().
 *
 * Properties:
 *   (a) no lost wakeup: a state where no statement can run (every worker is
 *       blocked in park() with no token, the outside thread finished) while a
 *       task is still queued somewhere violates the assertion of proctype
 *       lost_wakeup_monitor ("timeout" is spin's "nothing else can move");
 *   (b) no invalid end state (pan's default check; a worker blocked on the
 *       mutex or in park at the end is reported);
 *   (c) chain wake / notify decisions: whenever worker_to_notify decides not to
 *       wake anybody, at that very step either somebody searches or nobody
 *       sleeps (assert in should_wake_step). In particular the last searcher
 *       that finds work (found_work) wakes a sleeper when there is one and
 *       nobody else searches.
 *
 * Bounds / options (-D on the spin command line):
 *   NW (3) workers; EXT_ITEMS (1) tasks from outside; INT_ITEMS (2) tasks
 *   produced by running tasks; STEAL_ATTEMPTS (1) steal tries per search,
 *   each on a nondeterministically chosen victim (so a search may miss work,
 *   as the random victims of the code may); TICK (off) adds next_task's
 *   every-global_queue_interval injector pop as a nondeterministic choice
 *   (checked by hand: 21.6 M states, errors 0; off in CI for time);
 *   WITNESS=<W_*> makes that kind of wake an error (vacuity check).
 *
 *   SPONTANEOUS=<n> lets up to n parks end without a token, as a park on
 *   the I/O driver does when I/O or a timer ends it (parker::park_on_driver
 *   returns false), followed by idle_state::unpark_self.
 *
 * Broken variants (must FAIL, see spec/run.sh):
 *   -DBROKEN_STALE_TOKEN (with SPONTANEOUS)  after a park that ended by
 *       itself, a worker a notifier already counted does not consume the
 *       notifier's token: a later park ends on it uncounted, and the counts
 *       (unparked + sleepers == NW) break.
 *   -DBROKEN_LONE_NOT_SEARCHING  a lone worker (NW == 1) does not become a
 *       searcher before it parks (it has no victims), so it parks with
 *       was_searching == false and skips the re-check: the lost wakeup the
 *       team fixed in multi_thread.cpp search().
 *   -DBROKEN_NO_RECHECK  park() never calls notify_if_work_pending.
 */

#ifndef NW
#define NW 3            /* workers */
#endif
#ifndef EXT_ITEMS
#define EXT_ITEMS 1     /* tasks pushed from outside (injector + notify_one) */
#endif
#ifndef INT_ITEMS
#define INT_ITEMS 2     /* tasks produced by running tasks (spawn/requeue/yield) */
#endif
#ifndef STEAL_ATTEMPTS
#define STEAL_ATTEMPTS 1 /* cfg.steal_attempts; the victim is chosen nondeterministically */
#endif

#define NONE 255

/* who calls notify_one (for the -DWITNESS=<kind> vacuity checks) */
#define W_OUTSIDE     1   /* schedule() from outside: injector push */
#define W_PUSH_LOCAL  2   /* push_local */
#define W_YIELD       3   /* run_task: poll_outcome::yield */
#define W_CHAIN       4   /* found_work: the last searcher found work */
#define W_RECHECK     5   /* park: the last searcher's notify_if_work_pending */

/* idle_state::state_ = pack(parked, searching), parked = NW - unparked */
byte unparked = NW;
byte searching = 0;
/* idle_state::mutex_ and sleepers_ */
bit mtx = 0;
byte sleepers[NW];
byte nsleep = 0;

/* the work */
byte q[NW];          /* worker::queue, tasks in [head, tail) */
byte injector = 0;   /* injector_.len_ */
bit token[NW];       /* worker::park (parker::token_) */

#ifdef SPONTANEOUS
byte spont = SPONTANEOUS;  /* driver parks that may end by themselves */
#endif

/* ghosts */
byte pending = 0;          /* tasks produced and not yet finished running */
byte int_budget = INT_ITEMS;
bit ext_done = 0;          /* the outside producer has finished */

#define stopping (ext_done && pending == 0)


#include "idle_notify.pml"

/* multi_thread_scheduler::push_local: ring push (seq_cst CAS), notify_one */
inline push_local(me, w, res) {
  q[me]++;
  notify_one(w, res, W_PUSH_LOCAL)
}

/* multi_thread_scheduler::pop_injector_batch: t = 1 if a task was taken;
 * the rest of the batch goes to the local ring, each with push_local. */
inline pop_injector_batch(me, t, n, w, res) {
  if
  :: injector == 0 -> skip                       /* is_empty(): seq_cst load */
  :: else ->
     atomic {                                    /* pop_batch under its lock */
       n = injector / NW + 1;                    /* fair_share */
       if :: n > injector -> n = injector :: else -> skip fi;
       injector = injector - n
     }
     if
     :: n > 0 ->
        t = 1; n--;
        do
        :: n > 0 -> n--; push_local(me, w, res)
        :: else -> break
        od
     :: else -> skip
     fi
  fi
}

/* multi_thread_scheduler::next_task */
inline next_task(me, t, n, w, res) {
  t = 0;
#ifdef TICK
  /* every global_queue_interval ticks: injector_.pop() first (the tick is
     abstracted to a nondeterministic choice) */
  if
  :: atomic { injector > 0 -> injector--; t = 1 }
  :: true -> skip
  fi;
#endif
  if
  :: t -> skip
  :: else ->
     if
     :: nxt -> nxt = 0; t = 1     /* only the owner touches next */
     :: else -> skip
     fi;
     if
     :: t -> skip
     :: else ->
        if
        :: atomic { q[me] > 0 -> q[me]--; t = 1 }   /* queue.pop() */
        :: else -> skip
        fi;
        if
        :: t -> skip
        :: else -> pop_injector_batch(me, t, n, w, res)
        fi
     fi
  fi
}

/* multi_thread_scheduler::search */
inline search(me, srch, t, n, w, res, i, v) {
  res = 0;
  if
  :: srch -> res = 1
#ifdef BROKEN_LONE_NOT_SEARCHING
  :: !srch && NW == 1 -> res = 0   /* BUG: "nobody to steal from": no search */
  :: !srch && NW > 1 ->
#else
  :: else ->
#endif
     /* idle_state::try_become_searching: a load, then a fetch_add */
     if
     :: 2 * searching >= NW -> res = 0
     :: else -> searching++; res = 1
     fi
  fi;
  if
  :: !res -> pop_injector_batch(me, t, n, w, res)
  :: else ->
     srch = 1;
     i = 0;
     do
     :: i < STEAL_ATTEMPTS && NW > 1 ->
        /* a random other victim; steal_into claims the older half (one
           CAS). The choice is local, so it is folded into the claim step. */
        atomic {
          i++;
          select(v : 1 .. NW - 1);
          v = (me + v) % NW;
          if
          :: q[v] > 0 -> n = (q[v] + 1) / 2; q[v] = q[v] - n; t = 1
          :: else -> n = 0
          fi;
          v = 0
        }
        if
        :: t ->
           /* ... then publish n - 1 of them into our own ring (seq_cst CAS
              on dst; no notify: found_work's chain wake covers it) */
           d_step { q[me] = q[me] + n - 1; n = 0; i = 0 }
           break
        :: else -> skip
        fi
     :: else -> i = 0; break
     od;
     if
     :: !t -> pop_injector_batch(me, t, n, w, res)
     :: else -> skip
     fi
  fi
}

/* multi_thread_scheduler::found_work + idle_state::stop_searching */
inline found_work(srch, w, res) {
  if
  :: srch ->
     srch = 0;
     d_step { res = (searching == 1); searching-- }
     if
     :: res -> notify_one(w, res, W_CHAIN)   /* (c) the chain wake; asserted in should_wake_step */
     :: else -> skip
     fi
  :: else -> skip
  fi
}

/* multi_thread_scheduler::run_task: the task may produce more work */
inline run_task(me, w, res) {
  do
  :: atomic { int_budget > 0 -> int_budget--; pending++ } ->
     if
     :: /* schedule(spawn) from a worker: the next slot; a displaced task goes
           to the ring with push_local */
        if
        :: nxt == 0 -> nxt = 1
        :: else -> push_local(me, w, res)   /* nxt stays occupied (by the new task) */
        fi
     :: /* poll_outcome::requeue */
        push_local(me, w, res)
     :: /* poll_outcome::yield: injector push (seq_cst), then notify_one */
        injector++;
        notify_one(w, res, W_YIELD)
     fi
  :: true -> break
  od;
  pending--
}

/* multi_thread_scheduler::park */
inline park(me, srch, w, res) {
  /* idle_state::to_parked under mutex_ */
  /* lock; state_.fetch_add(pack(1, 0) - pack(0, was_searching)); sleepers_.push_back;
     unlock - the whole locked section is one step */
  atomic {
    mtx == 0 ->
    res = (srch && searching == 1);
    unparked--;
    if :: srch -> searching-- :: else -> skip fi;
    assert(nsleep < NW);   /* a worker is listed at most once */
    sleepers[nsleep] = me; nsleep++
  }
  srch = 0;
#ifndef BROKEN_NO_RECHECK
  if
  :: res ->
     /* notify_if_work_pending: every ring, then the injector (seq_cst loads) */
     w = 0; res = 0;
     do
     :: w < NW ->
        if
        :: q[w] > 0 -> res = 1; break
        :: else -> w++
        fi
     :: else -> break
     od;
     if
     :: !res && injector > 0 -> res = 1
     :: else -> skip
     fi;
     if
     :: res -> notify_one(w, res, W_RECHECK)
     :: else -> w = 0
     fi
  :: else -> skip
  fi;
#endif
  res = 0;
  /* parker::park: consume the token, sleeping until there is one */
  if
  :: atomic { token[me] -> token[me] = 0 } ->
     srch = 1                /* whoever woke us counted us as searching */
  :: stopping -> goto done   /* shutdown(): take_all_sleepers + unpark */
#ifdef SPONTANEOUS
  :: atomic { spont > 0 -> spont-- } ->
     /* parker::park_on_driver returned without a token (I/O, a timer, a
        stale driver token): idle_state::unpark_self under mutex_ */
     atomic {
       mtx == 0 ->
       w = 0;
       do
       :: w < nsleep && sleepers[w] != me -> w++
       :: w < nsleep && sleepers[w] == me -> res = 1; break
       :: w >= nsleep -> break
       od;
       if
       :: res ->   /* sleepers_.erase(it); state_.fetch_add(one_unparked_searcher) */
          do
          :: w + 1 < nsleep -> sleepers[w] = sleepers[w + 1]; w++
          :: else -> break
          od;
          nsleep--; sleepers[nsleep] = 0; unparked++; searching++
       :: else -> skip
       fi;
       w = 0
     }
#ifndef BROKEN_STALE_TOKEN
     if
     :: res -> skip
     :: else ->
        /* a notifier took us off the list and counted us: its unpark is
           on the way; park once more to consume it (multi_thread.cpp park) */
        if
        :: atomic { token[me] -> token[me] = 0 }
        :: stopping -> goto done
        fi
     fi;
#endif
     res = 0;
     srch = 1
#endif
  fi
}

proctype worker(byte me) {
  bit srch = 0;   /* worker::searching */
  bit nxt = 0;    /* worker::next, the LIFO slot (only the owner touches it) */
  bit t = 0;
  byte n, w, res, i, v;

  /* while (!stopping()): the shutdown exit is taken in park() (a worker
     that sees stopping at the loop top would find nothing and park anyway) */
  do
  :: next_task(me, t, n, w, res);
     if
     :: !t -> search(me, srch, t, n, w, res, i, v)
     :: else -> skip
     fi;
     if
     :: t -> found_work(srch, w, res); run_task(me, w, res)
     :: else -> park(me, srch, w, res)
     fi
  od;
done:
  skip
}

/* A thread outside the runtime spawning: schedule() with no worker:
 * injector_.push(t) then notify_one(). */
proctype outside() {
  byte i = 0, w, res;
  do
  :: i < EXT_ITEMS ->
     d_step { injector++; pending++ }
     notify_one(w, res, W_OUTSIDE);
     i++
  :: else -> break
  od;
  ext_done = 1
}

/* (a) Nothing can move: every worker sleeps without a token and the outside
 * thread is done. Then no task may be left anywhere. */
active proctype lost_wakeup_monitor() {
end:
  timeout -> assert(pending == 0)
}

init {
  byte k;
  atomic {
    k = 0;
    do
    :: k < NW -> run worker(k); k++
    :: else -> break
    od;
    run outside()
  }
}
