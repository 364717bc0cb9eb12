// Worker loop and producer side of the idle protocol (idle.hpp); modelled
// in spec/idle.pml (search, found_work, park, notify_one,
// notify_if_work_pending use the model's names).
#include "scheduler/multi_thread.hpp"

#include "blocking/blocking_pool.hpp"

#include <aspen/detail/fork_block.hpp>

#include <pthread.h>

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

namespace aspen::detail {

worker_metrics worker_counters::read() const noexcept {
    worker_metrics m;
    m.polls = polls.get();
    m.tasks_spawned = tasks_spawned.get();
    m.tasks_completed = tasks_completed.get();
    m.next_slot_runs = next_slot_runs.get();
    m.inlined_joins = inlined_joins.get();
    m.local_pushes = local_pushes.get();
    m.overflows = overflows.get();
    m.overflow_tasks = overflow_tasks.get();
    m.injector_pops = injector_pops.get();
    m.steal_operations = steal_operations.get();
    m.tasks_stolen = tasks_stolen.get();
    m.failed_steals = failed_steals.get();
    m.parks = parks.get();
    m.unparks = unparks.get();
    m.send_polls = send_polls.get();
    m.budget_forced_yields = budget_forced_yields.get();
    for (std::size_t i = 0; i < poll_time_buckets; ++i) m.poll_time_histogram[i] = poll_time[i].get();
    m.poll_time_ns = poll_time_ns.get();
    m.longest_poll_ns = longest_poll_ns.get();
    m.busy_ns = busy.read();
    return m;
}

[[gnu::cold, gnu::noinline]] poll_outcome timed_poll(task_header* t, worker_counters& c) noexcept {
    auto start = std::chrono::steady_clock::now();
    poll_outcome o = poll_task(t);
    c.record_poll_time(std::chrono::steady_clock::now() - start);
    return o;
}

void worker_counters::record_poll_time(std::chrono::nanoseconds d) noexcept {
    auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(d.count(), 0));
    // Bucket i >= 1 holds [2^(i-1), 2^i) us: one more than the bit width of
    // the whole microseconds.
    std::size_t bucket = std::min<std::size_t>(std::bit_width(ns / 1000), poll_time_buckets - 1);
    poll_time[bucket].add();
    poll_time_ns.add(ns);
    longest_poll_ns.raise_to(ns);
}

multi_thread_scheduler::worker::worker(multi_thread_scheduler& s, std::size_t i, std::uint32_t capacity)
    : owner(s),
      index(i),
      queue(capacity),
      staged_cap(std::clamp<std::uint32_t>(capacity / 2, 1, std::tuple_size_v<decltype(staged)>)),
      rng(0x9E3779B97F4A7C15ull * (i + 1) | 1),
      ticks_to_injector(s.cfg_.global_queue_interval),
      ticks_to_event(s.cfg_.event_interval),
      batch(capacity / 2 + 1) {}

multi_thread_scheduler::multi_thread_scheduler(const config& cfg)
    : scheduler(cfg, cfg.workers + 1), cfg_(cfg), idle_(cfg.workers), stand_ins_(cfg.blocking_keep_alive) {
    workers_.reserve(cfg.workers);
    for (std::size_t i = 0; i < cfg.workers; ++i)
        workers_.push_back(std::make_unique<worker>(*this, i, cfg.local_queue_capacity));
    for (auto& w : workers_) {
        {
            std::lock_guard lock(places_mutex_);
            ++places_run_;
        }
        try {
            w->thread = std::thread([this, wp = w.get()] { run(*wp); });
        } catch (const std::system_error& e) {
            stop_started_workers(e, w->index);
        }
    }
}

// A worker's thread could not start (EAGAIN: a thread or memory limit).
// The ones already running are stopped and joined (their std::thread
// would terminate the process if destroyed joinable), then the caller
// gets the error.
void multi_thread_scheduler::stop_started_workers(const std::system_error& e, std::size_t failed) {
    {
        std::lock_guard lock(places_mutex_);
        --places_run_;  // the failed worker's place: no thread will give it back
    }
    shutdown();
    throw std::system_error(e.code(), "aspen::runtime: could not start worker thread " + std::to_string(failed + 1) +
                                          " of " + std::to_string(workers_.size()));
}

