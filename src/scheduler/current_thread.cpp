#include "scheduler/current_thread.hpp"

#include "sync/futex.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace aspen::detail {

// ---- drive_handoff --------------------------------------------------------------
namespace {
// Sleeps until word has one of `bits` (the word is on the waiter's stack:
// sync/futex.hpp says why the calls are raw).
void sleep_until(std::atomic<std::uint32_t>& word, std::uint32_t bits) noexcept {
    for (;;) {
        // acquire: pairs with the setter's release.
        std::uint32_t v = word.load(std::memory_order_acquire);
        if (v & bits) return;
        futex_wait(&word, v);
    }
}
// The waiting block_on's task's join waker: it points at the waiter.
void handoff_nop(void*) noexcept {}
void handoff_wake(void* p) noexcept {
    auto* word = &static_cast<drive_handoff::waiter*>(p)->word;
    // release: the task's completion (before this wake) to the waiter.
    word->fetch_or(drive_handoff::root_done, std::memory_order_release);
    futex_wake_one(word);
}
constexpr waker_vtable handoff_waker_vtable{handoff_nop, handoff_wake, handoff_wake, handoff_nop};
}  // namespace

void drive_handoff::list(waiter& w) {
    std::lock_guard lock(m_);
    w.next = head_;
    head_ = &w;
}

void drive_handoff::unlist(waiter& w) noexcept {
    std::lock_guard lock(m_);
    for (waiter** p = &head_; *p; p = &(*p)->next) {
        if (*p == &w) {
            *p = w.next;
            return;
        }
    }
}

bool drive_handoff::wait(task_header* root, const std::atomic<bool>& driving) {
    waiter self;
    aspen::waker w(&handoff_waker_vtable, &self);
    bool registered = register_join_waker(root, w);
    w.release_borrowed();
    if (!registered) return true;  // complete already
    list(self);
    // seq_cst: with the drive's seq_cst store of false (see the protocol).
    if (driving.load(std::memory_order_seq_cst)) sleep_until(self.word, root_done | drive_over);
    unlist(self);
    // acquire: the task's outcome, when it completed.
    if (self.word.load(std::memory_order_acquire) & root_done) return true;
    if (unregister_join_waker(root)) return false;
    sleep_until(self.word, root_done);  // it completed meanwhile: its wake is on the way
    return true;
}

void drive_handoff::drive_ended() noexcept {
    std::lock_guard lock(m_);
    for (waiter* w = std::exchange(head_, nullptr); w;) {
        waiter* next = w->next;  // w leaves only through unlist, which waits for the lock
        // release: the drive's queue edits to the next driver (its
        // exchange of the drive flag acquires them too).
        w->word.fetch_or(drive_over, std::memory_order_release);
        futex_wake_one(&w->word);
        w = next;
    }
}

// ---- current_thread_scheduler ---------------------------------------------------

current_thread_scheduler::current_thread_scheduler(const config& cfg)
    : scheduler(cfg, 1), global_queue_interval_(cfg.global_queue_interval), event_interval_(cfg.event_interval),
      ticks_to_event_(cfg.event_interval), time_polls_(cfg.poll_time_histogram) {}

current_thread_scheduler::~current_thread_scheduler() { shutdown(); }

bool current_thread_scheduler::on_driver() const noexcept {
    const thread_context& ctx = tls();
    return ctx.sched == this && ctx.worker == this;
}

void current_thread_scheduler::schedule(task_header* t, schedule_kind kind) {
    if (on_driver()) {
        if (kind == schedule_kind::spawn) counters_.tasks_spawned.add();
        local_.push_back(t);
        note_local_depth();
        return;
    }
    // relaxed: a statistic.
    if (kind == schedule_kind::spawn) remote_spawns_.fetch_add(1, std::memory_order_relaxed);
    remote_push_scope in_flight(*this);
    remote_.push(t);
    after_remote_push();
    io_driver().unpark();
}

task_header* current_thread_scheduler::take_local(task_header* want) noexcept {
    // The newest entry is at the back of the FIFO; it is ours once we see it
    // there (only the driver touches local_). `want` is looked for among the
    // newest join_scan_depth entries first, as the multi-thread scheduler
    // does in its own places (multi_thread.hpp, place_of): a parent awaiting
    // its children in spawn order wants the oldest of them. Erased, not
    // swapped with the back: this is the run queue, whose order is its
    // fairness.
    if (!on_driver() || local_.empty()) return nullptr;
    auto taken = local_.end() - 1;  // unless `want` is found: help with the newest
    const std::size_t depth = std::min<std::size_t>(local_.size(), join_scan_depth);
    for (std::size_t i = 1; i <= depth; ++i) {
        auto at = local_.end() - static_cast<std::ptrdiff_t>(i);
        if (*at != want) continue;
        if (!want->leaf_poll) taken = at;  // else it needs a real poll
        break;
    }
    task_header* t = *taken;
    if ((t != want && !may_help()) || t->leaf_poll) return nullptr;
    if (t != want) spend_help_unit();
    local_.erase(taken);
    note_local_depth();
    counters_.inlined_joins.add();
    return t;
}

