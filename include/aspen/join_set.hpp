// join_set<T> and task_group: many child tasks owned by one task.
//
//   aspen::join_set<int> set;
//   for (int i = 0; i < n; ++i) set.spawn(work(i));
//   while (std::optional<int> v = co_await set.next()) use(*v);  // completion order
//
//   int total = co_await aspen::task_group::scope([&](aspen::task_group& g) -> aspen::task<int> {
//       g.spawn(part(1));
//       g.spawn(part(2));
//       co_return 0;
//   });   // returns only after every child has finished
//
// join_set<T> (Tokio's JoinSet): spawn(task) starts a child on the
// runtime of the calling task; `co_await next()` gives the result of the
// next child to finish, in completion order: the value (std::monostate for
// void), the child's exception rethrown, or nullopt when no child is left;
// try_next() is the same without waiting (nullopt also while the children
// left are still running); next_with_id() and try_next_with_id() give the
// child's task_id with its value (Tokio's join_next_with_id);
// next_result() and try_next_result() give the outcome as a join_result
// (Tokio's Result<T, JoinError>: the id with the value, exception or
// cancellation, nothing thrown);
// `co_await join_all()` waits for all of them and
// gives their values in completion order (a vector). spawn_blocking(f) runs
// f on the blocking pool as a child, its result reported as a task's.
// spawn returns an abort_handle for that one child (Tokio's AbortHandle):
// once it is aborted, next() throws task_cancelled for it, in its turn.
// abort_all() aborts every child: they are no longer in the set (size() is
// 0, next() gives nullopt), and each stops at its next suspension point.
// `co_await shutdown()` aborts every child and waits until all are gone
// (results not yet taken are dropped). Destroying the set aborts every
// child without waiting (a destructor cannot wait), like dropping a JoinSet.
//
// task_group::scope(body) runs body(group) in the calling task, then waits
// for every child of the group, so no child outlives the call:
// * body returns: every child is awaited; if one throws, the others are
//   aborted and awaited, then that exception is rethrown;
// * body throws: every child is aborted and awaited, then body's exception
//   is rethrown.
// Child values are dropped (pass results out through the body's captures).
// If the task awaiting scope() is itself aborted, the children are aborted
// but cannot be awaited: each stops at its next suspension point.
//
// Cancel safety: `co_await set.next()` is cancel-safe: a result is taken
// out of the set only by the poll that completes the await, so if the task
// is aborted or next() loses a select, no result is lost (it stays in the
// set). A child aborted by abort_all / shutdown / the destructor loses
// whatever it was doing, as any aborted task does.
//
// Rules: a set belongs to one task: spawn, next, abort_all and shutdown
// from another task throw std::logic_error (tasks awaited inline by the
// owner count as the owner). One next() at a time. Neither copyable nor
// movable. Children may run on any worker; T must be move-constructible.
#pragma once

#include <aspen/detail/combinator.hpp>
#include <aspen/detail/spin_mutex.hpp>
#include <aspen/join_handle.hpp>
#include <aspen/join_result.hpp>
#include <aspen/spawn.hpp>
#include <aspen/spawn_blocking.hpp>
#include <aspen/sync/waiter_list.hpp>
#include <aspen/task.hpp>
#include <aspen/task_id.hpp>
#include <aspen/waker.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace aspen {

template <class T>
class join_set;
namespace detail {
// What a join_set's next awaitable gives: the value (next), the value with
// the child's id (next_with_id), or a join_result (next_result).
enum class next_shape : unsigned char { value, with_id, result };
}  // namespace detail
template <class T, detail::next_shape Shape = detail::next_shape::value>
class join_set_next_awaitable;

namespace detail {

// What the children share with the set: finished children's outcomes, in
// completion order, and the waker of the owner waiting in next(). Outcomes
// are list nodes allocated when the child is spawned and spliced from
// list to list afterwards, so reporting one allocates nothing: it also
// happens in a destructor, when an aborted child's frame goes.
template <class T>
struct join_set_state {
    struct outcome {
        std::uint64_t id;
        std::optional<or_monostate<T>> value;
        std::exception_ptr error;
        bool cancelled = false;  // destroyed before it finished (aborted)
    };
    using outcomes = std::list<outcome>;