multi_thread_scheduler::~multi_thread_scheduler() { shutdown(); }

multi_thread_scheduler::worker* multi_thread_scheduler::this_worker() const noexcept {
    const thread_context& ctx = tls();
    return ctx.sched == this ? static_cast<worker*>(ctx.worker) : nullptr;
}

std::size_t multi_thread_scheduler::registry_shard() const noexcept {
    worker* w = this_worker();
    return w ? w->index + 1 : 0;
}

task_header* multi_thread_scheduler::take_local(task_header* want) noexcept {
    worker* w = this_worker();
    return w ? take_local_from_poll(w, want) : nullptr;
}

bool multi_thread_scheduler::in_own_next_slot(const task_header* t) const noexcept {
    const worker* w = this_worker();
    return w && in_next_slot_of(w, t);
}

task_header* multi_thread_scheduler::take_ring_top(worker& w, task_header* want) noexcept {
    task_header* top = w.queue.peek_newest();
    if (!top || (top != want && !may_help())) return nullptr;
    // Ours only once popped: until then a thief may be polling it.
    if (w.queue.pop() != top) return nullptr;  // a thief claimed it since the peek
    if (top->leaf_poll) {
        w.queue.push(top);  // cannot fail: we just freed its slot
        return nullptr;
    }
    if (top != want) spend_help_unit();
    w.counters.inlined_joins.add();
    return top;
}

// ---- producer side ---------------------------------------------------------------
[[gnu::hot]] void multi_thread_scheduler::schedule(task_header* t, schedule_kind kind) {
    worker* w = this_worker();
    if (kind == schedule_kind::spawn) {
        if (w) w->counters.tasks_spawned.add();
        // relaxed: a statistic.
        else remote_spawns_.fetch_add(1, std::memory_order_relaxed);
    }
    if (!w) {
        remote_push_scope in_flight(*this);
        injector_.push(t);  // seq_cst publish, then the check in notify_one
        after_remote_push();
        notify_one();
        return;
    }
    if (kind == schedule_kind::yield) return push_yielded(*w, t);
    if (kind == schedule_kind::requeue) {
        push_local(*w, t);
        return;
    }
    // The next slot is not stealable, so only a displaced task needs a thief.
    // Staged only inside a poll, whose end publishes it; a wake run between
    // polls (the driver's wakers, a completion's joiner) goes to the ring.
    if (task_header* prev = std::exchange(w->next, t)) {
        if (tls_context.current)
            stage(*w, prev);
        else
            push_local(*w, prev);
    }
}

void multi_thread_scheduler::push_local(worker& w, task_header* t) {
    enqueue_local(w, t);
    notify_one();
}

// Behind every task of the worker's ring: the worker reaches it after all
// its other local work, thieves take it first (oldest end), and yields on
// two workers do not meet at the injector's lock. With the ring full or a
// thief copying, the injector.
// Also behind a batch from the injector, when it holds work, pulled into
// the ring's free room above the yielder. In the ring alone the yielder
// kept the ring from running dry, so the injector gave up one task per
// global_queue_interval ticks: one worker re-polled a task in a yield loop
// 61 times per task waiting there (a task spawning 100,000, then yielding
// until they ran: 6.1 M polls). Tokio keeps a yielded task out of its run
// queue until the worker runs dry, so its injector batches go first too.
void multi_thread_scheduler::push_yielded(worker& w, task_header* t) {
    if (!w.queue.push_oldest(t)) {
        injector_.push(t);  // seq_cst publish, then the check in notify_one
        notify_one();
        return;
    }
    w.counters.local_pushes.add();
    // A full ring does not look at the injector, and with nothing pulled
    // the notify goes out alone: through push_local_batch with no tasks,
    // yield_many (1,000 yielders on one worker, a full ring) ran 11%
    // slower.
    std::uint32_t room = w.queue.capacity() - w.queue.len();
    if (std::size_t n = room ? take_injector_batch(w, room) : 0)
        push_local_batch(w, w.batch.data(), static_cast<std::uint32_t>(n));  // and notifies
    else
        notify_one();
}

