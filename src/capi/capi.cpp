// The C API (include/aspen/aspen.h) on top of the public C++ API.
//
// A C task is a task<aspen_status> whose one await is a poll_fn calling the
// C poll function. The C data pointer and drop function live in a
// task_end object that is a parameter of that coroutine, so it sits in the
// task's frame: whatever ends the frame (completion, abort, shutdown, or a
// spawn that was refused before the task ever ran) destroys it exactly once,
// and its destructor calls drop and then tells the join. The runtime's own
// frame bookkeeping is what guarantees "exactly once"; this file adds no
// second accounting that could disagree with it.
//
// Joins do not read the C++ join_handle's outcome: the task_end publishes
// the outcome to a join_state after drop has run, so "the join says
// finished" always implies "drop has run". The join_handle is kept only to
// abort the task.
//
// Every entry point is noexcept and goes through `guarded`, which turns
// every exception into a status and a message for aspen_last_error.
#include <aspen/aspen.h>

#include <aspen/async_fd.hpp>
#include <aspen/block_in_place.hpp>
#include <aspen/coop.hpp>
#include <aspen/current_thread_runtime.hpp>
#include <aspen/errors.hpp>
#include <aspen/join_handle.hpp>
#include <aspen/metrics.hpp>
#include <aspen/poll.hpp>
#include <aspen/runtime.hpp>
#include <aspen/spawn.hpp>
#include <aspen/sync/mpsc.hpp>
#include <aspen/task.hpp>
#include <aspen/task_id.hpp>
#include <aspen/time.hpp>
#include <aspen/waker.hpp>

// aspen::advance is a coroutine, which a C poll cannot await; its C form
// does the same two steps on the driver (see aspen_advance_poll).
#include "io/driver.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <shared_mutex>
#include <stdexcept>
#include <system_error>
#include <type_traits>
#include <utility>

namespace {

// A fixed buffer: recording an error must not itself allocate and fail.
thread_local char last_error_text[512];
// The errno of the last std::system_error an entry point caught (0: none),
// for aspen_fd_poll's *result.
thread_local int errno_of_last_failure = 0;

aspen_status fail(aspen_status s, const char* what, const char* why) noexcept {
    std::snprintf(last_error_text, sizeof last_error_text, "%s: %s", what, why);
    return s;
}

// Runs an entry point's body; no exception leaves it. task_cancelled has no
// mapping here: each caller that can meet it decides between CANCELLED and
// SHUT_DOWN.
template <class F>
aspen_status guarded(const char* what, F&& body) noexcept {
    errno_of_last_failure = 0;
    try {
        return body();
    } catch (const aspen::runtime_shut_down& e) {
        return fail(ASPEN_SHUT_DOWN, what, e.what());
    } catch (const std::invalid_argument& e) {  // before logic_error, its base
        return fail(ASPEN_EINVAL, what, e.what());
    } catch (const std::logic_error& e) {
        return fail(ASPEN_MISUSE, what, e.what());
    } catch (const std::bad_alloc&) {
        return fail(ASPEN_ENOMEM, what, "out of memory");
    } catch (const std::system_error& e) {
        errno_of_last_failure = e.code().value();
        return fail(ASPEN_ERROR, what, e.what());
    } catch (const std::exception& e) {
        return fail(ASPEN_ERROR, what, e.what());
    } catch (...) {
        return fail(ASPEN_ERROR, what, "unknown exception");
    }
}

aspen_status null_arg(const char* what, const char* arg) noexcept {
    char why[64];
    std::snprintf(why, sizeof why, "%s is NULL", arg);
    return fail(ASPEN_EINVAL, what, why);
}

// How an aspen_handle reaches its runtime. aspen_runtime_free clears rt
// under the exclusive lock, so it waits for the handle calls in flight,
// which hold the shared lock while they use rt; later ones find nullptr.
struct handle_link {
    explicit handle_link(aspen_runtime* r) noexcept : rt(r) {}
    std::shared_mutex m;
    aspen_runtime* rt;  // under m
};

}  // namespace

struct aspen_runtime {
    std::shared_ptr<handle_link> link = std::make_shared<handle_link>(this);
    std::unique_ptr<aspen::runtime> multi;
    std::unique_ptr<aspen::current_thread_runtime> single;
    // Set before shutdown so that tasks it drops report ASPEN_SHUT_DOWN
    // rather than ASPEN_CANCELLED.
    std::atomic<bool> stopping{false};

    template <class F>
    decltype(auto) with(F&& f) {
        if (multi) return f(*multi);
        return f(*single);
    }

    // On a current-thread runtime a block_on from a second thread waits
    // while another drives and takes the drive over if that one ends first.
    template <class T>
    T block_on(aspen::task<T> t) {
        if (multi) return multi->block_on(std::move(t));
        return single->block_on(std::move(t));
    }

    bool is_stopping() const noexcept {
        // acquire: pairs with aspen_runtime_shutdown's exchange; the flag only
        // picks a status, the shutdown itself is ordered by the runtime.
        return stopping.load(std::memory_order_acquire);
    }
};

struct aspen_handle {
    std::shared_ptr<handle_link> link;
};

struct aspen_context {
    const aspen::context& cx;
    aspen_runtime* rt;
};

struct aspen_waker {
    aspen::waker w;
};

struct aspen_timer {
    aspen::timer t;
};

namespace {
// The C function as the F of async_fd's read_with / write_with.
struct fd_call {
    aspen_fd_fn fn;
    void* arg;
    long long operator()(int fd) { return fn(arg, fd); }
};
}  // namespace

struct aspen_fd {
    aspen::async_fd fd;
    // The operation in progress per direction: it holds the readiness
    // registration between polls, so it lives here, not in a poll's frame.
    // Declared after fd: destroyed first, while the fd is still registered.
    std::optional<aspen::fd_op_awaitable<fd_call>> op[2];
    // A readiness-only wait in progress per direction (aspen_fd_ready_poll),
    // kept as op is. Also destroyed before fd.
    std::optional<aspen::detail::fd_ready_wait> wait[2];
    // What the last ASPEN_OK of aspen_fd_ready_poll saw per direction (the
    // reactor's readiness and its tick), for aspen_fd_clear_ready; empty
    // once cleared. Plain: a direction is used by one task at a time.
    std::optional<aspen::detail::fd_readiness> seen[2];
};

struct aspen_advance {
    std::chrono::nanoseconds by;
    bool moved = false;  // the first poll moved the clock; the next one is ready
};

// One channel end per handle. A sender holds the bounded or the unbounded
// kind (the other stays empty).
struct aspen_sender {
    aspen::mpsc_sender<void*> bounded;
    aspen::unbounded_sender<void*> unbounded;
    // A bounded send that is waiting for room (as aspen_fd's op) and the
    // message it carries: it holds this sender's place in the channel's
    // queue of waiting senders between polls. Declared after the senders:
    // destroyed first, while the channel is still referenced.
    std::optional<aspen::mpsc_send_awaitable<void*>> op;
    void* pending_msg = nullptr;

