// aspen::watch_channel<T>(initial): one current value, watched by many
// receivers, replaced by senders (like Tokio's watch).
//
//   auto [tx, rx] = aspen::watch_channel<config>(initial);
//   std::shared_ptr<const config> now = rx.borrow();   // the current value
//   for (;;) {
//       bool changed = co_await rx.changed();           // false: every sender is gone
//       if (!changed) break;
//       std::shared_ptr<const config> v = rx.borrow_and_update();
//       ...
//   }
//   std::optional<config> back = tx.send(next);        // never waits
//   if (back) { /* no receiver exists: the value came back, unsent */ }
//   tx.send_modify([](config& c) { c.level = 3; });    // edit in place, as Tokio's
//   auto ready = rx.wait_for([](const config& c) { return c.ready; });
//   std::shared_ptr<const config> v = co_await std::move(ready);  // null: senders gone first
//
// Only the latest value is kept: a receiver that is slow sees the newest
// value, not every value (intermediate values are skipped by design). The
// value is held as a shared_ptr<const T>, so borrow() hands out a snapshot
// that needs no lock, may be kept across co_await and on any thread, and
// stays valid after later sends.
//
// Versions: each send makes a new version. Each receiver remembers the
// version it has seen: a new receiver (rx copy, tx.subscribe()) has seen the
// current one; changed() completes when the channel holds a version this
// receiver has not seen, and marks it seen; borrow_and_update() marks it seen,
// borrow() does not.
//
// Closing: when the last sender is gone, changed() returns true once more if
// there is an unseen version, then false. When no receiver is left, send()
// gives the value back (send_replace() stores it anyway).
//
// Cancel safety: `co_await rx.changed()` is cancel-safe: if the waiting
// task is aborted, the receiver's seen version is unchanged (a completed
// poll whose task never resumed is rolled back), so no change is missed by
// the next changed(). Values can be skipped (see above), never a change.
//
// wait_for(pred) (Tokio's Receiver::wait_for): the first version, the
// current one included, whose value satisfies pred, marked seen; null when
// every sender is gone before one does. Cancel-safe as changed() is.
// send_modify(f) / send_if_modified(f) (Tokio's): f edits a copy of the
// current value, which is stored as a new version (send_if_modified: only
// if f returns true; returns whether it did), whether or not a receiver
// exists. f runs under the channel's lock, so no other send comes between
// the copy and the store: keep it short and do not touch the channel in it.
//
// Coop budget: a changed() that completes spends one unit; with none left
// the task yields first.
//
// Rules: one changed() at a time per receiver; a changed() awaitable must not
// outlive its receiver. Handles may live on any thread; T must be
// move-constructible.
#pragma once

#include <aspen/detail/spin_mutex.hpp>
#include <aspen/poll.hpp>
#include <aspen/sync/waiter_list.hpp>
#include <aspen/sync/wake_round.hpp>
#include <aspen/task.hpp>
#include <aspen/waker.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace aspen {

template <class T>
class watch_sender;
template <class T>
class watch_receiver;
template <class T>
std::pair<watch_sender<T>, watch_receiver<T>> watch_channel(T initial);

namespace detail::sync {

template <class T>
struct watch_state {
    explicit watch_state(T initial) : value(std::make_shared<const T>(std::move(initial))) {}

    aspen::detail::spin_mutex lock;
    std::shared_ptr<const T> value;
    std::uint64_t version = 0;
    std::size_t senders = 1;
    std::size_t receivers = 1;
    waiter_list waiters;  // receivers waiting in changed()

    // Stores v as the new version and wakes every waiting receiver; returns
    // the old value (for the caller to release outside the lock).
    std::shared_ptr<const T> store_locked(std::shared_ptr<const T> v, std::unique_lock<aspen::detail::spin_mutex>& g) {
        std::swap(value, v);
        ++version;
        wake_all_locked(waiters, g);
        return v;
    }
};

}  // namespace detail::sync