// Into the ring, or half of it to the injector when full; no notify.
void multi_thread_scheduler::enqueue_local(worker& w, task_header* t) {
    if (w.queue.push(t)) {
        w.counters.local_pushes.add();
    } else {
        w.counters.overflow_tasks.add(w.queue.push_overflow(t, injector_));
        w.counters.overflows.add();
    }
}

thread_local constinit void* polling_worker = nullptr;

[[gnu::hot]] void spawn_on_worker(task_header* t) { multi_thread_scheduler::spawn_from_poll(polling_worker, t); }

// See "Spawning from a worker" in the header. The same steps as
// spawn_root -> accept_spawn -> schedule(spawn) take on the worker's own
// thread during a poll: an own-thread spawn is not registered; the
// displaced next-slot task is staged (run_task publishes it after the
// poll at the latest).
[[gnu::hot]] void multi_thread_scheduler::spawn_from_poll(void* opaque, task_header* t) {
    worker& w = *static_cast<worker*>(opaque);
    multi_thread_scheduler& s = w.owner;
    build_spawned_header(t, &s);
    if (s.registry().closed()) refuse_spawn(t);
    w.counters.tasks_spawned.add();
    if (task_header* prev = std::exchange(w.next, t)) s.stage(w, prev);
}

void publish_local_spawns() noexcept {
    if (polling_worker) multi_thread_scheduler::publish_from_poll(polling_worker);
}

// The next slot's task joins the staged ones, newest, so the owner still
// takes it first; all of them then go to the ring in one batch.
void multi_thread_scheduler::publish_from_poll(void* opaque) noexcept {
    worker& w = *static_cast<worker*>(opaque);
    if (task_header* t = std::exchange(w.next, nullptr)) w.owner.stage(w, t);
    if (w.num_staged) w.owner.publish_staged(w, w.num_staged);
}

[[gnu::hot]] void multi_thread_scheduler::stage(worker& w, task_header* t) {
    if (w.num_staged == w.staged_cap) publish_staged(w, (w.staged_cap + 1) / 2);
    static_assert(std::tuple_size_v<decltype(w.staged)> <= 256, "stage_slot is one byte");
    // relaxed: a hint, see task_header::stage_slot.
    t->stage_slot.store(static_cast<std::uint8_t>(w.num_staged), std::memory_order_relaxed);
    w.staged[w.num_staged++] = t;
    // A worker searches or sleeps: it wants work now, so make it stealable.
    if (idle_.wants_work()) publish_staged(w, w.num_staged);
}

// The n oldest staged tasks go to the ring in one batch, then one
// idle-protocol check. Out of line, so that stage() stays small enough for
// g++ to inline into schedule(), which every spawn calls (inlined, skynet
// runs about 11 fewer instructions per spawn).
[[gnu::noinline]] void multi_thread_scheduler::publish_staged(worker& w, std::uint32_t n) {
    push_local_batch(w, w.staged.data(), n);
    std::copy(w.staged.begin() + n, w.staged.begin() + w.num_staged, w.staged.begin());
    w.num_staged -= n;
}

// ts[0..n), oldest first, into the ring with one CAS (what does not fit
// goes through the overflow path), then one idle-protocol check.
void multi_thread_scheduler::push_local_batch(worker& w, task_header* const* ts, std::uint32_t n) {
    std::uint32_t pushed = w.queue.push_batch(ts, n);
    w.counters.local_pushes.add(pushed);
    for (std::uint32_t i = pushed; i < n; ++i) enqueue_local(w, ts[i]);
    notify_one();
}

void multi_thread_scheduler::notify_one() {
    if (auto i = idle_.worker_to_notify()) workers_[*i]->park.unpark(io_driver());
}

void multi_thread_scheduler::notify_if_work_pending() {
    for (auto& w : workers_) {
        if (!w->queue.is_empty()) {
            notify_one();
            return;
        }
    }
    if (!injector_.is_empty()) notify_one();
}