    bool is_closed() const { return unbounded.valid() ? unbounded.is_closed() : bounded.is_closed(); }
};

struct aspen_receiver {
    aspen::mpsc_receiver<void*> rx;
    aspen_drop_fn drop;  // for the messages left at aspen_receiver_free
    // aspen_receiver_close was called: no message can arrive any more.
    // Plain: the receiver is used by one task or thread at a time.
    bool closed = false;
    // A receive that is waiting (its waker is the channel's receiver waker).
    std::optional<aspen::mpsc_recv_awaitable<void*>> op;
};

namespace {

// The runtime whose C task this thread is polling (nullptr outside one):
// aspen_spawn sends a task spawned there to the same worker.
thread_local aspen_runtime* polling_rt = nullptr;

// Where a task's outcome goes once its drop has run; shared by the task's
// end and the aspen_join (either may go first).
class join_state {
public:
    void finish(aspen_status outcome) noexcept {
        aspen::waker w;
        {
            std::lock_guard g(m_);
            outcome_ = outcome;
            done_ = true;
            w = std::move(waiter_);
        }
        ended_.notify_all();  // a thread in wait(); the caller's shared_ptr keeps us alive
        w.wake();             // outside the lock: the woken task may poll us at once
    }
    // Blocks the calling thread until the end; needs nothing of the runtime.
    aspen_status wait() {
        std::unique_lock g(m_);
        ended_.wait(g, [this] { return done_; });
        return outcome_;
    }
    // The outcome, or nullopt after storing w to be woken at the end.
    std::optional<aspen_status> poll(const aspen::waker& w) {
        std::lock_guard g(m_);
        if (done_) return outcome_;
        if (!waiter_.will_wake(w)) waiter_ = w;
        return std::nullopt;
    }
    bool done() const {
        std::lock_guard g(m_);
        return done_;
    }
    std::optional<aspen_status> outcome() const {
        std::lock_guard g(m_);
        if (done_) return outcome_;
        return std::nullopt;
    }

private:
    mutable std::mutex m_;
    std::condition_variable ended_;
    bool done_ = false;
    aspen_status outcome_ = ASPEN_OK;
    aspen::waker waiter_;
};

// Owns the C data for as long as the task exists (see the top of the file).
class task_end {
public:
    task_end(aspen_runtime* rt, void* data, aspen_drop_fn drop) noexcept : rt_(rt), data_(data), drop_(drop) {}
    task_end(task_end&& o) noexcept
        : rt_(o.rt_), data_(o.data_), drop_(std::exchange(o.drop_, nullptr)), join_(std::move(o.join_)),
          outcome_(o.outcome_), live_(std::exchange(o.live_, false)) {}
    task_end(const task_end&) = delete;
    task_end& operator=(const task_end&) = delete;
    task_end& operator=(task_end&&) = delete;
    ~task_end() {
        if (!live_) return;
        if (drop_) drop_(data_);
        if (join_) join_->finish(final_outcome());
    }

    void* data() const noexcept { return data_; }
    aspen_runtime* runtime() const noexcept { return rt_; }
    void set_join(std::shared_ptr<join_state> j) noexcept { join_ = std::move(j); }
    void finished(aspen_status s) noexcept { outcome_ = s; }

private:
    // Every task_end is destroyed before its runtime is freed (shutdown
    // destroys every frame and blocking job), so rt_ is still there.
    aspen_status final_outcome() const noexcept {
        if (outcome_) return *outcome_;
        return rt_->is_stopping() ? ASPEN_SHUT_DOWN : ASPEN_CANCELLED;
    }

    aspen_runtime* rt_;
    void* data_;
    aspen_drop_fn drop_;
    std::shared_ptr<join_state> join_;
    std::optional<aspen_status> outcome_;  // empty: it never finished
    bool live_ = true;
};

aspen::poll<aspen_status> poll_c(task_end& end, aspen_poll_fn fn, const aspen::context& cx) noexcept {
    aspen_context c{cx, end.runtime()};
    aspen_runtime* outer = std::exchange(polling_rt, end.runtime());
    aspen_status s;
    try {
        s = fn(end.data(), &c);
    } catch (...) {  // a C++ callback; C code cannot throw
        s = ASPEN_PANIC;
    }
    polling_rt = outer;
    if (s == ASPEN_PENDING) return aspen::pending;
    return aspen::ready(s);
}

aspen::task<aspen_status> c_task(task_end end, aspen_poll_fn fn) {
    aspen_status s = co_await aspen::poll_fn([&](aspen::context& cx) { return poll_c(end, fn, cx); });
    end.finished(s);
    co_return s;
}

aspen::task<aspen_status> wait_for(std::shared_ptr<join_state> st) {
    co_return co_await aspen::poll_fn([&](aspen::context& cx) -> aspen::poll<aspen_status> {
        if (auto o = st->poll(cx.waker())) return aspen::ready(*o);
        return aspen::pending;
    });
}

// A function for the blocking pool. Its task_end goes to whoever claims it
// first: the pool thread that runs it (drop after fn returned), an abort,
// or the closure's destructor when the pool discards it unrun (shutdown). An abort must drop at once, not when the
// pool reaches the cancelled job, which may be stuck behind a long call.
class blocking_call {
public:
    blocking_call(task_end end, aspen_status (*fn)(void*)) noexcept : end_(std::move(end)), fn_(fn) {}

    void run() noexcept {
        if (!claim()) return;
        aspen_status s = ASPEN_PANIC;
        try {
            s = fn_(end_.data());
        } catch (...) {  // a C++ callback; C code cannot throw
        }
        end_.finished(s == ASPEN_PENDING ? ASPEN_MISUSE : s);
        end_now();
    }
    void cancel() noexcept {
        if (claim()) end_now();
    }

private:
    bool claim() noexcept {
        bool expected = false;
        // acq_rel: exactly one claimant; it then owns end_ (acquire sees the
        // spawning thread's writes through the shared_ptr anyway).
        return taken_.compare_exchange_strong(expected, true, std::memory_order_acq_rel);
    }
    void end_now() noexcept { task_end gone(std::move(end_)); }