    void push(outcomes& from) noexcept {
        aspen::waker w;
        {
            std::lock_guard g(lock);
            done.splice(done.end(), from);
            w = std::move(waiter);
        }
        w.wake();
    }

    aspen::detail::spin_mutex lock;
    outcomes done;
    aspen::waker waiter;
};

// A child's outcome on its way to the set, made by spawn() and moved into
// the child's frame as a parameter: if the frame goes before the child
// reported (aborted through an abort_handle, even before it started, or
// destroyed at shutdown), the destructor reports it cancelled, so next()
// never waits for a child that will not report.
template <class T>
class join_set_report {
public:
    using state = join_set_state<T>;
    join_set_report(std::shared_ptr<state> st, std::uint64_t id) : st_(std::move(st)) {
        slot_.push_back(typename state::outcome{id, std::nullopt, nullptr});
    }
    join_set_report(join_set_report&& other) noexcept : st_(std::move(other.st_)) {
        slot_.splice(slot_.end(), other.slot_);  // leaves other's slot empty
    }
    join_set_report& operator=(join_set_report&&) = delete;
    ~join_set_report() {
        if (slot_.empty()) return;
        slot_.front().cancelled = true;
        st_->push(slot_);
    }
    typename state::outcome& outcome() noexcept { return slot_.front(); }
    void send() noexcept { st_->push(slot_); }

private:
    std::shared_ptr<state> st_;
    typename state::outcomes slot_;  // one outcome until sent
};

// Runs the child inline and reports its outcome to the set. Aborted by
// abort_all (the set forgot it), its cancelled report is skipped by next().
template <class T>
task<void> join_set_child(join_set_report<T> report, task<T> t) {
    auto& o = report.outcome();
    try {
        if constexpr (std::is_void_v<T>) {
            co_await t;
            o.value.emplace();
        } else {
            o.value.emplace(co_await t);
        }
    } catch (...) {
        o.error = std::current_exception();
    }
    report.send();
}

// A blocking function's handle that aborts its task when dropped, so that
// a function that has not started never runs once the child awaiting it is
// gone (a running one finishes unobserved). A parameter of the child's
// frame, not a local: it goes with the frame also when the child is aborted
// before it ever ran.
template <class T>
struct abort_on_drop {
    explicit abort_on_drop(join_handle<T> handle) noexcept : h(std::move(handle)) {}
    abort_on_drop(abort_on_drop&&) noexcept = default;
    ~abort_on_drop() { h.abort(); }  // a no-op once awaited or moved from
    join_handle<T> h;
};

template <class T>
task<T> join_set_blocking_child(abort_on_drop<T> child) {
    co_return co_await child.h;
}

}  // namespace detail

namespace detail {
// What next() gives, next_with_id() or next_result(): the value alone,
// with the child's task id, or the whole outcome.
template <class T, next_shape Shape>
using join_set_result = std::conditional_t<
    Shape == next_shape::value, or_monostate<T>,
    std::conditional_t<Shape == next_shape::with_id, std::pair<task_id, or_monostate<T>>, join_result<T>>>;
}  // namespace detail

// What join_set::next() returns; `co_await` it for std::optional<T>
// (next_with_id(): for std::optional<std::pair<task_id, T>>; next_result():
// for std::optional<join_result<T>>).
template <class T, detail::next_shape Shape>
class [[nodiscard]] join_set_next_awaitable
    : public detail::sync::leaf_awaitable<join_set_next_awaitable<T, Shape>> {
public:
    static constexpr const char* awaited_what = "aspen::join_set::next";
    using value_type = std::optional<detail::join_set_result<T, Shape>>;

    explicit join_set_next_awaitable(join_set<T>* set) noexcept : set_(set) {}
    join_set_next_awaitable(join_set_next_awaitable&&) noexcept = default;  // until first awaited (see leaf_awaitable)
    ~join_set_next_awaitable();
    value_type await_resume();

private:
    friend class detail::sync::leaf_awaitable<join_set_next_awaitable>;
    using outcome = typename detail::join_set_state<T>::outcome;
    using outcomes = typename detail::join_set_state<T>::outcomes;
    enum class phase : unsigned char { init, waiting, ready, done };  // owner-only

    bool poll(context& cx);

    join_set<T>* set_;
    outcomes result_;  // taken by the completing poll (one node), handed out by await_resume
    phase phase_ = phase::init;
};