// ---- consumer side -------------------------------------------------------------------
void multi_thread_scheduler::run(worker& w) {
    start_thread(w);
    w.counters.busy.start();
    run_loop(w);
    w.counters.busy.stop();
    stop_thread(w);
    leave_place();
}

void multi_thread_scheduler::leave_place() {
    {
        std::lock_guard lock(places_mutex_);
        --places_run_;
    }
    places_cv_.notify_all();
}

void multi_thread_scheduler::start_thread(worker& w) {
    thread_context& ctx = tls();
    ctx.sched = this;
    ctx.worker = &w;
    ctx.completions = &w.counters.tasks_completed;
    ctx.counters = &w.counters;
    pthread_setname_np(pthread_self(), cfg_.thread_name.substr(0, 15).c_str());
    if (cfg_.on_thread_start) cfg_.on_thread_start(w.index);
}

void multi_thread_scheduler::run_loop(worker& w) {
    while (!stopping() && !handback_requested(w)) {
        task_header* t = next_task(w);
        if (!t) t = poll_driver_when_dry(w);
        if (!t) t = search(w);
        if (t) {
            found_work(w);
            run_task(w, t);
        } else {
            park(w);
        }
    }
}

void multi_thread_scheduler::stop_thread(worker& w) {
    if (cfg_.on_thread_stop) cfg_.on_thread_stop(w.index);
    tls() = thread_context{};
}

task_header* multi_thread_scheduler::next_task(worker& w) {
    if (--w.ticks_to_event == 0) {
        w.ticks_to_event = cfg_.event_interval;
        poll_driver();
    }
    // A countdown, not tick % interval: no division on every task.
    if (--w.ticks_to_injector == 0) {
        w.ticks_to_injector = cfg_.global_queue_interval;
        if (task_header* t = injector_.pop()) {
            w.counters.injector_pops.add();
            return t;
        }
    }
    if (w.next) {
        if (w.next_runs < cfg_.max_next_slot_runs) {
            ++w.next_runs;
            w.counters.next_slot_runs.add();
            return std::exchange(w.next, nullptr);
        }
        // Cap reached: other ready work goes first; the next-slot task waits
        // on top of the ring (it runs right after, keeping locality). With
        // nothing else ready it just runs (a trip through the ring would
        // only let a thief take it meanwhile).
        w.next_runs = 0;
        task_header* t = w.queue.pop();
        if (!t) t = pop_injector_batch(w);
        if (!t) {
            w.counters.next_slot_runs.add();
            return std::exchange(w.next, nullptr);
        }
        push_local(w, std::exchange(w.next, nullptr));
        return t;
    }
    w.next_runs = 0;
    if (task_header* t = w.queue.pop()) return t;
    return pop_injector_batch(w);
}

// Up to `room` tasks, and the worker's fair share, from the injector into
// w.batch; returns how many.
std::size_t multi_thread_scheduler::take_injector_batch(worker& w, std::size_t room) {
    if (injector_.is_empty()) return 0;
    std::size_t fair_share = injector_.len() / workers_.size() + 1;
    std::size_t want = std::min({fair_share, w.batch.size(), room});
    std::size_t n = injector_.pop_batch(w.batch.data(), want);
    if (n != 0) w.counters.injector_pops.add(n);
    return n;
}

task_header* multi_thread_scheduler::pop_injector_batch(worker& w) {
    std::size_t n = take_injector_batch(w, w.batch.size());
    if (n == 0) return nullptr;
    // The oldest runs now; the rest wait in the ring (one CAS, not one each).
    if (n > 1) push_local_batch(w, w.batch.data() + 1, static_cast<std::uint32_t>(n - 1));
    return w.batch[0];
}

task_header* multi_thread_scheduler::search(worker& w) {
    // Every worker, even a lone one, must be a searcher before it parks:
    // only the last searcher's re-check closes the lost-wakeup window.
    if (!w.searching && !idle_.try_become_searching()) return pop_injector_batch(w);
    w.searching = true;
    std::size_t n = workers_.size();
    for (std::uint32_t i = 0; n > 1 && i < cfg_.steal_attempts; ++i) {
        w.rng ^= w.rng << 13;
        w.rng ^= w.rng >> 7;
        w.rng ^= w.rng << 17;
        std::size_t victim = w.rng % (n - 1);
        if (victim >= w.index) ++victim;  // uniform over the others
        std::uint32_t taken = 0;
        if (task_header* t = workers_[victim]->queue.steal_into(w.queue, taken)) {
            w.counters.steal_operations.add();
            w.counters.tasks_stolen.add(taken);
            return t;
        }
        w.counters.failed_steals.add();
    }
    return pop_injector_batch(w);
}

