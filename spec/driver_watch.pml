/*
 * driver_watch.pml - who watches the I/O driver: interest (an armed timer, a
 * registered socket) is never stranded while every worker sleeps, with the
 * rule that the last worker to park sleeps on its futex when there is no
 * interest. Checked with spin.
 *
 * Mirrors (read these side by side):
 *   src/scheduler/multi_thread.cpp  multi_thread_scheduler::park,
 *                                   futex_will_do (the claim is the comment
 *                                   above it), park_on_driver,
 *                                   try_take_driver, release_driver,
 *                                   poll_driver, poll_driver_when_dry,
 *                                   poll_after_send, next_task (the
 *                                   event_interval poll), run, schedule (a
 *                                   wake: the next slot, a displaced task to
 *                                   the ring with push_local + notify_one),
 *                                   notify_one, notify_if_work_pending
 *   src/scheduler/idle.hpp          idle_state::to_parked, unpark_self,
 *                                   all_parked, worker_to_notify,
 *                                   try_become_searching, stop_searching
 *   src/scheduler/park.hpp          parker::park, park_on_driver, unpark
 *   src/io/driver.hpp               driver::has_interest (armed_ +
 *                                   reactor::registered(), relaxed hints)
 * The lost-wakeup side of the idle protocol is spec/idle.pml's job; this
 * model keeps the same idle protocol (so wake decisions are the real ones)
 * over a simpler queue, and adds the driver.
 *
 * Memory model. Promela is sequentially consistent: one statement at a time,
 * one global order. The code's futex_will_do() reads has_interest() with a
 * RELAXED load (armed_, registered_ are hints), after to_parked(), which
 * takes idle_state's mutex and does a seq_cst RMW on the idle word; the
 * argument in the code is that every other worker's to_parked (and the
 * interest it added before parking) happens-before the last parker's
 * to_parked (the mutex), so the relaxed load cannot return a value older
 * than that interest; a worker's own add is sequenced before its own load.
 * The model takes that ordering as given: it checks the protocol (the
 * interleavings of these steps in one total order), not that the
 * mutex/seq_cst/relaxed annotations deliver it (review, TSan, tests).
 *
 * Abstraction:
 *   - the idle word (unparked, searching), sleepers_ under mtx, parker
 *     tokens, notify_one / worker_to_notify: as in spec/idle.pml, each
 *     locked section or RMW one step;
 *   - work: `ready` counts the runnable tasks in every ring and the injector
 *     (one stealable pool: a pop, a steal, a batch pop are one step on it);
 *     `nxt` is a worker's own next slot (not stealable). A worker that finds
 *     nothing in nxt / ready polls the driver if it has interest
 *     (poll_driver_when_dry), then searches (try_become_searching, one more
 *     look at ready), then parks;
 *   - interest: `timers` (armed_) + `ios` (reactor registrations awaiting
 *     readiness); has_interest() is timers + ios > 0. A running task may arm
 *     a timer / register a socket and wait on it (it stays pending, not
 *     runnable); interest goes away only when the driver delivers it: a
 *     worker parked in the driver (epoll_wait) or a worker polling it while
 *     busy (poll_driver from next_task's event_interval tick or when dry:
 *     only with has_interest(); poll_after_send from a running task: without
 *     that check; both try-lock the driver, poll, release) delivers one or
 *     more: each delivered waker makes its task runnable on the delivering
 *     worker (schedule: the next slot, a displaced task to the ring with
 *     push_local + notify_one). A poll may deliver nothing (not due yet);
 *     a driver park returns only on an unpark, a delivery, shutdown, or
 *     (-DSPURIOUS=n) up to n times by itself (an early epoll return, a stale
 *     driver token);
 *   - try_take_driver (relaxed load + exchange) is one test-and-set step;
 *     release_driver one store;
 *   - a task's poll: maybe spawn (SPAWNS in all), maybe poll_after_send,
 *     then complete, or arm interest (ARMS in all) and wait for it;
 *   - TASKS tasks are in the injector when the workers start; shutdown: once
 *     no task is pending (so no interest either), parked workers leave
 *     (stopping_ + take_all_sleepers + unpark in shutdown()).
 *
 * Properties:
 *   (a) interest is never stranded: stranding_monitor's `timeout` (nothing
 *       can move: every worker sleeps on its futex with no token, or in the
 *       driver with no token and nothing to deliver) asserts
 *       timers + ios == 0. A worker parked in the driver with interest can
 *       always move (deliver), so a timeout with interest is exactly "every
 *       worker asleep, interest > 0, nobody in the driver";
 *   (b) no task is stranded either (same monitor, pending == 0): a delivered
 *       task runs, and the run ends by shutdown;
 *   (c) pan's invalid-end-state check (a worker stuck on the mutex or asleep
 *       at the end), plus idle.pml's counting asserts (unparked + sleepers
 *       == NW at every wake decision, a worker listed at most once).
 *
 * Bounds / options (-D):
 *   NW (2) workers; TASKS (1) initial tasks; ARMS (2) interest adds in all;
 *   SPAWNS (1) spawns in all; SPURIOUS (0) driver parks that end by
 *   themselves; WITNESS=<W_*> (vacuity, below).
 *
 * Variants of the rule that are NOT bugs (pass jobs, to document it):
 *   -DALL_FUTEX: futex_will_do = !has_interest(), for every parker (the
 *       all_parked() condition dropped). For stranding this is still correct
 *       (it was rejected for speed: mpsc at 2 workers 3.3x slower, see the
 *       comment above futex_will_do): a worker that adds interest parks
 *       after adding it and sees it itself.
 *   -DSTALE_INTEREST: has_interest() read BEFORE to_parked (a read that
 *       may precede another worker's add + park). Also correct in this
 *       model, for the same reason: the worker that added the interest
 *       reads it after its own add and goes for the driver; a parker that
 *       finds the driver taken leaves it to the holder, who is either in
 *       the driver or awake and will park (and look) again.
 *   The old worker loop (every parker tries the driver, futex if taken,
 *   even when the holder is a busy poller) is the code minus futex_will_do;
 *   it is not a bug either: the holder is awake and parks later, looking
 *   again (W_BUSY_HOLDER shows that case is reached). A holder that stays
 *   busy forever only delays delivery (latency, not modelled).
 *
 * Broken variants (must FAIL, see spec/run.sh):
 *   -DBROKEN_NO_INTEREST   futex_will_do = all_parked(): the last parker
 *       sleeps on its futex even with a timer armed (stranded interest).
 *   -DBROKEN_TIMERS_ONLY   futex_will_do looks at timers_armed() only, not
 *       at socket registrations (driver::timers_armed() is right next to
 *       has_interest()): a registered socket is stranded.
 *   -DBROKEN_NO_UNPARK_SELF  a driver park that ended by itself (a
 *       delivery) is taken as spurious and the worker futex-parks again
 *       instead of idle_state::unpark_self: the delivered task in its next
 *       slot is stranded (pending > 0).
 *
 * Vacuity witnesses (-DWITNESS=<W_*> turns the event into an assertion that
 * must fail): W_PARK_DELIVER a driver park delivers; W_POLL_DELIVER a busy
 * poll delivers; W_BUSY_HOLDER a parker that saw interest finds the driver
 * held by a busy poller and sleeps on its futex; W_RULE_FUTEX the new rule
 * sends the last parker to its futex while a task is still pending (spin's
 * example: another worker's driver park has just delivered the only timer,
 * and that worker is still counted parked, before its unpark_self).
 */