template <class T>
class join_set {
public:
    join_set() : state_(std::make_shared<detail::join_set_state<T>>()) {}
    join_set(const join_set&) = delete;
    join_set& operator=(const join_set&) = delete;
    ~join_set() { abort_all_unchecked(); }

    // Starts t; the abort_handle cancels this child alone (next() then
    // throws task_cancelled for it), from any thread.
    aspen::abort_handle spawn(task<T> t) {
        check_owner("aspen::join_set::spawn");
        std::uint64_t id = next_id_++;
        auto [it, inserted] = live_.try_emplace(id);
        try {
            it->second = aspen::spawn(detail::join_set_child<T>(detail::join_set_report<T>(state_, id), std::move(t)));
        } catch (...) {
            live_.erase(it);  // a report the failed spawn made is skipped
            throw;
        }
        return it->second.abort_handle();
    }

    // Runs f on the blocking pool as a child of the set (Tokio's
    // JoinSet::spawn_blocking): next() gives what f returned or threw. f
    // must return T. Aborted before it started (through the handle,
    // abort_all, shutdown or the destructor), f never runs; once running,
    // it cannot be interrupted, and next() gives task_cancelled for it.
    template <class F>
    aspen::abort_handle spawn_blocking(F&& f) {
        static_assert(std::is_same_v<detail::blocking_result_t<F>, T>,
                      "aspen::join_set<T>::spawn_blocking: the function must return T");
        check_owner("aspen::join_set::spawn_blocking");
        detail::abort_on_drop<T> child(aspen::spawn_blocking(std::forward<F>(f)));
        return spawn(detail::join_set_blocking_child<T>(std::move(child)));
    }

    // Waits for every child and gives their values in completion order
    // (Tokio's join_all; std::monostate for void). A child's exception (or
    // task_cancelled for an aborted one) is rethrown as next() would, at
    // once: the children left stay in the set.
    task<std::vector<detail::or_monostate<T>>> join_all() {
        check_owner("aspen::join_set::join_all");
        std::vector<detail::or_monostate<T>> out;
        out.reserve(size());
        for (;;) {
            join_set_next_awaitable<T> one = next();  // named: see README's g++ caveats
            std::optional<detail::or_monostate<T>> v = co_await one;
            if (!v) break;
            out.push_back(std::move(*v));
        }
        co_return out;
    }

    // co_await next() -> std::optional<T> (std::monostate for void): the next
    // finished child's value, its exception rethrown, or nullopt if none is left.
    join_set_next_awaitable<T> next() {
        check_owner("aspen::join_set::next");
        return join_set_next_awaitable<T>(this);
    }
    // The same with the child's task id (Tokio's join_next_with_id), the id
    // that spawn's abort_handle gives: std::optional<std::pair<task_id, T>>.
    // A child's exception is rethrown as next() does, without the id: to
    // know which child failed, use next_result().
    join_set_next_awaitable<T, detail::next_shape::with_id> next_with_id() {
        check_owner("aspen::join_set::next_with_id");
        return join_set_next_awaitable<T, detail::next_shape::with_id>(this);
    }
    // co_await next_result() -> std::optional<join_result<T>>: the next
    // finished child's outcome as a value (aspen/join_result.hpp), as
    // Tokio's join_next gives Result<T, JoinError>: its id, and its value,
    // exception or cancellation; nothing is thrown for a failed or aborted
    // child. nullopt when no child is left.
    join_set_next_awaitable<T, detail::next_shape::result> next_result() {
        check_owner("aspen::join_set::next_result");
        return join_set_next_awaitable<T, detail::next_shape::result>(this);
    }