void multi_thread_scheduler::found_work(worker& w) {
    if (!w.searching) return;
    w.searching = false;
    // The last searcher to find work wakes one more: the chain wake.
    if (idle_.stop_searching()) notify_one();
}

void multi_thread_scheduler::run_task(worker& w, task_header* t) {
    polling_worker = &w;
    poll_outcome outcome = counted_poll(t, w.counters, cfg_.poll_time_histogram);
    polling_worker = nullptr;
    // Nothing stays staged between polls (see "Staging" in the header).
    if (w.num_staged) publish_staged(w, w.num_staged);
    switch (outcome) {
        case poll_outcome::idle:
        case poll_outcome::complete:
            break;
        case poll_outcome::requeue:
            push_local(w, t);
            break;
        case poll_outcome::yield:
            push_yielded(w, t);
            break;
    }
}

void multi_thread_scheduler::park(worker& w) {
    bool last_searcher = idle_.to_parked(w.index, w.searching);
    w.searching = false;
    if (last_searcher) notify_if_work_pending();  // may pick this very worker
    // A stand-in asked to give the worker back after its loop's check: the
    // hand-back found it not yet listed as a sleeper, so nobody will unpark
    // it (see "block_in_place" below). Count ourselves back instead.
    if (handback_requested(w)) {
        if (!idle_.unpark_self(w.index)) w.park.park();  // a notifier's unpark is on its way
        w.searching = true;
        return;
    }
    w.counters.parks.add();
    w.counters.busy.stop();
    before_park();
    if (!futex_will_do() && try_take_driver()) {
        bool notified = park_on_driver(w);
        release_driver();
        // Woken by I/O or a timer, not by a notifier: count ourselves back,
        // or take the notifier's unpark that is on its way (a futex park
        // that ends at once or very soon).
        if (!notified && !idle_.unpark_self(w.index)) w.park.park();
    } else {
        // A paused clock advances only when every worker is idle; the
        // driver's holder checked that before we parked: make it look again.
        if (io_driver().is_paused() && idle_.all_parked()) io_driver().unpark();
        w.park.park();
    }
    after_unpark();
    w.counters.busy.start();
    w.counters.unparks.add();
    // Whoever woke us (maybe we) counted us as unparked and searching.
    w.searching = true;
}

// The last worker to park, with no fd registered and no timer armed, sleeps
// on its futex, not in epoll_wait: nothing can end its park but an unpark,
// and a futex wake reaches it in about 1 to 4 us where the driver's eventfd
// took 16 to 19 us (aspen-micro's wake from another thread, one worker). Any
// other parker still takes the driver when it is free, even with nothing
// registered: making every parker sleep on its futex made mpsc at 2 workers
// 3.3x slower (809 to 2,800 ms), the fast wakes pulling the second worker
// into the channel's traffic (parks 8,500 to 46,000-125,000 a worker).
// Why no timer or socket is left unwatched: only a task's poll on a worker
// adds one (current_driver needs the worker's context), and that worker
// parks later and reads its own write, so it goes for the driver; if the
// driver is taken, its holder is in epoll_wait or awake, and an awake holder
// parks later and looks again. Model: spec/driver_watch.pml (spin; it also
// shows that dropping all_parked() would be just as safe: that was rejected
// for speed, as above).
bool multi_thread_scheduler::futex_will_do() const noexcept {
    return !io_driver().has_interest() && idle_.all_parked();
}