#ifndef NW
#define NW 2            /* workers */
#endif
#ifndef TASKS
#define TASKS 1         /* tasks in the injector when the workers start */
#endif
#ifndef ARMS
#define ARMS 2          /* timers armed / sockets registered by running tasks, in all */
#endif
#ifndef SPAWNS
#define SPAWNS 1        /* tasks spawned by running tasks, in all */
#endif

#define NONE 255

#define W_PARK_DELIVER 1
#define W_POLL_DELIVER 2
#define W_BUSY_HOLDER  3
#define W_RULE_FUTEX   4

#ifdef WITNESS
#define witness(k) assert(WITNESS != (k))
#else
#define witness(k) skip
#endif

/* idle_state::state_ = pack(unparked, searching), mutex_, sleepers_ */
byte unparked = NW;
byte searching = 0;
bit mtx = 0;
byte sleepers[NW];
byte nsleep = 0;
bit token[NW];          /* worker::park (parker::token_ == notified) */

/* the driver */
bit driver_taken = 0;   /* multi_thread_scheduler::driver_taken_ */
bit holder_busy = 0;    /* ghost: the holder is a busy poller, not a parker */
byte timers = 0;        /* driver::armed_ */
byte ios = 0;           /* reactor::registered() awaiting readiness */
#define interest (timers + ios)
#ifdef SPURIOUS
byte spurious = SPURIOUS;
#endif