    // Without waiting (Tokio's try_join_next): the next finished child's
    // value (its exception or task_cancelled rethrown), or nullopt when no
    // child has finished yet or none is left (empty() tells which).
    std::optional<detail::or_monostate<T>> try_next() {
        check_owner("aspen::join_set::try_next");
        return try_next_as<detail::next_shape::value>();
    }
    // try_next() with the child's task id, as next_with_id().
    std::optional<std::pair<task_id, detail::or_monostate<T>>> try_next_with_id() {
        check_owner("aspen::join_set::try_next_with_id");
        return try_next_as<detail::next_shape::with_id>();
    }
    // try_next() giving the outcome as a value, as next_result().
    std::optional<join_result<T>> try_next_result() {
        check_owner("aspen::join_set::try_next_result");
        return try_next_as<detail::next_shape::result>();
    }

    // Aborts every child; they leave the set at once.
    void abort_all() {
        check_owner("aspen::join_set::abort_all");
        abort_all_unchecked();
    }

    // Aborts every child and waits until each one is gone.
    task<void> shutdown() {
        check_owner("aspen::join_set::shutdown");
        abort_all_unchecked();
        std::vector<join_handle<void>> gone = std::move(aborted_);
        aborted_.clear();
        for (auto& h : gone) co_await detail::drain(h);
    }

    // Children not yet taken by next() (finished ones included).
    std::size_t size() const noexcept { return live_.size(); }
    bool empty() const noexcept { return live_.empty(); }

private:
    friend class join_set_next_awaitable<T, detail::next_shape::value>;
    friend class join_set_next_awaitable<T, detail::next_shape::with_id>;
    friend class join_set_next_awaitable<T, detail::next_shape::result>;

    template <detail::next_shape Shape>
    std::optional<detail::join_set_result<T, Shape>> try_next_as() {
        typename detail::join_set_state<T>::outcomes got;
        {
            std::lock_guard g(state_->lock);
            take_finished_locked(got);
        }
        if (got.empty()) return std::nullopt;
        return deliver<Shape>(std::move(got.front()));
    }

    void check_owner(const char* what) {
        detail::task_header* me = detail::current_task();
        if (!owner_) owner_ = me;
        if (me != owner_)
            throw std::logic_error(std::string(what) + ": a join_set belongs to one task; called from another");
    }

    // Moves the first outcome of a child still in the set (if any) to
    // `out`; outcomes of children the set forgot (abort_all) are dropped.
    void take_finished_locked(typename detail::join_set_state<T>::outcomes& out) {
        auto& done = state_->done;
        while (!done.empty()) {
            if (live_.count(done.front().id)) {
                out.splice(out.end(), done, done.begin());
                return;
            }
            done.pop_front();
        }
    }

    // Hands a taken outcome out: the child leaves the set.
    template <detail::next_shape Shape>
    std::optional<detail::join_set_result<T, Shape>> deliver(typename detail::join_set_state<T>::outcome&& o) {
        using detail::next_shape;
        auto child = live_.find(o.id);
        std::optional<task_id> id;
        if constexpr (Shape != next_shape::value) id = child->second.id();
        live_.erase(child);  // drops the child's handle; its task has reported
        if constexpr (Shape == next_shape::result) {
            return join_result<T>(*id, std::move(o.value), std::move(o.error), o.cancelled);
        } else {
            if (o.cancelled) throw task_cancelled();
            if (o.error) std::rethrow_exception(o.error);
            if constexpr (Shape == next_shape::with_id) {
                return std::pair<task_id, detail::or_monostate<T>>(*id, std::move(*o.value));
            } else {
                return std::move(o.value);
            }
        }
    }

    void abort_all_unchecked() noexcept {
        // Handles of children aborted earlier that have finished are dropped
        // here, so repeated abort_all() calls do not pile them up.
        std::erase_if(aborted_, [](const join_handle<void>& h) { return h.is_finished(); });
        for (auto& [id, h] : live_) {
            h.abort();
            try {
                aborted_.push_back(std::move(h));  // for shutdown() to wait on
            } catch (...) {
                // Out of memory: the child is aborted all the same; shutdown
                // just cannot wait for this one.
            }
        }
        live_.clear();
        typename detail::join_set_state<T>::outcomes dropped;  // destroyed outside the lock
        std::lock_guard g(state_->lock);
        dropped.swap(state_->done);
    }