// True if an unpark() ended the park. Wakers fired by the driver run here,
// on this worker: their tasks land in its next slot and ring.
bool multi_thread_scheduler::park_on_driver(worker& w) {
    driver& d = io_driver();
    // seq_cst: a snapshot in the total order, as all_parked's.
    if (d.is_paused() && idle_.all_parked() && blocking().idle() && in_place_.load(std::memory_order_seq_cst) == 0 &&
        d.auto_advance())
        return false;
    return w.park.park_on_driver(d);
}

bool multi_thread_scheduler::poll_driver() {
    if (!io_driver().has_interest() || !try_take_driver()) return false;
    io_driver().poll();
    release_driver();
    return true;
}

// Out of local work, before stealing: readiness that is already waiting in
// the driver belongs to tasks this worker can run at once, without a
// thief's CAS or a sleeper's futex round trip (see "Where a worker looks").
task_header* multi_thread_scheduler::poll_driver_when_dry(worker& w) {
    return poll_driver() ? next_task(w) : nullptr;
}

void multi_thread_scheduler::poll_after_send() {
    worker* w = this_worker();
    if (!w || workers_.size() == 1) return;
    if (w->send_polls_to_skip != 0) {
        --w->send_polls_to_skip;
        return;
    }
    // Another worker polls: it takes this send's readiness too.
    if (!try_take_driver()) return;
    w->counters.send_polls.add();
    std::size_t delivered = 0;
    try {
        delivered = io_driver().io().wait(0);
    } catch (...) {
        release_driver();
        throw;
    }
    release_driver();
    // Nothing was ready: the peer is elsewhere (another process or host).
    // Look again only after 1, 3, 7, ... 63 more sends, so such a stream
    // pays at most a syscall every 64 sends.
    w->send_poll_backoff = delivered ? 0 : std::min<std::uint32_t>(2 * w->send_poll_backoff + 1, 63);
    w->send_polls_to_skip = w->send_poll_backoff;
}

// ---- block_in_place ---------------------------------------------------------------
// Protocol. A worker's place (w: its ring, next slot, staged array, loop
// state, counters) is run by one thread at a time. The thread whose poll
// calls block_in_place (A) publishes its next slot and staged tasks, lets
// go of the worker (its thread context is cleared: to fn it is a plain
// thread) and hands a stand-in job to a kept thread (B; thread_cache.hpp),
// which runs the ordinary worker loop on w; the cache's mutex orders A's
// writes to w before B's. A runs fn. If fn ends before B has begun the job,
// A takes the job back under that mutex (retract) and B never touches w.
// Otherwise, to take the worker back, A stores the hand-back flag (release), then,
// if w is listed as a sleeper, takes it off (unpark_self: counted unparked
// and searching, as a notifier does) and unparks it. B checks the flag at
// the loop's head, and in park() after it listed itself as a sleeper. Both
// lists change under idle_'s mutex, so either A's look came first in that
// mutex's order and B's check after its to_parked sees the flag, or B was
// listed first and A unparks it: no hand-back is lost. B stops searching
// if it was (as found_work: the chain wake) and ends its job; A waits for
// that (the job's semaphore orders B's writes to w before A's) and goes on
// with its poll. A task
// that B polls may call block_in_place too: B hands w on to C with a flag
// of its own and takes it back before that poll ends, so w.handback names
// the flag of whichever loop runs w now, and A waits for B's poll to end.
//
// block_in_place and shutdown. fn may wait for the runtime's own tasks
// (a handle's block_on, blocking_recv), which only shutdown's cancellation
// ends once the workers stop; but shutdown joins A's thread, which returns
// only after fn. So shutdown cancels the tasks before it joins, as soon as
// no thread runs a worker place any more (places_run_ == 0, under
// places_mutex_): every loop has stopped, and the threads still in fn
// touch no place. Each place is counted once, for whichever thread runs
// it: a lender's count passes to its stand-in and back. A stand-in whose
// loop ended for shutdown while its lender's fn still ran (the hand-back
// flag, read under the mutex, not set) lets go of w (uncounts it, sets
// let_go); A, once fn returned and B is joined, then waits until shutdown
// has cancelled the tasks (tasks_cancelled_early_) before it counts w
// again and touches it. If nobody let go, shutdown goes as before.
namespace {
// The scheduler whose worker this thread lent out while fn runs: shutting
// that runtime down from fn would join this very thread.
thread_local const multi_thread_scheduler* lending = nullptr;
}  // namespace