// What watch_receiver::changed() returns; `co_await` it for bool: true when
// there is a version this receiver has not seen (now marked seen), false
// when every sender is gone and there is none.
template <class T>
class [[nodiscard]] watch_changed_awaitable : public detail::sync::leaf_awaitable<watch_changed_awaitable<T>> {
public:
    static constexpr const char* awaited_what = "aspen::watch_receiver::changed";

    watch_changed_awaitable(detail::sync::watch_state<T>* c, std::uint64_t* seen) noexcept : c_(c), seen_(seen) {}
    watch_changed_awaitable(watch_changed_awaitable&&) noexcept = default;  // until first awaited (see leaf_awaitable)
    ~watch_changed_awaitable() {
        // Completed but never handed out: not seen after all.
        wait_.abandon(c_->lock, [&] { *seen_ = before_; });
    }
    bool await_resume() {
        this->rethrow_if_error();
        wait_.handed_out();
        return changed_;
    }

private:
    friend class detail::sync::leaf_awaitable<watch_changed_awaitable>;

    bool poll(aspen::context& cx) {
        return wait_.poll(
            c_->lock, c_->waiters, cx, awaited_what,
            [&] { return c_->version != *seen_ || c_->senders == 0; },
            [&] {
                before_ = *seen_;
                changed_ = c_->version != *seen_;
                *seen_ = c_->version;
            });
    }

    detail::sync::watch_state<T>* c_;
    std::uint64_t* seen_;  // the receiver's seen version, guarded by c_->lock
    std::uint64_t before_ = 0;
    detail::sync::state_wait wait_;
    bool changed_ = false;
};

template <class T>
class watch_receiver : public detail::sync::counted_handle<detail::sync::watch_state<T>, &detail::sync::watch_state<T>::receivers> {
public:
    watch_receiver() noexcept = default;
    watch_receiver(const watch_receiver& other) : base(other) {
        if (this->c_) {
            std::lock_guard g(this->c_->lock);
            seen_ = other.seen_;
        }
    }
    watch_receiver(watch_receiver&&) noexcept = default;
    watch_receiver& operator=(const watch_receiver& other) {
        if (this != &other) {
            watch_receiver copy(other);
            *this = std::move(copy);
        }
        return *this;
    }
    watch_receiver& operator=(watch_receiver&&) noexcept = default;

    // co_await rx.changed() -> bool.
    watch_changed_awaitable<T> changed() {
        return watch_changed_awaitable<T>(&this->checked("aspen::watch_receiver::changed"), &seen_);
    }
    // The current value; does not mark it seen.
    std::shared_ptr<const T> borrow() const {
        auto& c = this->checked("aspen::watch_receiver::borrow");
        std::lock_guard g(c.lock);
        return c.value;
    }
    // The current value, marked seen.
    std::shared_ptr<const T> borrow_and_update() {
        auto& c = this->checked("aspen::watch_receiver::borrow_and_update");
        std::lock_guard g(c.lock);
        seen_ = c.version;
        return c.value;
    }
    // co_await rx.wait_for(pred) -> the first value (current or later)
    // with pred(value) true, marked seen; null once every sender is gone
    // without one. Name the task before awaiting it when pred holds objects
    // with destructors (README, "Compiler caveats").
    template <class Pred>
    task<std::shared_ptr<const T>> wait_for(Pred pred) {
        this->checked("aspen::watch_receiver::wait_for");
        for (;;) {
            std::shared_ptr<const T> v = borrow_and_update();
            if (pred(*v)) co_return v;
            bool more = co_await changed();
            if (!more) co_return nullptr;
        }
    }
    // True when the channel holds a version this receiver has not seen.
    bool has_changed() const {
        auto& c = this->checked("aspen::watch_receiver::has_changed");
        std::lock_guard g(c.lock);
        return c.version != seen_;
    }

private:
    using base = detail::sync::counted_handle<detail::sync::watch_state<T>, &detail::sync::watch_state<T>::receivers>;
    friend class watch_sender<T>;
    friend std::pair<watch_sender<T>, watch_receiver<T>> watch_channel<T>(T);
    watch_receiver(std::shared_ptr<detail::sync::watch_state<T>> c, std::uint64_t seen) noexcept
        : base(std::move(c)), seen_(seen) {}

