// The spawn_blocking pool; the protocol is described in blocking_pool.hpp.
#include "blocking/blocking_pool.hpp"

#include "blocking/keep_alive.hpp"
#include "scheduler/scheduler.hpp"

#include <pthread.h>

#include <atomic>
#include <system_error>
#include <thread>
#include <utility>

namespace aspen::detail {

namespace {
std::atomic<std::size_t> threads_alive{0};
// This pool thread's state's owner (null elsewhere); the thread's reference
// on the state keeps it alive.
thread_local const std::shared_ptr<runtime_link>* pool_owner = nullptr;
}  // namespace

std::size_t blocking_threads_alive() noexcept {
    // acquire: pairs with the release decrement at the end of a thread.
    return threads_alive.load(std::memory_order_acquire);
}

struct blocking_pool::state {
    state(std::size_t max, std::chrono::nanoseconds keep) : max_threads(max), keep_alive(bounded_keep_alive(keep)) {}

    std::mutex m;
    std::condition_variable work;    // a job was queued, or shutdown
    std::condition_variable exited;  // a thread ended
    blocking_job* head = nullptr;    // FIFO of queued jobs (through ->next)
    blocking_job* tail = nullptr;
    std::size_t queued = 0;    // jobs in that FIFO
    std::size_t threads = 0;   // started and not yet ended
    std::size_t idle = 0;      // waiting for work, not claimed by a submit
    std::size_t notified = 0;  // claims not yet consumed by a woken thread
    const std::size_t max_threads;
    const std::chrono::nanoseconds keep_alive;
    bool shut_down = false;
    std::size_t in_flight = 0;  // submitted and not yet run to the end (or skipped)
    // Called under m when in_flight drops to 0; cleared by shutdown, so a
    // thread a shutdown_timeout left behind never calls into a dead runtime.
    void (*on_drained)(void*) noexcept = nullptr;
    void* drained_ctx = nullptr;
    // Written before the first thread starts, then only read. The state
    // outlives the runtime as long as a thread holds it, and the link with it.
    std::shared_ptr<runtime_link> owner;