void multi_thread_scheduler::block_in_place(void (*fn)(void*), void* arg) {
    worker* wp = this_worker();
    // Outside a poll (a thread hook) no task waits behind this call.
    if (!wp || !polling_worker) return fn(arg);
    worker& w = *wp;
    publish_from_poll(&w);
    const thread_context saved = std::exchange(tls(), thread_context{});
    polling_worker = nullptr;
    const std::atomic<bool>* outer = w.handback;
    std::atomic<bool> handback{false};
    bool let_go = false;  // written by B, read after its job ended
    // The task that called us and the joiners it runs nested in: their polls
    // stay open until fn returns (shutdown must not wait for them). This
    // thread runs them, so it may read their links.
    std::size_t num_held = 0;
    stand_in_args args{this, &w, &handback, &let_go};
    thread_cache::job stand_in_job(&run_stand_in, &args);
    try {
        {
            std::lock_guard lock(places_mutex_);
            for (task_header* t = saved.current; t; t = t->inline_parent, ++num_held) held_.push_back(t);
        }
        // seq_cst: a parker's auto-advance check reads it in the total order;
        // counted before the stand-in exists, so its first park sees it.
        in_place_.fetch_add(1, std::memory_order_seq_cst);
        try {
            stand_ins_.start(stand_in_job);
        } catch (...) {
            in_place_.fetch_sub(1, std::memory_order_seq_cst);  // seq_cst: as the add
            throw;
        }
    } catch (...) {  // no memory for held_, or no thread: f has not run
        unhold(saved.current, num_held);
        tls() = saved;
        polling_worker = &w;
        throw;
    }
    std::exception_ptr error;
    const auto* owner = exchange_blocking_owner(&link());
    lending = this;
    // fn runs within the task's poll, so it sees the task's task_local
    // bindings (as in Tokio); its own sync_scopes stack on top and are gone
    // when it returns. The task's list is not touched meanwhile: only this
    // thread runs the task.
    local_binding* thread_bindings = exchange_thread_bindings(saved.current ? saved.current->locals : nullptr);
    try {
        fn(arg);
    } catch (...) {
        error = std::current_exception();
    }
    exchange_thread_bindings(thread_bindings);
    lending = nullptr;
    exchange_blocking_owner(owner);
    in_place_.fetch_sub(1, std::memory_order_seq_cst);  // seq_cst: as the add
    // A short fn may end before B has begun: then B never touches w (nor
    // places_run_), and A goes on without the hand-back's wake-ups.
    if (!stand_ins_.retract(stand_in_job)) take_place_back(w, handback, stand_in_job, let_go);
    unhold(saved.current, num_held);
    w.handback = outer;
    tls() = saved;
    polling_worker = &w;
    if (error) std::rethrow_exception(error);
}

void multi_thread_scheduler::take_place_back(worker& w, std::atomic<bool>& handback, thread_cache::job& stand_in_job,
                                             const bool& let_go) {
    // release: nothing of A's needs publishing to B (B only leaves); the
    // mutex in unpark_self / to_parked orders the flag for the park race.
    handback.store(true, std::memory_order_release);
    if (idle_.unpark_self(w.index)) w.park.unpark(io_driver());
    stand_in_job.wait();  // B is done with w and with our locals
    if (let_go) {
        // Shutdown may be draining w's queues: wait until it is done.
        std::unique_lock lock(places_mutex_);
        places_cv_.wait(lock, [this] { return tasks_cancelled_early_; });
        ++places_run_;
    }
}

void multi_thread_scheduler::run_stand_in(void* arg) {
    auto* a = static_cast<stand_in_args*>(arg);
    a->self->stand_in(*a->w, *a->handback, *a->let_go);
}