/* the work */
byte ready = TASKS;     /* runnable tasks in rings + injector */
byte pending = TASKS;   /* ghost: tasks not complete (runnable, running, or waiting on interest) */
byte arms = ARMS;
byte spawns = SPAWNS;

#define stopping (pending == 0)

/* ---- the idle protocol: the wake decision is idle.pml's, shared ------------------ */

#include "idle_notify.pml"

/* schedule() of a woken or spawned task on this worker: the next slot; a
 * displaced task goes to the ring (push_local: push, notify_one) */
inline schedule_here(w, res) {
  if
  :: nxt == 0 -> nxt = 1
  :: else -> ready++; notify_one(w, res, 0)
  fi
}

/* ---- the driver ------------------------------------------------------------------- */

/* driver::poll / the end of driver::park: fire what is ready, one delivery
 * a step. m = 1: at least one (a park that returned because of it); 0 after. */
inline deliver(kind, w, res) {
  do
  :: atomic { timers > 0 -> timers--; m = 0; witness(kind) } -> schedule_here(w, res)
  :: atomic { ios > 0 -> ios--; m = 0; witness(kind) } -> schedule_here(w, res)
  :: m == 0 -> break
  od
}

/* multi_thread_scheduler::poll_driver (the busy poll: next_task's
 * event_interval tick, poll_driver_when_dry); polled = 1 if it polled */
inline poll_driver(polled, w, res) {
  polled = 0;
  if
  :: interest > 0 ->                 /* has_interest(): relaxed hint */
     atomic { if :: driver_taken == 0 -> driver_taken = 1; holder_busy = 1; polled = 1 :: else -> skip fi }
  :: else -> skip
  fi;
  if
  :: polled ->
     m = 0; deliver(W_POLL_DELIVER, w, res);
     atomic { holder_busy = 0; driver_taken = 0 }   /* release_driver */
  :: else -> skip
  fi
}

/* multi_thread_scheduler::poll_after_send: from a running task, no interest
 * check; driver.io().wait(0) */
inline poll_after_send(polled, w, res) {
  if
  :: NW > 1 ->
     atomic { if :: driver_taken == 0 -> driver_taken = 1; holder_busy = 1; polled = 1 :: else -> polled = 0 fi }
     if
     :: polled ->
        m = 0; deliver(W_POLL_DELIVER, w, res);
        atomic { holder_busy = 0; driver_taken = 0; polled = 0 }
     :: else -> skip
     fi
  :: else -> skip
  fi
}

/* ---- the worker ------------------------------------------------------------------- */

/* the own next slot, then the rings / injector (pop, pop_injector_batch) */
inline take_local(t) {
  if
  :: nxt -> nxt = 0; t = 1
  :: else -> atomic { if :: ready > 0 -> ready--; t = 1 :: else -> t = 0 fi }
  fi
}

/* multi_thread_scheduler::search: try_become_searching (a load, then a
 * fetch_add), then steal / the injector: one more look at the pool */
inline search(t) {
  if
  :: srch -> skip
  :: else ->
     if
     :: 2 * searching >= NW -> skip
     :: else -> searching++; srch = 1
     fi
  fi;
  atomic { if :: ready > 0 -> ready--; t = 1 :: else -> t = 0 fi }
}

/* multi_thread_scheduler::found_work + idle_state::stop_searching */
inline found_work(w, res) {
  if
  :: srch ->
     srch = 0;
     d_step { res = (searching == 1); searching-- }
     if
     :: res -> notify_one(w, res, 0)
     :: else -> skip
     fi
  :: else -> skip
  fi
}

/* multi_thread_scheduler::run_task: the task's poll */
inline run_task(polled, w, res) {
  do
  :: atomic { spawns > 0 -> spawns--; pending++ } -> schedule_here(w, res)
  :: true -> break
  od;
  if
  :: poll_after_send(polled, w, res)
  :: true -> skip
  fi;
  if
  :: atomic { arms > 0 -> arms--; timers++ }    /* add_timer: waits for it */
  :: atomic { arms > 0 -> arms--; ios++ }       /* register_fd: waits for readiness */
  :: pending--                                   /* complete */
  fi
}

/* parker::park (the futex): until the token, or shutdown */
inline futex_park() {
  if
  :: atomic { token[me] -> token[me] = 0 }
  :: stopping -> goto done
  fi
}