    void push(blocking_job* j) noexcept {
        j->next = nullptr;
        if (tail) tail->next = j;
        else head = j;
        tail = j;
        ++queued;
    }
    blocking_job* pop() noexcept {
        blocking_job* j = head;
        if (!j) return nullptr;
        head = j->next;
        if (!head) tail = nullptr;
        --queued;
        return j;
    }
};

namespace {

using state = blocking_pool::state;

// Runs one job that this thread took from the queue (holding the pool's
// reference), unless it was cancelled while queued.
void run_job(blocking_job* j) noexcept {
    std::uint8_t expected = blocking_job::queued;
    // acq_rel: winning makes the function ours; losing means it was cancelled.
    if (j->phase.compare_exchange_strong(expected, blocking_job::running, std::memory_order_acq_rel)) {
        j->run(j);
        // release: the waiter that sees `done` sees the outcome.
        j->phase.store(blocking_job::done, std::memory_order_release);
        j->wake_waiter();
    }
    j->release();
}

// Waits for work; false when the thread should end (timed out unclaimed, or
// shutdown with nothing queued).
bool wait_for_work(state& s, std::unique_lock<std::mutex>& g) {
    ++s.idle;
    auto deadline = std::chrono::steady_clock::now() + s.keep_alive;
    for (;;) {
        bool timed_out = s.work.wait_until(g, deadline) == std::cv_status::timeout;
        if (s.notified > 0) {
            --s.notified;  // a submit claimed us (or another sleeper; same count)
            return true;
        }
        if (s.shut_down || timed_out) {
            --s.idle;
            return false;
        }
    }
}

void thread_main(std::shared_ptr<state> sp) {
    pthread_setname_np(pthread_self(), "aspen-blocking");
    state& s = *sp;
    pool_owner = &s.owner;
    std::unique_lock g(s.m);
    for (;;) {
        while (blocking_job* j = s.pop()) {
            g.unlock();
            run_job(j);
            g.lock();
            if (--s.in_flight == 0 && s.on_drained) s.on_drained(s.drained_ctx);
        }
        if (s.shut_down || !wait_for_work(s, g)) break;
    }
    if (--s.threads == 0) s.exited.notify_all();
    g.unlock();
    pool_owner = nullptr;
    sp.reset();
    // release: a test that sees the count drop sees this thread done with the state.
    threads_alive.fetch_sub(1, std::memory_order_release);
}

}  // namespace

blocking_pool::blocking_pool(std::size_t max_threads, std::chrono::nanoseconds keep_alive)
    : s_(std::make_shared<state>(max_threads, keep_alive)) {}

blocking_pool::~blocking_pool() { shutdown(std::nullopt); }

bool blocking_pool::submit(blocking_job* j) {
    std::unique_lock g(s_->m);
    if (s_->shut_down) return false;
    s_->push(j);
    ++s_->in_flight;
    if (s_->idle > 0) {
        --s_->idle;
        ++s_->notified;
        s_->work.notify_one();
        return true;
    }
    if (s_->threads == s_->max_threads) return true;  // the next free thread takes it
    ++s_->threads;
    // relaxed: a statistic; thread_main's release decrement is what tests pair with.
    threads_alive.fetch_add(1, std::memory_order_relaxed);
    try {
        std::thread(thread_main, s_).detach();
    } catch (const std::system_error&) {
        --s_->threads;
        // relaxed: a statistic; the thread never started, so nothing to publish.
        threads_alive.fetch_sub(1, std::memory_order_relaxed);
        if (s_->threads > 0) return true;  // a running thread will get to it
        // No thread is left (threads end only with an empty queue), so j is
        // the only job queued and nothing would ever run it: take it back.
        s_->pop();
        --s_->in_flight;
        throw;
    }
    return true;
}

void blocking_pool::set_owner(std::shared_ptr<runtime_link> owner) {
    std::lock_guard g(s_->m);
    s_->owner = std::move(owner);
}

std::shared_ptr<runtime_link> blocking_thread_owner() { return pool_owner ? *pool_owner : nullptr; }

const std::shared_ptr<runtime_link>* exchange_blocking_owner(const std::shared_ptr<runtime_link>* owner) noexcept {
    return std::exchange(pool_owner, owner);
}

bool blocking_pool::idle() const {
    std::lock_guard g(s_->m);
    return s_->in_flight == 0;
}

blocking_pool::load blocking_pool::current_load() const {
    std::lock_guard g(s_->m);
    return {s_->threads, s_->idle, s_->queued};
}

void blocking_pool::on_drained(void (*fn)(void*) noexcept, void* ctx) {
    std::lock_guard g(s_->m);
    s_->on_drained = fn;
    s_->drained_ctx = ctx;
}

std::size_t blocking_pool::shutdown(std::optional<std::chrono::nanoseconds> timeout) {
    blocking_job* cancelled = nullptr;
    std::unique_lock g(s_->m);
    if (s_->shut_down) return 0;
    s_->shut_down = true;
    s_->on_drained = nullptr;
    cancelled = std::exchange(s_->head, nullptr);
    s_->tail = nullptr;
    s_->queued = 0;
    s_->work.notify_all();
    g.unlock();
    // Queued jobs never start. Their tasks were normally destroyed by the
    // scheduler's shutdown already; if one is still waiting, it is woken and
    // sees the job cancelled.
    while (blocking_job* j = cancelled) {
        cancelled = j->next;
        if (j->try_cancel()) j->wake_waiter();
        j->release();
    }
    g.lock();
    auto none_left = [&] { return s_->threads == 0; };
    if (!timeout) s_->exited.wait(g, none_left);
    else s_->exited.wait_for(g, *timeout, none_left);
    // Idle and claimed threads are on their way out with nothing to run.
    return s_->threads - s_->idle - s_->notified;
}

void submit_blocking(scheduler* s, blocking_job* j) {
    if (!s->blocking().submit(j)) throw runtime_shut_down();
}

}  // namespace aspen::detail