void multi_thread_scheduler::stand_in(worker& w, const std::atomic<bool>& handback, bool& let_go) {
    start_thread(w);
    w.handback = &handback;
    run_loop(w);
    // Give w back as A left it: awake, not searching.
    found_work(w);
    stop_thread(w);
    {
        std::lock_guard lock(places_mutex_);
        // acquire: as handback_requested. Not set: the loop ended for
        // shutdown while fn runs; let go of w (see "block_in_place and
        // shutdown"). Set: A runs w next, still counted.
        if (handback.load(std::memory_order_acquire)) return;
        let_go = true;
        place_let_go_ = true;
        --places_run_;
    }
    places_cv_.notify_all();
}

// Takes the num_held entries block_in_place added for `current` out of held_
// (calls that overlap add and remove theirs in any order).
void multi_thread_scheduler::unhold(task_header* current, std::size_t num_held) {
    std::lock_guard lock(places_mutex_);
    for (task_header* t = current; num_held != 0; t = t->inline_parent, --num_held)
        held_.erase(std::find(held_.begin(), held_.end(), t));
}

bool multi_thread_scheduler::handback_requested(const worker& w) noexcept {
    // acquire: pairs with the hand-back's release store.
    return w.handback && w.handback->load(std::memory_order_acquire);
}

bool multi_thread_scheduler::try_take_driver() noexcept {
    // relaxed pre-check: skip the RMW while another worker holds it.
    // acquire: the previous holder's driver state (buffers) becomes ours.
    return !driver_taken_.load(std::memory_order_relaxed) && !driver_taken_.exchange(true, std::memory_order_acquire);
}

void multi_thread_scheduler::release_driver() noexcept {
    // release: hand the driver's state to the next holder.
    driver_taken_.store(false, std::memory_order_release);
}

// ---- blocking, shutdown, metrics -------------------------------------------------
void multi_thread_scheduler::run_until_complete(task_header* t) { block_until_complete(t); }

void multi_thread_scheduler::shutdown() {
    if (this_worker() || lending == this)
        throw std::logic_error("aspen::runtime: shutdown or destruction from one of the runtime's own tasks");
    std::lock_guard lock(shutdown_mutex_);
    if (shut_down_) return;
    shut_down_ = true;
    // release: workers that see it also see everything before it.
    stopping_.store(true, std::memory_order_release);
    idle_.take_all_sleepers();
    for (auto& w : workers_) w->park.unpark(io_driver());
    {
        // See "block_in_place and shutdown".
        std::unique_lock lock(places_mutex_);
        places_cv_.wait(lock, [this] { return places_run_ == 0; });
        if (place_let_go_) {
            // No thread runs a place now, so none adds to held_ until the
            // flag below is set.
            std::vector<task_header*> held = held_;
            lock.unlock();
            cancel_tasks_not_held(held);
            lock.lock();
        }
        tasks_cancelled_early_ = true;
    }
    places_cv_.notify_all();
    for (auto& w : workers_)
        if (w->thread.joinable()) w->thread.join();  // not all started if the constructor failed
    stand_ins_.close();  // every stand-in's job ended before its lender's
    finish_shutdown();
}

bool multi_thread_scheduler::drain_queues() {
    bool any = false;
    for (auto& w : workers_) {
        if (task_header* t = std::exchange(w->next, nullptr)) {
            destroy_queued(t);
            any = true;
        }
        for (std::uint32_t i = 0; i < w->num_staged; ++i) destroy_queued(w->staged[i]);
        any = any || w->num_staged != 0;
        w->num_staged = 0;
        while (task_header* t = w->queue.pop()) {
            destroy_queued(t);
            any = true;
        }
    }
    return destroy_all(injector_) || any;
}

runtime_metrics multi_thread_scheduler::metrics() const {
    runtime_metrics m;
    for (auto& w : workers_) {
        m.workers.push_back(w->counters.read());
        m.workers.back().local_queue_depth = w->queue.len();
    }
    // relaxed: a statistic.
    m.remote_spawns = remote_spawns_.load(std::memory_order_relaxed);
    m.remote_completions = remote_completions();
    worker_metrics t = m.total();
    m.tasks_alive = t.tasks_spawned + m.remote_spawns - t.tasks_completed - m.remote_completions;
    m.injector_depth = injector_.len();
    add_driver_and_pool_metrics(m);
    return m;
}

}  // namespace aspen::detail