/* idle_state::unpark_self: res = 1 if still listed (now unparked, searching) */
inline unpark_self(w, res) {
  atomic {
    mtx == 0 ->
    w = 0; res = 0;
    do
    :: w < nsleep && sleepers[w] != me -> w++
    :: w < nsleep && sleepers[w] == me -> res = 1; break
    :: w >= nsleep -> break
    od;
    if
    :: res ->
       do
       :: w + 1 < nsleep -> sleepers[w] = sleepers[w + 1]; w++
       :: else -> break
       od;
       nsleep--; sleepers[nsleep] = 0; unparked++; searching++
    :: else -> skip
    fi;
    w = 0
  }
}

/* multi_thread_scheduler::park */
inline park(fw, took, notified, w, res) {
#ifdef STALE_INTEREST
  fw = (interest == 0);       /* VARIANT: has_interest() read before to_parked */
#endif
  /* idle_state::to_parked: the locked section in one step */
  atomic {
    mtx == 0 ->
    res = (srch && searching == 1);
    unparked--;
    if :: srch -> searching-- :: else -> skip fi;
    assert(nsleep < NW);
    sleepers[nsleep] = me; nsleep++
  }
  srch = 0;
  if
  :: res ->                   /* notify_if_work_pending */
     if
     :: ready > 0 -> notify_one(w, res, 0)
     :: else -> skip
     fi
  :: else -> skip
  fi;
  res = 0;
  /* futex_will_do(): !has_interest() (relaxed), then all_parked() (seq_cst) */
#if defined(BROKEN_NO_INTEREST)
  fw = 1;                     /* BUG: interest ignored */
#elif defined(BROKEN_TIMERS_ONLY)
  fw = (timers == 0);         /* BUG: timers_armed() only */
#elif !defined(STALE_INTEREST)
  fw = (interest == 0);
#endif
#ifndef ALL_FUTEX
  if
  :: fw -> atomic { fw = (unparked == 0); if :: fw && pending > 0 -> witness(W_RULE_FUTEX) :: else -> skip fi }
  :: else -> skip
  fi;
#endif
  if
  :: !fw ->                   /* try_take_driver */
     atomic {
       if
       :: driver_taken == 0 -> driver_taken = 1; took = 1
       :: else -> took = 0;
          if :: interest > 0 && holder_busy -> witness(W_BUSY_HOLDER) :: else -> skip fi
       fi
     }
  :: else -> took = 0
  fi;
  fw = 0;
  if
  :: took ->
     /* park_on_driver: parker::park_on_driver(d) -> driver::park */
     if
     :: atomic { token[me] -> token[me] = 0; notified = 1 }   /* an unpark ended it (or came first) */
     :: interest > 0 ->
        m = 1; deliver(W_PARK_DELIVER, w, res);
        atomic { notified = token[me]; token[me] = 0 }      /* parker::leave() */
#ifdef SPURIOUS
     :: atomic { spurious > 0 -> spurious--; notified = token[me]; token[me] = 0 }
#endif
     :: stopping -> goto done
     fi;
     d_step { driver_taken = 0; took = 0 }                  /* release_driver */
     if
     :: !notified ->
#ifdef BROKEN_NO_UNPARK_SELF
        futex_park()          /* BUG: as if nothing had happened */
#else
        unpark_self(w, res);
        if
        :: res -> skip
        :: else -> futex_park()   /* a notifier counted us: take its unpark */
        fi
#endif
     :: else -> skip
     fi;
     notified = 0; res = 0
  :: else ->
     futex_park()
  fi;
  srch = 1                    /* whoever woke us (maybe we) counted us searching */
}

proctype worker(byte me) {
  bit srch = 0;     /* worker::searching */
  bit nxt = 0;      /* worker::next */
  bit t = 0, fw = 0, took = 0, notified = 0, polled = 0, m = 0;
  byte w = 0, res = 0;

  do
  :: /* next_task: maybe the event_interval poll first */
     if
     :: poll_driver(polled, w, res); polled = 0
     :: true -> skip
     fi;
     take_local(t);
     if
     :: !t ->                 /* poll_driver_when_dry */
        poll_driver(polled, w, res);
        if
        :: polled -> polled = 0; take_local(t)
        :: else -> skip
        fi
     :: else -> skip
     fi;
     if
     :: !t -> search(t)
     :: else -> skip
     fi;
     if
     :: t -> t = 0; found_work(w, res); run_task(polled, w, res)
     :: else -> park(fw, took, notified, w, res)
     fi
  od;
done:
  skip
}

/* (a), (b): nothing can move. */
active proctype stranding_monitor() {
end:
  timeout -> assert(interest == 0); assert(pending == 0)
}

init {
  byte k;
  atomic {
    k = 0;
    do
    :: k < NW -> run worker(k); k++
    :: else -> break
    od
  }
}