    std::atomic<bool> taken_{false};
    task_end end_;
    aspen_status (*fn_)(void*);
};

// What the pool runs; destroyed unrun, it drops the call.
class blocking_closure {
public:
    explicit blocking_closure(std::shared_ptr<blocking_call> c) noexcept : call_(std::move(c)) {}
    blocking_closure(blocking_closure&&) noexcept = default;
    blocking_closure(const blocking_closure&) = delete;
    blocking_closure& operator=(const blocking_closure&) = delete;
    blocking_closure& operator=(blocking_closure&&) = delete;
    ~blocking_closure() {
        if (call_) call_->cancel();
    }
    aspen_status operator()() noexcept {
        call_->run();
        return ASPEN_OK;  // the outcome goes through the task_end
    }

private:
    std::shared_ptr<blocking_call> call_;
};

}  // namespace

struct aspen_join {
    // Who consumes the outcome: one waiting thread or one polling task, once.
    enum use_t : std::uint8_t { idle, polling, waiting, taken };

    aspen_runtime* rt;
    // A current-thread runtime runs its tasks only while driven: a wait
    // drives it (block_on). On a multi-threaded one a wait only blocks,
    // touching nothing of rt, so it may race with the runtime's free.
    bool wait_drives = true;
    aspen::join_handle<aspen_status> handle;
    std::shared_ptr<join_state> state;
    std::shared_ptr<blocking_call> blocking;  // for a spawn_blocking join
    std::atomic<std::uint8_t> use{idle};
};