task_header* current_thread_scheduler::next_task() {
    ++tick_;
    // A countdown, not tick % interval: no second division on every task.
    if (--ticks_to_event_ == 0) {
        ticks_to_event_ = event_interval_;
        if (io_driver().has_interest()) io_driver().poll();
    }
    if (tick_ % global_queue_interval_ == 0 || local_.empty()) {
        task_header* batch[64];
        std::size_t n = remote_.pop_batch(batch, 64);
        counters_.injector_pops.add(n);
        local_.insert(local_.end(), batch, batch + n);
    }
    if (local_.empty()) return nullptr;
    task_header* t = local_.front();
    local_.pop_front();
    note_local_depth();
    return t;
}

bool current_thread_scheduler::take_the_drive(task_header* root) {
    // seq_cst: the previous driver's queue edits become ours (acquire), and
    // with shutdown's seq_cst store of stopping_ and load of driving_, either
    // shutdown waits for this drive or this drive sees stopping_ and never
    // touches the queues shutdown is draining. While another thread drives,
    // root (spawned from outside) runs in that drive; if the drive ends
    // first, we try to take over.
    while (driving_.exchange(true, std::memory_order_seq_cst)) {
        if (handoff_.wait(root, driving_)) return false;
    }
    return true;
}

void current_thread_scheduler::run_until_complete(task_header* root) {
    if (!take_the_drive(root)) return;
    thread_context& ctx = tls();
    ctx.sched = this;
    ctx.worker = this;
    ctx.completions = &counters_.tasks_completed;
    ctx.counters = &counters_;
    counters_.busy.start();
    // seq_cst: see stopping_ set by a shutdown on another thread (above).
    while (!is_complete(root) && !stopping_.load(std::memory_order_seq_cst)) {
        task_header* t = next_task();
        if (!t) {
            idle();
            continue;
        }
        poll_outcome o = counted_poll(t, counters_, time_polls_);
        if (o == poll_outcome::requeue || o == poll_outcome::yield) {
            local_.push_back(t);
            note_local_depth();
        }
    }
    counters_.busy.stop();
    ctx = thread_context{};
    // seq_cst: hands the queues over (release) and must not pass
    // notify_all's waiter-count check (see unpark in park.hpp).
    driving_.store(false, std::memory_order_seq_cst);
    driving_.notify_all();
    handoff_.drive_ended();
    // Shut down from another thread while we drove, or before this drive
    // began (a runtime_handle's block_on racing the runtime's destruction):
    // the shutdown destroys every task once nobody drives, the root too
    // (spawned from outside, so registered), on its own thread. Destroying
    // them here as well would drain the queues on two threads at once.
    if (!is_complete(root)) block_until_complete(root);
}

// Nothing to run: sleep in the driver until a wake, I/O or a timer (wakers
// it fires run here and fill local_). A paused clock jumps to the next timer,
// unless a blocking function is still running.
void current_thread_scheduler::idle() {
    counters_.parks.add();
    counters_.busy.stop();
    before_park();
    if (!(blocking().idle() && io_driver().auto_advance())) io_driver().park(std::nullopt);
    after_unpark();
    counters_.busy.start();
    counters_.unparks.add();
}

void current_thread_scheduler::shutdown() {
    if (on_driver()) throw std::logic_error("aspen::current_thread_runtime: shutdown from one of its own tasks");
    std::lock_guard lock(shutdown_mutex_);
    if (shut_down_) return;
    shut_down_ = true;
    // seq_cst (with run_until_complete's exchange of driving_ and its load
    // of stopping_): a drive that starts now sees stopping_, or this load
    // sees it driving and waits for it.
    stopping_.store(true, std::memory_order_seq_cst);
    io_driver().unpark();
    // acquire (seq_cst for the first load, see above): pairs with the
    // driver's release when it stops.
    while (driving_.load(std::memory_order_seq_cst)) driving_.wait(true, std::memory_order_acquire);
    finish_shutdown();
}

bool current_thread_scheduler::drain_queues() {
    bool any = !local_.empty();
    while (!local_.empty()) {
        task_header* t = local_.front();
        local_.pop_front();
        destroy_queued(t);
    }
    note_local_depth();
    return destroy_all(remote_) || any;
}

runtime_metrics current_thread_scheduler::metrics() const {
    runtime_metrics m;
    m.workers.push_back(counters_.read());
    // relaxed: a statistic (see local_depth_).
    m.workers[0].local_queue_depth = local_depth_.load(std::memory_order_relaxed);
    // relaxed: statistics.
    m.remote_spawns = remote_spawns_.load(std::memory_order_relaxed);
    m.remote_completions = remote_completions();
    m.tasks_alive = m.workers[0].tasks_spawned + m.remote_spawns - m.workers[0].tasks_completed - m.remote_completions;
    m.injector_depth = remote_.len();
    add_driver_and_pool_metrics(m);
    return m;
}

}  // namespace aspen::detail