    std::shared_ptr<detail::join_set_state<T>> state_;
    std::unordered_map<std::uint64_t, join_handle<void>> live_;  // owner-only
    std::vector<join_handle<void>> aborted_;                      // owner-only
    std::uint64_t next_id_ = 0;
    detail::task_header* owner_ = nullptr;
};

template <class T, detail::next_shape Shape>
bool join_set_next_awaitable<T, Shape>::poll(context& cx) {
    if (phase_ == phase::ready || phase_ == phase::done)
        throw std::logic_error("aspen::join_set::next: the awaitable was already awaited");
    auto& st = *set_->state_;
    std::lock_guard g(st.lock);
    set_->take_finished_locked(result_);
    if (!result_.empty()) {
        phase_ = phase::ready;
        return true;
    }
    if (set_->live_.empty()) {
        phase_ = phase::ready;  // nothing left: nullopt
        return true;
    }
    detail::sync::store_waker(st.waiter, cx);
    phase_ = phase::waiting;
    return false;
}

template <class T, detail::next_shape Shape>
typename join_set_next_awaitable<T, Shape>::value_type join_set_next_awaitable<T, Shape>::await_resume() {
    this->rethrow_if_error();
    phase_ = phase::done;
    if (result_.empty()) return std::nullopt;
    outcome o = std::move(result_.front());
    result_.clear();
    return set_->template deliver<Shape>(std::move(o));
}

template <class T, detail::next_shape Shape>
join_set_next_awaitable<T, Shape>::~join_set_next_awaitable() {
    if (phase_ == phase::waiting) {
        aspen::waker stale;  // ours; dropped after the lock is released
        std::lock_guard g(set_->state_->lock);
        stale = std::move(set_->state_->waiter);
    } else if (phase_ == phase::ready && !result_.empty()) {
        // Taken but never handed out: put it back first in line.
        std::lock_guard g(set_->state_->lock);
        set_->state_->done.splice(set_->state_->done.begin(), result_);
    }
}

// A scope whose children cannot outlive it; made only by scope().
class task_group {
public:
    task_group(const task_group&) = delete;
    task_group& operator=(const task_group&) = delete;

    // Starts a child; its value is dropped, its exception ends the scope.
    template <class T>
    void spawn(task<T> t) {
        if constexpr (std::is_void_v<T>)
            set_.spawn(std::move(t));
        else
            set_.spawn(drop_value(std::move(t)));
    }
    // Aborts every child started so far (the scope still waits for them).
    void abort_all() { set_.abort_all(); }
    // Children that have not finished or whose finish scope() has not seen yet.
    std::size_t size() const noexcept { return set_.size(); }

    template <class F, class R = typename std::invoke_result_t<F&, task_group&>::value_type>
    static task<R> scope(F body);

private:
    task_group() = default;

    template <class T>
    static task<void> drop_value(task<T> t) {
        (void)co_await t;
    }

    // Awaits every child; the first exception aborts the rest and is returned.
    task<std::exception_ptr> join_children() {
        try {
            // Not `while (co_await set_.next())`: g++ 12 hangs on a co_await
            // used as a plain while condition in a task awaited inline.
            for (;;) {
                std::optional<std::monostate> child = co_await set_.next();
                if (!child) break;
            }
        } catch (...) {
            co_return std::current_exception();
        }
        co_return nullptr;
    }

    join_set<void> set_;
};

template <class F, class R>
task<R> task_group::scope(F body) {
    task_group g;
    std::optional<detail::or_monostate<R>> result;
    std::exception_ptr error;
    try {
        if constexpr (std::is_void_v<R>) {
            co_await body(g);
            result.emplace();
        } else {
            result.emplace(co_await body(g));
        }
    } catch (...) {
        error = std::current_exception();
    }
    if (!error) error = co_await g.join_children();
    co_await g.set_.shutdown();  // aborts and awaits whatever is left
    if (error) std::rethrow_exception(error);
    if constexpr (!std::is_void_v<R>) co_return std::move(*result);
}

}  // namespace aspen