    std::uint64_t seen_ = 0;  // under c_->lock while a changed() may run
};

template <class T>
class watch_sender : public detail::sync::counted_handle<detail::sync::watch_state<T>, &detail::sync::watch_state<T>::senders> {
public:
    watch_sender() noexcept = default;

    // Never waits. nullopt: stored as the new version; otherwise no receiver
    // exists and the value comes back (the current value is unchanged).
    [[nodiscard]] std::optional<T> send(T v) {
        auto& c = this->checked("aspen::watch_sender::send");
        auto next = std::make_shared<T>(std::move(v));  // allocated outside the lock
        std::shared_ptr<const T> old;                   // released after the lock
        std::unique_lock g(c.lock);
        if (c.receivers == 0) return std::optional<T>(std::move(*next));
        old = c.store_locked(std::move(next), g);
        return std::nullopt;
    }
    // Stores v as the new version whether or not anyone receives; returns
    // the value it replaced.
    std::shared_ptr<const T> send_replace(T v) {
        auto& c = this->checked("aspen::watch_sender::send_replace");
        auto next = std::make_shared<const T>(std::move(v));  // allocated outside the lock
        std::unique_lock g(c.lock);
        return c.store_locked(std::move(next), g);  // the caller releases the old value
    }
    // Edits a copy of the current value with f(T&) and stores it as a new
    // version, receivers or not (see the top for f's rules).
    template <class F>
    void send_modify(F f) {
        send_if_modified([&](T& v) {
            f(v);
            return true;
        });
    }
    // As send_modify, but stores (and wakes the receivers) only if f(T&)
    // returns true; returns what f returned. Nothing is stored if the copy
    // or f throws. Both need a copyable T.
    template <class F>
    bool send_if_modified(F f) {
        auto& c = this->checked("aspen::watch_sender::send_if_modified");
        std::shared_ptr<const T> old;  // released after the lock
        std::shared_ptr<T> next;       // so is an unused copy
        std::unique_lock g(c.lock);
        next = std::make_shared<T>(*c.value);
        if (!f(*next)) return false;
        old = c.store_locked(std::move(next), g);
        return true;
    }
    std::shared_ptr<const T> borrow() const {
        auto& c = this->checked("aspen::watch_sender::borrow");
        std::lock_guard g(c.lock);
        return c.value;
    }
    // A new receiver that has seen the current version.
    watch_receiver<T> subscribe() const {
        auto& c = this->checked("aspen::watch_sender::subscribe");
        std::lock_guard g(c.lock);
        ++c.receivers;
        return watch_receiver<T>(this->c_, c.version);
    }
    std::size_t receiver_count() const {
        auto& c = this->checked("aspen::watch_sender::receiver_count");
        std::lock_guard g(c.lock);
        return c.receivers;
    }

private:
    using base = detail::sync::counted_handle<detail::sync::watch_state<T>, &detail::sync::watch_state<T>::senders>;
    friend std::pair<watch_sender<T>, watch_receiver<T>> watch_channel<T>(T);
    explicit watch_sender(std::shared_ptr<detail::sync::watch_state<T>> c) noexcept : base(std::move(c)) {}
};

template <class T>
std::pair<watch_sender<T>, watch_receiver<T>> watch_channel(T initial) {
    auto c = std::make_shared<detail::sync::watch_state<T>>(std::move(initial));
    return {watch_sender<T>(c), watch_receiver<T>(c, 0)};
}

}  // namespace aspen
