// aspen::task_tracker: count the tasks of a part of a program, without
// keeping their handles, and wait until they have all ended (as
// tokio_util::task::TaskTracker). The shape of a graceful shutdown:
//
//   aspen::task_tracker tracker;
//   aspen::cancellation_token stop;
//   while (!stop.is_cancelled()) {
//       tcp_stream conn = co_await listener.accept();
//       tracker.spawn(serve(std::move(conn), stop.child())).detach();
//   }
//   tracker.close();
//   co_await tracker.wait();   // every connection task has ended
//
// spawn(t) spawns t (aspen::spawn) and gives its join_handle, which may be
// awaited, aborted or detached as any other; the tracker counts the task
// until it has ended (finished, thrown, or been aborted or destroyed). Unlike
// a join_set, it keeps no results and aborts nothing: dropping handles
// detaches, and destroying the tracker leaves its tasks running.
//
// wait() completes once the tracker is closed and counts no task, both at
// one moment: it waits while the tracker is open, even with no task (so a
// program can spawn its first task after it started waiting), and a task
// spawned after close() is counted too (close() only says no more will
// come, it does not refuse spawns). reopen() undoes close(). wait() is
// cancel-safe. Everything but spawn and wait may be called from any thread.
// The tracker must outlive its waiters (as an event its waiters); the tasks
// it counts may outlive it.
#pragma once

#include <aspen/detail/spin_mutex.hpp>
#include <aspen/join_handle.hpp>
#include <aspen/spawn.hpp>
#include <aspen/sync/event.hpp>
#include <aspen/task.hpp>

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

namespace aspen {

namespace detail {

// Shared by the tracker and the tasks it counts, so that a task may end
// after the tracker object is gone.
class tracker_state {
public:
    void add() { change(+1, std::nullopt); }
    void remove() { change(-1, std::nullopt); }
    void set_closed(bool closed) { change(0, closed); }
    std::size_t count() const {
        std::lock_guard g(lock_);
        return tasks_;
    }
    bool closed() const {
        std::lock_guard g(lock_);
        return closed_;
    }
    auto wait() noexcept { return idle_.wait(); }

private:
    // Under the lock, so that concurrent changes leave idle_ matching the
    // last state: set exactly while closed with no task. (closed_ is read
    // and written only here: a count change that passed in the flag it read
    // before locking could undo a concurrent close.)
    void change(int delta, std::optional<bool> closed) {
        std::lock_guard g(lock_);
        tasks_ += static_cast<std::size_t>(delta);
        if (closed) closed_ = *closed;
        if (closed_ && tasks_ == 0) idle_.set();
        else idle_.reset();
    }
    mutable spin_mutex lock_;
    std::size_t tasks_ = 0;
    bool closed_ = false;
    event idle_;
};

// The count of one tracked task: taken at spawn, given back when the
// wrapping frame goes (the task ended, or was aborted or destroyed).
class tracked_count {
public:
    explicit tracked_count(std::shared_ptr<tracker_state> s) : s_(std::move(s)) { s_->add(); }
    tracked_count(tracked_count&& other) noexcept = default;
    tracked_count(const tracked_count&) = delete;
    tracked_count& operator=(const tracked_count&) = delete;
    tracked_count& operator=(tracked_count&&) = delete;
    ~tracked_count() {
        if (s_) s_->remove();
    }

private:
    std::shared_ptr<tracker_state> s_;
};

template <class T>
task<T> run_tracked(task<T> t, tracked_count) {
    co_return co_await std::move(t);
}

}  // namespace detail

class task_tracker {
public:
    task_tracker() : s_(std::make_shared<detail::tracker_state>()) {}
    task_tracker(const task_tracker&) = delete;
    task_tracker& operator=(const task_tracker&) = delete;

    // Spawns t on this worker (aspen::spawn: from inside a task) and counts
    // it until it has ended.
    template <class T>
    join_handle<T> spawn(task<T> t) {
        return aspen::spawn(detail::run_tracked(std::move(t), detail::tracked_count(s_)));
    }

    void close() { s_->set_closed(true); }
    void reopen() { s_->set_closed(false); }
    bool is_closed() const { return s_->closed(); }
    // Tasks spawned and not yet ended.
    std::size_t size() const { return s_->count(); }
    bool empty() const { return size() == 0; }
    // co_await tracker.wait(): until closed with no task (see above).
    auto wait() noexcept { return s_->wait(); }

private:
    std::shared_ptr<detail::tracker_state> s_;
};

}  // namespace aspen