namespace {

aspen::join_handle<aspen_status> start(aspen_runtime& rt, aspen::task<aspen_status> t) {
    // On one of rt's workers the task goes to that worker's next slot.
    if (polling_rt == &rt) return aspen::spawn(std::move(t));
    return rt.with([&](auto& r) { return r.spawn(std::move(t)); });
}

// The checks and allocations every spawn shares; `run` starts the task
// with the task_end (which owns data from the first line on).
template <class Run>
aspen_status spawn_with(const char* what, aspen_runtime* rt, bool has_fn, void* data, aspen_drop_fn drop,
                        aspen_join** out, Run run) {
    if (out) *out = nullptr;
    task_end end(rt, data, drop);
    if (!rt) return null_arg(what, "rt");
    if (!has_fn) return null_arg(what, "the function");
    std::unique_ptr<aspen_join> j;
    if (out) {
        j = std::make_unique<aspen_join>();
        j->rt = rt;
        j->wait_drives = rt->single != nullptr;
        j->state = std::make_shared<join_state>();
        end.set_join(j->state);
    }
    aspen::join_handle<aspen_status> h = run(*rt, std::move(end));
    if (!out) return ASPEN_OK;  // h's destructor detaches
    j->handle = std::move(h);
    *out = j.release();
    return ASPEN_OK;
}

bool claim(aspen_join& j, aspen_join::use_t as, const char* what, aspen_status& err) noexcept {
    // acquire: a `taken` we see comes with the outcome's consumer done.
    std::uint8_t cur = j.use.load(std::memory_order_acquire);
    for (;;) {
        if (cur == aspen_join::taken) {
            err = fail(ASPEN_MISUSE, what, "the join was already joined (its outcome was taken)");
            return false;
        }
        // A polling task re-polls; a second waiter would take the first's
        // place in the join_state and leave it asleep.
        bool again = cur == aspen_join::polling && as == aspen_join::polling;
        if (cur != aspen_join::idle && !again) {
            err = fail(ASPEN_MISUSE, what,
                       cur == aspen_join::waiting ? "a thread is already waiting on this join"
                                                  : "a task is polling this join");
            return false;
        }
        // acq_rel: the claim decides between concurrent consumers; acquire
        // sees a previous claimant's release (its taken outcome).
        if (j.use.compare_exchange_weak(cur, as, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
    }
}

void set_use(aspen_join& j, aspen_join::use_t u) noexcept {
    // release: a later claimant's acquire sees everything this one did.
    j.use.store(u, std::memory_order_release);
}

aspen_status wait_outcome(aspen_join& j) {
    if (std::optional<aspen_status> o = j.state->outcome()) return *o;
    if (!j.wait_drives) return j.state->wait();
    try {
        return j.rt->block_on(wait_for(j.state));
    } catch (const aspen::task_cancelled&) {
        // Our waiting task was dropped: the runtime is shutting down.
        return ASPEN_SHUT_DOWN;
    }
}

uint64_t clamp_delay(uint64_t ns) noexcept {
    // About 146 years: far enough, and now() + it cannot overflow.
    return std::min<uint64_t>(ns, uint64_t{1} << 62);
}

// Makes the polling C task step back behind all work that is ready now, as
// yield_now does, and returns ASPEN_PENDING. A bare wake of its own waker
// would requeue it at the newest end of its worker's ring, which that
// worker pops first: the task would run again before the rest.
aspen_status yield_c_task(const char* what, const aspen_context& cx) {
    aspen::detail::require_current_task(what).yield_requested = true;
    cx.cx.waker().wake_by_ref();  // RUNNING: re-queued after this poll
    return ASPEN_PENDING;
}

// The cooperative budget of a C poll, as a C++ await of the same operation
// spends it (detail::poll_budgeted_leaf, which this goes through): one unit
// when `poll` completes, none when it has to wait. With the budget spent,
// `poll` is not called at all, so nothing is taken, sent or run, and the
// task yields. `poll(c)` gives std::optional<R> (nullopt: pending, with c's
// waker stored); nullopt here means pending or yielded, the caller returns
// ASPEN_PENDING either way.
template <class Poll>
auto budgeted(const char* what, const aspen_context& cx, Poll&& poll) -> std::invoke_result_t<Poll&, aspen::context&> {
    struct leaf {
        explicit leaf(Poll& p) noexcept : poll(p) {}
        Poll& poll;
        std::invoke_result_t<Poll&, aspen::context&> out{};
        bool polled = false;
        std::exception_ptr error;

        static bool thunk(void* self, aspen::context& c) noexcept {
            auto* l = static_cast<leaf*>(self);
            l->polled = true;
            try {
                l->out = l->poll(c);
                return l->out.has_value();
            } catch (...) {  // the unit stays spent, as for a C++ leaf that fails
                l->error = std::current_exception();
                return true;
            }
        }
    } l(poll);
    aspen::detail::poll_budgeted_leaf(what, &l, &leaf::thunk);
    if (l.error) std::rethrow_exception(l.error);
    if (!l.polled) {
        aspen::detail::note_budget_forced_yield();
        yield_c_task(what, cx);
    }
    return std::move(l.out);
}

// The operation a C poll keeps between its polls (an fd read or write, a
// channel send or receive): `start` emplaces it on the first poll, `poll`
// polls it with the C task's waker (in c). nullopt while it is pending;
// else its result, and `op` is empty again (also when it throws), so the
// next poll starts a new operation.
template <class Op, class Start, class Poll>
auto poll_kept(std::optional<Op>& op, aspen::context& c, Start&& start, Poll&& poll)
    -> std::optional<decltype(op->await_resume())> {
    try {
        if (!op) start(op);
        if (!poll(*op, c)) return std::nullopt;
        auto result = op->await_resume();
        op.reset();
        return result;
    } catch (...) {
        op.reset();
        throw;
    }
}

bool valid_direction(int direction) noexcept { return direction == ASPEN_FD_READ || direction == ASPEN_FD_WRITE; }

aspen_status bad_direction(const char* what) noexcept {
    return fail(ASPEN_EINVAL, what, "direction must be ASPEN_FD_READ or ASPEN_FD_WRITE");
}

// A channel operation polled as aspen::select polls a branch.
constexpr auto poll_leaf = [](auto& op, aspen::context& c) { return op.poll_as_branch(c); };

aspen_status closed_channel(const char* what, const char* why) noexcept { return fail(ASPEN_CLOSED, what, why); }
constexpr const char* refused_send = "the receiver is gone or closed the channel; the message was not sent";
constexpr const char* end_of_stream = "end of stream: every sender is gone or the receiver closed the channel";

// try_send, and the send of an unbounded channel (which never waits).
aspen_status send_now(const char* what, aspen_sender& tx, void* msg) {
    std::optional<void*> back = tx.unbounded.valid() ? tx.unbounded.send(msg) : tx.bounded.try_send(msg);
    if (!back) return ASPEN_OK;
    if (tx.is_closed()) return closed_channel(what, refused_send);
    return ASPEN_WOULD_BLOCK;
}

aspen::clock::time_point after(uint64_t ns) noexcept {
    return aspen::now() + std::chrono::nanoseconds(static_cast<std::int64_t>(clamp_delay(ns)));
}

// The defaults of aspen::config, the whole struct.
aspen_config default_config() {
    const aspen::config d;
    aspen_config c{};
    c.size = sizeof(aspen_config);
    c.workers = d.workers;
    c.local_queue_capacity = d.local_queue_capacity;
    c.steal_attempts = d.steal_attempts;
    c.global_queue_interval = d.global_queue_interval;
    c.event_interval = d.event_interval;
    c.coop_budget = d.coop_budget;
    c.max_next_slot_runs = d.max_next_slot_runs;
    c.max_blocking_threads = d.max_blocking_threads;
    c.blocking_keep_alive_ns = static_cast<uint64_t>(d.blocking_keep_alive.count());
    c.thread_name = nullptr;  // the C++ default, without a pointer into a temporary
    c.start_paused = d.start_paused ? 1 : 0;
    c.poll_time_histogram = d.poll_time_histogram ? 1 : 0;
    return c;
}

// The fields every aspen_config has had: size and current_thread.
constexpr std::size_t min_config_size = sizeof(size_t) + sizeof(int);

// Reads the fields a caller compiled against (cfg->size bytes); a newer
// caller's extra fields must be zero, i.e. left at "default".
aspen_status read_config(const aspen_config* in, aspen_config& out) {
    out = default_config();
    if (in->size < min_config_size)
        return fail(ASPEN_EINVAL, "aspen_runtime_new", "cfg->size is too small; call aspen_config_init first");
    std::size_t n = std::min(in->size, sizeof out);
    const auto* extra = reinterpret_cast<const unsigned char*>(in) + n;
    if (std::any_of(extra, extra + (in->size - n), [](unsigned char b) { return b != 0; }))
        return fail(ASPEN_EINVAL, "aspen_runtime_new", "cfg has fields this library does not know (set to nonzero)");
    std::memcpy(&out, in, n);
    return ASPEN_OK;
}

aspen::config to_cpp(const aspen_config& c) {
    aspen::config cfg;
    cfg.workers = c.workers;
    cfg.local_queue_capacity = c.local_queue_capacity;
    cfg.steal_attempts = c.steal_attempts;
    cfg.global_queue_interval = c.global_queue_interval;
    cfg.event_interval = c.event_interval;
    cfg.coop_budget = c.coop_budget;
    cfg.max_next_slot_runs = c.max_next_slot_runs;
    cfg.max_blocking_threads = c.max_blocking_threads;
    cfg.blocking_keep_alive = std::chrono::nanoseconds(static_cast<std::int64_t>(clamp_delay(c.blocking_keep_alive_ns)));
    if (c.thread_name) cfg.thread_name = c.thread_name;
    if (auto f = c.on_thread_start) cfg.on_thread_start = [f, d = c.hook_data](std::size_t i) { f(d, i); };
    if (auto f = c.on_thread_stop) cfg.on_thread_stop = [f, d = c.hook_data](std::size_t i) { f(d, i); };
    cfg.start_paused = c.start_paused != 0;
    cfg.poll_time_histogram = c.poll_time_histogram != 0;
    if (auto f = c.on_thread_park) cfg.on_thread_park = [f, d = c.hook_data] { f(d); };
    if (auto f = c.on_thread_unpark) cfg.on_thread_unpark = [f, d = c.hook_data] { f(d); };
    return cfg;
}

static_assert(ASPEN_POLL_TIME_BUCKETS == aspen::poll_time_buckets, "aspen_metrics' histogram is the C++ one");

// The C view of a worker's counters (or their total) and the runtime's.
aspen_metrics to_c(const aspen::runtime_metrics& m, const aspen::worker_metrics& w) noexcept {
    aspen_metrics c{};
    c.workers = m.workers.size();
    c.polls = w.polls;
    c.tasks_spawned = w.tasks_spawned;
    c.remote_spawns = m.remote_spawns;
    c.tasks_completed = w.tasks_completed;
    c.tasks_alive = m.tasks_alive;
    c.next_slot_runs = w.next_slot_runs;
    c.local_pushes = w.local_pushes;
    c.injector_pops = w.injector_pops;
    c.injector_depth = m.injector_depth;
    c.steal_operations = w.steal_operations;
    c.tasks_stolen = w.tasks_stolen;
    c.failed_steals = w.failed_steals;
    c.parks = w.parks;
    c.unparks = w.unparks;
    c.timers_armed = m.timers_armed;
    c.io_registrations = m.io_registrations;
    std::copy(w.poll_time_histogram.begin(), w.poll_time_histogram.end(), c.poll_time_histogram);
    c.poll_time_ns = w.poll_time_ns;
    c.longest_poll_ns = w.longest_poll_ns;
    c.budget_forced_yields = w.budget_forced_yields;
    c.local_queue_depth = w.local_queue_depth;
    c.blocking_threads = m.blocking_threads;
    c.idle_blocking_threads = m.idle_blocking_threads;
    c.blocking_queue_depth = m.blocking_queue_depth;
    c.io_would_block = m.io_would_block;
    c.io_ready_events = m.io_ready_events;
    c.busy_ns = w.busy_ns;
    return c;
}

// Fills out->size bytes of *out (at least `size` and `workers`): totals,
// or worker `index`'s counters.
aspen_status metrics_of(const char* what, aspen_runtime* rt, std::optional<std::size_t> index, aspen_metrics* out) {
    if (!rt) return null_arg(what, "rt");
    if (!out) return null_arg(what, "out");
    const std::size_t want = out->size;
    if (want < offsetof(aspen_metrics, polls))
        return fail(ASPEN_EINVAL, what, "out->size is too small; set it to sizeof(aspen_metrics)");
    return guarded(what, [&] {
        const aspen::runtime_metrics m = rt->with([](auto& r) { return r.metrics(); });
        if (index && *index >= m.workers.size()) {
            char why[96];
            std::snprintf(why, sizeof why, "worker index %zu is out of range (the runtime has %zu)", *index,
                          m.workers.size());
            return fail(ASPEN_EINVAL, what, why);
        }
        aspen_metrics c = to_c(m, index ? m.workers[*index] : m.total());
        c.size = std::min(want, sizeof c);
        std::memcpy(out, &c, c.size);
        return ASPEN_OK;
    });
}

}  // namespace

namespace {

// A call that makes a new object from another: out checked and cleared
// first, then the source, then the allocation (ASPEN_ENOMEM if it fails).
template <class Out, class Src, class Make>
aspen_status new_from(const char* what, Out** out, Src* src, const char* src_name, Make make) {
    if (!out) return null_arg(what, "out");
    *out = nullptr;
    if (!src) return null_arg(what, src_name);
    return guarded(what, [&] {
        *out = make(*src);
        return ASPEN_OK;
    });
}

aspen_status spawn_c_task(const char* what, aspen_runtime* rt, aspen_poll_fn poll, void* data, aspen_drop_fn drop,
                          aspen_join** out) {
    return guarded(what, [&] {
        return spawn_with(what, rt, poll != nullptr, data, drop, out, [poll](aspen_runtime& r, task_end end) {
            return start(r, c_task(std::move(end), poll));
        });
    });
}

aspen_status spawn_c_blocking(const char* what, aspen_runtime* rt, aspen_status (*fn)(void* data), void* data,
                              aspen_drop_fn drop, aspen_join** out) {
    return guarded(what, [&] {
        std::shared_ptr<blocking_call> call;
        auto run = [&](aspen_runtime& r, task_end end) {
            call = std::make_shared<blocking_call>(std::move(end), fn);
            return r.with([&](auto& cpp) { return cpp.spawn_blocking(blocking_closure(call)); });
        };
        aspen_status s = spawn_with(what, rt, fn != nullptr, data, drop, out, run);
        if (s == ASPEN_OK && out) (*out)->blocking = std::move(call);
        return s;
    });
}

// spawn(rt) with the handle's runtime kept alive meanwhile; without one
// (freed, or no handle) data is dropped, with no lock held (the drop is
// the caller's code), and the call fails as a spawn on a shut-down runtime.
template <class Spawn>
aspen_status through_handle(const char* what, aspen_handle* h, void* data, aspen_drop_fn drop, aspen_join** out,
                            Spawn spawn) {
    if (out) *out = nullptr;
    if (h) {
        std::shared_lock g(h->link->m);
        if (aspen_runtime* rt = h->link->rt) return spawn(rt);
    }
    if (drop) drop(data);
    return h ? fail(ASPEN_SHUT_DOWN, what, "the handle's runtime was freed") : null_arg(what, "h");
}

}  // namespace

extern "C" {

const char* aspen_status_name(aspen_status status) {
    switch (status) {
        case ASPEN_OK: return "ASPEN_OK";
        case ASPEN_PENDING: return "ASPEN_PENDING";
        case ASPEN_EINVAL: return "ASPEN_EINVAL";
        case ASPEN_ENOMEM: return "ASPEN_ENOMEM";
        case ASPEN_SHUT_DOWN: return "ASPEN_SHUT_DOWN";
        case ASPEN_CANCELLED: return "ASPEN_CANCELLED";
        case ASPEN_MISUSE: return "ASPEN_MISUSE";
        case ASPEN_PANIC: return "ASPEN_PANIC";
        case ASPEN_ERROR: return "ASPEN_ERROR";
        case ASPEN_CLOSED: return "ASPEN_CLOSED";
        case ASPEN_WOULD_BLOCK: return "ASPEN_WOULD_BLOCK";
        case ASPEN_STATUS_INT_MAX_: break;
    }
    return "(unknown aspen_status)";
}

const char* aspen_last_error(void) { return last_error_text; }

aspen_status aspen_config_init_sized(aspen_config* cfg, size_t size) {
    const char* what = "aspen_config_init";
    if (!cfg) return null_arg(what, "cfg");
    if (size < min_config_size) return fail(ASPEN_EINVAL, what, "size is too small for an aspen_config");
    return guarded(what, [&] {
        aspen_config full = default_config();
        // Only the caller's bytes: a shorter struct ends where its own
        // header said; a longer one's unknown tail means "default".
        std::size_t n = std::min(size, sizeof full);
        std::memcpy(cfg, &full, n);
        std::memset(reinterpret_cast<unsigned char*>(cfg) + n, 0, size - n);
        cfg->size = size;
        return ASPEN_OK;
    });
}

// The symbol that programs built before the macro call: the whole struct.
aspen_status(aspen_config_init)(aspen_config* cfg) { return aspen_config_init_sized(cfg, sizeof(aspen_config)); }

aspen_status aspen_runtime_new(const aspen_config* cfg, aspen_runtime** out) {
    if (!out) return null_arg("aspen_runtime_new", "out");
    *out = nullptr;
    return guarded("aspen_runtime_new", [&] {
        aspen_config c;
        if (cfg) {
            if (aspen_status s = read_config(cfg, c); s != ASPEN_OK) return s;
        } else {
            aspen_config_init(&c);
        }
        auto rt = std::make_unique<aspen_runtime>();
        if (c.current_thread) rt->single = std::make_unique<aspen::current_thread_runtime>(to_cpp(c));
        else rt->multi = std::make_unique<aspen::runtime>(to_cpp(c));
        *out = rt.release();
        return ASPEN_OK;
    });
}

aspen_status aspen_runtime_shutdown(aspen_runtime* rt) {
    if (!rt) return null_arg("aspen_runtime_shutdown", "rt");
    if (polling_rt == rt)
        return fail(ASPEN_MISUSE, "aspen_runtime_shutdown", "called from one of the runtime's own tasks");
    return guarded("aspen_runtime_shutdown", [&] {
        // acq_rel: release as in is_stopping; acquire makes a repeated
        // call see the first one's flag (it restores the right value).
        bool was = rt->stopping.exchange(true, std::memory_order_acq_rel);
        try {
            rt->with([](auto& r) { r.shutdown(); });
        } catch (...) {
            // relaxed: nothing was dropped under the flag; it goes back.
            rt->stopping.store(was, std::memory_order_relaxed);
            throw;
        }
        return ASPEN_OK;
    });
}

aspen_status aspen_runtime_free(aspen_runtime* rt) {
    if (!rt) return ASPEN_OK;
    aspen_status s = aspen_runtime_shutdown(rt);
    if (s != ASPEN_OK) return s;
    {
        std::unique_lock g(rt->link->m);  // waits for the handle calls using rt
        rt->link->rt = nullptr;
    }
    delete rt;
    return s;
}

aspen_status aspen_runtime_metrics(aspen_runtime* rt, aspen_metrics* out) {
    return metrics_of("aspen_runtime_metrics", rt, std::nullopt, out);
}

aspen_status aspen_runtime_worker_metrics(aspen_runtime* rt, size_t index, aspen_metrics* out) {
    return metrics_of("aspen_runtime_worker_metrics", rt, index, out);
}

aspen_status aspen_spawn(aspen_runtime* rt, aspen_poll_fn poll, void* data, aspen_drop_fn drop, aspen_join** out) {
    return spawn_c_task("aspen_spawn", rt, poll, data, drop, out);
}

aspen_status aspen_block_on(aspen_runtime* rt, aspen_poll_fn poll, void* data, aspen_drop_fn drop) {
    return guarded("aspen_block_on", [&] {
        task_end end(rt, data, drop);
        if (!rt) return null_arg("aspen_block_on", "rt");
        if (!poll) return null_arg("aspen_block_on", "poll");
        // Refused on a runtime's thread before it starts: the task is
        // dropped, never run.
        aspen::detail::check_blocking_allowed("aspen_block_on");
        try {
            return rt->block_on(c_task(std::move(end), poll));
        } catch (const aspen::task_cancelled&) {
            return fail(ASPEN_SHUT_DOWN, "aspen_block_on", "the runtime was shut down before the task finished");
        }
    });
}

aspen_status aspen_join_wait(aspen_join* join) {
    if (!join) return null_arg("aspen_join_wait", "join");
    aspen_status err = ASPEN_OK;
    if (!claim(*join, aspen_join::waiting, "aspen_join_wait", err)) return err;
    bool delivered = false;  // a refused or failed wait leaves the join as it was
    aspen_status s = guarded("aspen_join_wait", [&] {
        aspen::detail::check_blocking_allowed("aspen_join_wait");
        aspen_status o = wait_outcome(*join);
        delivered = true;
        return o;
    });
    set_use(*join, delivered ? aspen_join::taken : aspen_join::idle);
    return s;
}

aspen_status aspen_join_poll(aspen_join* join, aspen_context* cx) {
    if (!join) return null_arg("aspen_join_poll", "join");
    if (!cx) return null_arg("aspen_join_poll", "cx");
    aspen_status err = ASPEN_OK;
    if (!claim(*join, aspen_join::polling, "aspen_join_poll", err)) return err;
    return guarded("aspen_join_poll", [&] {
        std::optional<aspen_status> o = join->state->poll(cx->cx.waker());
        if (!o) return ASPEN_PENDING;
        set_use(*join, aspen_join::taken);
        return *o;
    });
}

aspen_status aspen_join_abort(aspen_join* join) {
    if (!join) return null_arg("aspen_join_abort", "join");
    if (join->blocking) join->blocking->cancel();
    join->handle.abort();
    return ASPEN_OK;
}

int aspen_join_is_finished(const aspen_join* join) {
    if (!join) {
        null_arg("aspen_join_is_finished", "join");
        return -1;
    }
    return join->state->done() ? 1 : 0;
}

uint64_t aspen_join_id(const aspen_join* join) {
    if (!join) {
        null_arg("aspen_join_id", "join");
        return 0;
    }
    return join->handle.id().value();  // the handle lives as long as the join
}

void aspen_join_free(aspen_join* join) { delete join; }

aspen_runtime* aspen_context_runtime(const aspen_context* cx) {
    if (!cx) {
        null_arg("aspen_context_runtime", "cx");
        return nullptr;
    }
    return cx->rt;
}

uint64_t aspen_context_task_id(const aspen_context* cx) {
    if (!cx) {
        null_arg("aspen_context_task_id", "cx");
        return 0;
    }
    // A context exists only while its task is polled, on the polling
    // thread, where that task is the current one.
    std::optional<aspen::task_id> id = aspen::try_current_task_id();
    return id ? id->value() : 0;
}

aspen_status aspen_yield(aspen_context* cx) {
    if (!cx) return null_arg("aspen_yield", "cx");
    return guarded("aspen_yield", [&] { return yield_c_task("aspen_yield", *cx); });
}

aspen_status aspen_context_waker(const aspen_context* cx, aspen_waker** out) {
    return new_from("aspen_context_waker", out, cx, "cx",
                    [](const aspen_context& c) { return new aspen_waker{c.cx.waker()}; });
}

aspen_status aspen_waker_clone(const aspen_waker* waker, aspen_waker** out) {
    return new_from("aspen_waker_clone", out, waker, "waker", [](const aspen_waker& w) { return new aspen_waker{w.w}; });
}

aspen_status aspen_waker_wake(aspen_waker* waker) {
    if (!waker) return null_arg("aspen_waker_wake", "waker");
    waker->w.wake();
    delete waker;
    return ASPEN_OK;
}

aspen_status aspen_waker_wake_by_ref(const aspen_waker* waker) {
    if (!waker) return null_arg("aspen_waker_wake_by_ref", "waker");
    waker->w.wake_by_ref();
    return ASPEN_OK;
}

void aspen_waker_free(aspen_waker* waker) { delete waker; }

uint64_t aspen_now_ns(void) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(aspen::now().time_since_epoch());
    return static_cast<uint64_t>(ns.count());
}

aspen_status aspen_timer_new(uint64_t delay_ns, aspen_timer** out) {
    if (!out) return null_arg("aspen_timer_new", "out");
    *out = nullptr;
    return guarded("aspen_timer_new", [&] {
        *out = new aspen_timer{aspen::timer(after(delay_ns))};
        return ASPEN_OK;
    });
}

aspen_status aspen_timer_poll(aspen_timer* timer, aspen_context* cx) {
    if (!timer) return null_arg("aspen_timer_poll", "timer");
    if (!cx) return null_arg("aspen_timer_poll", "cx");
    const char* what = "aspen_timer_poll";
    return guarded(what, [&] {
        auto poll = [&](aspen::context& c) { return timer->t.poll(c) ? std::optional<bool>(true) : std::nullopt; };
        return budgeted(what, *cx, poll) ? ASPEN_READY : ASPEN_PENDING;
    });
}

aspen_status aspen_timer_reset(aspen_timer* timer, uint64_t delay_ns) {
    if (!timer) return null_arg("aspen_timer_reset", "timer");
    timer->t.reset(after(delay_ns));
    return ASPEN_OK;
}

void aspen_timer_free(aspen_timer* timer) { delete timer; }

aspen_status aspen_advance_new(uint64_t ns, aspen_advance** out) {
    if (!out) return null_arg("aspen_advance_new", "out");
    *out = nullptr;
    return guarded("aspen_advance_new", [&] {
        *out = new aspen_advance{std::chrono::nanoseconds(static_cast<std::int64_t>(clamp_delay(ns)))};
        return ASPEN_OK;
    });
}

aspen_status aspen_advance_poll(aspen_advance* advance, aspen_context* cx) {
    const char* what = "aspen_advance_poll";
    if (!advance) return null_arg(what, "advance");
    if (!cx) return null_arg(what, "cx");
    return guarded(what, [&] {
        if (advance->moved) return ASPEN_READY;
        // What aspen::advance does, in two polls: move the clock (firing the
        // timers now due), then yield so their tasks run before we go on.
        aspen::detail::driver& d = aspen::detail::current_driver(what);
        if (!d.is_paused())
            return fail(ASPEN_MISUSE, what, "the clock is not paused (aspen_config.start_paused)");
        d.advance(advance->by);
        advance->moved = true;
        return yield_c_task(what, *cx);
    });
}

void aspen_advance_free(aspen_advance* advance) { delete advance; }

aspen_status aspen_channel_new(size_t capacity, aspen_drop_fn drop, aspen_sender** tx, aspen_receiver** rx) {
    const char* what = "aspen_channel_new";
    if (tx) *tx = nullptr;
    if (rx) *rx = nullptr;
    if (!tx) return null_arg(what, "tx");
    if (!rx) return null_arg(what, "rx");
    return guarded(what, [&] {
        auto s = std::make_unique<aspen_sender>();
        auto r = std::make_unique<aspen_receiver>();
        r->drop = drop;
        if (capacity == 0) {
            auto [t, rr] = aspen::unbounded_channel<void*>();
            s->unbounded = std::move(t);
            r->rx = std::move(rr);
        } else {
            auto [t, rr] = aspen::mpsc_channel<void*>(capacity);
            s->bounded = std::move(t);
            r->rx = std::move(rr);
        }
        *tx = s.release();
        *rx = r.release();
        return ASPEN_OK;
    });
}

aspen_status aspen_sender_clone(const aspen_sender* tx, aspen_sender** out) {
    if (!out) return null_arg("aspen_sender_clone", "out");
    *out = nullptr;
    if (!tx) return null_arg("aspen_sender_clone", "tx");
    return guarded("aspen_sender_clone", [&] {
        auto c = std::make_unique<aspen_sender>();
        c->bounded = tx->bounded;  // the empty kind stays empty
        c->unbounded = tx->unbounded;
        *out = c.release();
        return ASPEN_OK;
    });
}

aspen_status aspen_try_send(aspen_sender* tx, void* msg) {
    if (!tx) return null_arg("aspen_try_send", "tx");
    return guarded("aspen_try_send", [&] { return send_now("aspen_try_send", *tx, msg); });
}

aspen_status aspen_send_poll(aspen_sender* tx, void* msg, aspen_context* cx) {
    const char* what = "aspen_send_poll";
    if (!tx) return null_arg(what, "tx");
    if (!cx) return null_arg(what, "cx");
    if (tx->op && tx->pending_msg != msg)
        return fail(ASPEN_MISUSE, what, "a send of another message is pending on this sender; poll it to its end");
    return guarded(what, [&] {
        auto poll = [&](aspen::context& c) -> std::optional<aspen_status> {
            if (tx->unbounded.valid()) return send_now(what, *tx, msg);
            auto start = [&](auto& op) {
                op.emplace(tx->bounded.send(msg));
                tx->pending_msg = msg;
            };
            std::optional<std::optional<void*>> r = poll_kept(tx->op, c, start, poll_leaf);
            if (!r) return std::nullopt;
            if (*r) return closed_channel(what, refused_send);
            return ASPEN_READY;
        };
        return budgeted(what, *cx, poll).value_or(ASPEN_PENDING);
    });
}

aspen_status aspen_blocking_send(aspen_sender* tx, void* msg) {
    const char* what = "aspen_blocking_send";
    if (!tx) return null_arg(what, "tx");
    if (tx->op)
        return fail(ASPEN_MISUSE, what, "a send polled by a task is pending on this sender; poll it to its end first");
    return guarded(what, [&] {
        aspen::detail::check_may_block(what);  // also for an unbounded channel: one rule for both kinds
        if (tx->unbounded.valid()) return send_now(what, *tx, msg);
        if (tx->bounded.blocking_send(msg)) return closed_channel(what, refused_send);
        return ASPEN_OK;
    });
}

void aspen_sender_free(aspen_sender* tx) { delete tx; }

aspen_status aspen_recv_poll(aspen_receiver* rx, aspen_context* cx, void** out) {
    const char* what = "aspen_recv_poll";
    if (!rx) return null_arg(what, "rx");
    if (!cx) return null_arg(what, "cx");
    if (!out) return null_arg(what, "out");
    return guarded(what, [&] {
        auto poll = [&](aspen::context& c) -> std::optional<aspen_status> {
            auto start = [&](auto& op) { op.emplace(rx->rx.recv()); };
            std::optional<std::optional<void*>> r = poll_kept(rx->op, c, start, poll_leaf);
            if (!r) return std::nullopt;
            if (!*r) return closed_channel(what, end_of_stream);
            *out = **r;
            return ASPEN_READY;
        };
        return budgeted(what, *cx, poll).value_or(ASPEN_PENDING);
    });
}

aspen_status aspen_try_recv(aspen_receiver* rx, void** out) {
    const char* what = "aspen_try_recv";
    if (!rx) return null_arg(what, "rx");
    if (!out) return null_arg(what, "out");
    return guarded(what, [&] {
        // Read first: closed or with no sender left, nothing can arrive
        // after it, so an empty channel then is the end of the stream.
        const bool ended = rx->closed || rx->rx.sender_count() == 0;
        if (std::optional<void*> m = rx->rx.try_recv()) {
            *out = *m;
            return ASPEN_OK;
        }
        if (ended) return closed_channel(what, end_of_stream);
        return ASPEN_WOULD_BLOCK;
    });
}

aspen_status aspen_blocking_recv(aspen_receiver* rx, void** out) {
    const char* what = "aspen_blocking_recv";
    if (!rx) return null_arg(what, "rx");
    if (!out) return null_arg(what, "out");
    if (rx->op)
        return fail(ASPEN_MISUSE, what,
                    "a receive polled by a task is pending on this receiver; poll it to its end first");
    return guarded(what, [&] {
        std::optional<void*> m = rx->rx.blocking_recv();
        if (!m) return closed_channel(what, end_of_stream);
        *out = *m;
        return ASPEN_OK;
    });
}

aspen_status aspen_receiver_close(aspen_receiver* rx) {
    if (!rx) return null_arg("aspen_receiver_close", "rx");
    return guarded("aspen_receiver_close", [&] {
        rx->rx.close();
        rx->closed = true;
        return ASPEN_OK;
    });
}

void aspen_receiver_free(aspen_receiver* rx) {
    if (!rx) return;
    guarded("aspen_receiver_free", [&] {
        rx->op.reset();
        rx->rx.close();  // from here on no send succeeds: what is left is all there will be
        while (std::optional<void*> m = rx->rx.try_recv())
            if (rx->drop) rx->drop(*m);
        return ASPEN_OK;
    });
    delete rx;
}

aspen_status aspen_fd_adopt(int fd, aspen_fd** out) {
    if (!out) return null_arg("aspen_fd_adopt", "out");
    *out = nullptr;
    return guarded("aspen_fd_adopt", [&] {
        auto owned = std::make_unique<aspen_fd>();  // first: adopt then cannot be undone by a bad_alloc
        owned->fd = aspen::async_fd::adopt(fd);
        *out = owned.release();
        return ASPEN_OK;
    });
}

aspen_status aspen_fd_poll(aspen_fd* fd, int direction, aspen_fd_fn fn, void* arg, long long* result,
                           aspen_context* cx) {
    const char* what = "aspen_fd_poll";
    if (!fd) return null_arg(what, "fd");
    if (!fn) return null_arg(what, "fn");
    if (!result) return null_arg(what, "result");
    if (!cx) return null_arg(what, "cx");
    if (!valid_direction(direction)) return bad_direction(what);
    if (fd->wait[direction])
        return fail(ASPEN_MISUSE, what,
                    "an aspen_fd_ready_poll is pending in this direction; poll it to its end first");
    aspen_status s = guarded(what, [&] {
        auto start = [&](auto& op) {
            fd_call call{fn, arg};
            if (direction == ASPEN_FD_READ) op.emplace(fd->fd.read_with(call));
            else op.emplace(fd->fd.write_with(call));
        };
        auto poll_op = [](auto& op, aspen::context& c) { return op.poll(c); };
        auto poll = [&](aspen::context& c) { return poll_kept(fd->op[direction], c, start, poll_op); };
        std::optional<long long> r = budgeted(what, *cx, poll);
        if (!r) return ASPEN_PENDING;
        *result = *r;
        return ASPEN_OK;
    });
    if (s != ASPEN_OK && s != ASPEN_PENDING) *result = -errno_of_last_failure;  // the operation was reset
    return s;
}

aspen_status aspen_fd_ready_poll(aspen_fd* fd, int direction, aspen_context* cx) {
    const char* what = "aspen_fd_ready_poll";
    if (!fd) return null_arg(what, "fd");
    if (!cx) return null_arg(what, "cx");
    if (!valid_direction(direction)) return bad_direction(what);
    if (fd->op[direction])
        return fail(ASPEN_MISUSE, what, "an aspen_fd_poll is pending in this direction; poll it to its end first");
    return guarded(what, [&] {
        const bool write = direction == ASPEN_FD_WRITE;
        auto start = [&](auto& w) {
            w.emplace(aspen::detail::ready_wait_of(fd->fd, write, write ? "write readiness" : "read readiness"));
        };
        auto poll_wait = [](auto& w, aspen::context& c) { return w.poll(c); };
        auto poll = [&](aspen::context& c) { return poll_kept(fd->wait[direction], c, start, poll_wait); };
        std::optional<aspen::detail::fd_readiness> r = budgeted(what, *cx, poll);
        if (!r) return ASPEN_PENDING;
        fd->seen[direction] = *r;
        return ASPEN_OK;
    });
}

aspen_status aspen_fd_clear_ready(aspen_fd* fd, int direction) {
    const char* what = "aspen_fd_clear_ready";
    if (!fd) return null_arg(what, "fd");
    if (!valid_direction(direction)) return bad_direction(what);
    // Only what the last ready poll reported, by its tick: an edge that
    // came after it (after the caller's EAGAIN, too) is kept.
    if (std::optional<aspen::detail::fd_readiness> seen = std::exchange(fd->seen[direction], std::nullopt))
        aspen::detail::clear_ready_of(fd->fd, *seen);
    return ASPEN_OK;
}

int aspen_fd_native(const aspen_fd* fd) {
    if (!fd) {
        null_arg("aspen_fd_native", "fd");
        return -1;
    }
    return fd->fd.native_handle();
}

void aspen_fd_free(aspen_fd* fd) { delete fd; }

aspen_status aspen_spawn_blocking(aspen_runtime* rt, aspen_status (*fn)(void* data), void* data, aspen_drop_fn drop,
                                  aspen_join** out) {
    return spawn_c_blocking("aspen_spawn_blocking", rt, fn, data, drop, out);
}

aspen_status aspen_runtime_handle(aspen_runtime* rt, aspen_handle** out) {
    return new_from("aspen_runtime_handle", out, rt, "rt", [](aspen_runtime& r) { return new aspen_handle{r.link}; });
}

aspen_status aspen_handle_clone(const aspen_handle* h, aspen_handle** out) {
    return new_from("aspen_handle_clone", out, h, "h", [](const aspen_handle& o) { return new aspen_handle{o.link}; });
}

aspen_status aspen_handle_spawn(aspen_handle* h, aspen_poll_fn poll, void* data, aspen_drop_fn drop, aspen_join** out) {
    return through_handle("aspen_handle_spawn", h, data, drop, out,
                          [&](aspen_runtime* rt) { return spawn_c_task("aspen_handle_spawn", rt, poll, data, drop, out); });
}

aspen_status aspen_handle_spawn_blocking(aspen_handle* h, aspen_status (*fn)(void* data), void* data, aspen_drop_fn drop,
                                         aspen_join** out) {
    return through_handle("aspen_handle_spawn_blocking", h, data, drop, out, [&](aspen_runtime* rt) {
        return spawn_c_blocking("aspen_handle_spawn_blocking", rt, fn, data, drop, out);
    });
}

void aspen_handle_free(aspen_handle* h) { delete h; }

aspen_status aspen_block_in_place(aspen_status (*fn)(void* data), void* data) {
    const char* what = "aspen_block_in_place";
    if (!fn) return null_arg(what, "fn");
    aspen_status result = ASPEN_OK;
    aspen_status s = guarded(what, [&] {
        result = aspen::block_in_place([&] { return fn(data); });
        return ASPEN_OK;
    });
    return s == ASPEN_OK ? result : s;
}

}  // extern "C"
