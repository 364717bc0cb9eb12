// aspen::broadcast_channel<T>(capacity): multi-producer, multi-consumer;
// every receiver sees every value sent after it subscribed (like Tokio's
// broadcast).
//
//   auto [tx, rx] = aspen::broadcast_channel<int>(16);
//   auto rx2 = tx.subscribe();                  // sees what is sent from now on
//   std::optional<int> back = tx.send(1);       // never waits
//   if (back) { /* no receiver exists: the value came back, unsent */ }
//   for (;;) {
//       aspen::broadcast_result<int> r = co_await rx.recv();
//       if (r.has_value()) use(*r);
//       else if (r.lagged()) { /* r.lagged() values were overwritten before
//                                 this receiver read them; the next recv gives
//                                 the oldest value still kept */ }
//       else break;                              // closed: every sender is gone
//   }
//
// The channel keeps the last `capacity` values. A send never waits: when
// the ring is full it overwrites the oldest value, and a receiver that had
// not read it learns how many it missed (a "lag") on its next recv, then
// goes on from the oldest value kept. Each receiver gets a copy; the last
// receiver to read a value gets it moved, and a value is destroyed once
// every receiver has read it (or it is overwritten).
//
// Closing: when the last sender is gone, receivers get the values still
// kept for them, then "closed". When no receiver is left, send gives the
// value back. A receiver created later (tx.subscribe(), rx.resubscribe())
// starts at the next value sent.
//
// Cancel safety (as Tokio documents for its broadcast):
// * `co_await rx.recv()` is cancel-safe: if the receiving task is aborted,
//   no value is lost to it; the receiver's position moves only in the poll
//   that completes the await, and a completed poll whose task never resumed
//   is rolled back. Where values ARE lost, the loss is reported: a receiver
//   that falls more than `capacity` values behind misses the overwritten
//   ones and its next recv says how many.
// * send never waits, so it cannot be cancelled half-way.
//
// Coop budget: a recv that completes spends one unit; with none left the
// task yields first (nothing is taken until it is polled again).
//
// Rules: capacity >= 1 (std::invalid_argument otherwise); T must be
// copy-constructible. One recv at a time per receiver; a recv awaitable
// must not outlive its receiver. Senders and receivers may live on any
// thread.
#pragma once

#include <aspen/detail/spin_mutex.hpp>
#include <aspen/detail/thread_parker.hpp>
#include <aspen/poll.hpp>
#include <aspen/sync/waiter_list.hpp>
#include <aspen/sync/wake_round.hpp>
#include <aspen/waker.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace aspen {

namespace detail::sync {
template <class T>
struct bcast;
}  // namespace detail::sync

enum class broadcast_status : unsigned char {
    value,   // a value was received
    lagged,  // values were overwritten before this receiver read them
    closed,  // every sender is gone and nothing is left to read
    empty,   // (try_recv only) nothing to read right now
};

template <class T>
class broadcast_result {
public:
    broadcast_result() noexcept = default;
    broadcast_status status() const noexcept { return status_; }
    bool has_value() const noexcept { return status_ == broadcast_status::value; }
    explicit operator bool() const noexcept { return has_value(); }
    T& operator*() { return *value_; }
    T* operator->() { return &*value_; }
    // How many values this receiver missed (0 unless status() is lagged).
    std::uint64_t lagged() const noexcept { return missed_; }
    bool closed() const noexcept { return status_ == broadcast_status::closed; }

private:
    template <class>
    friend struct detail::sync::bcast;
    std::optional<T> value_;
    std::uint64_t missed_ = 0;
    broadcast_status status_ = broadcast_status::empty;
};

template <class T>
class broadcast_sender;
template <class T>
class broadcast_receiver;
template <class T>
std::pair<broadcast_sender<T>, broadcast_receiver<T>> broadcast_channel(std::size_t capacity);

namespace detail::sync {

// Shared state. Positions are absolute (they only grow); the value of
// position p lives in ring[p % capacity] while head <= p < tail.
template <class T>
struct bcast {
    struct slot {
        std::optional<T> value;
        std::size_t unread = 0;  // receivers that will still read it
    };

    explicit bcast(std::size_t capacity) : ring(capacity) {}

    aspen::detail::spin_mutex lock;
    std::vector<slot> ring;
    std::uint64_t head = 0;  // oldest position kept
    std::uint64_t tail = 0;  // position of the next send
    std::size_t senders = 1;
    std::size_t receivers = 1;
    waiter_list waiters;  // receivers at tail, waiting for a send

    slot& at(std::uint64_t pos) noexcept { return ring[pos % ring.size()]; }

    bool would_complete_locked(std::uint64_t next) const noexcept { return next < tail || senders == 0; }

    // Takes what a receiver at `next` gets now, moving `next` on. Throws only
    // if copying T throws, and then changes nothing.
    broadcast_result<T> take_locked(std::uint64_t& next) {
        broadcast_result<T> r;
        if (next < head) {
            r.status_ = broadcast_status::lagged;
            r.missed_ = head - next;
            next = head;
        } else if (next < tail) {
            slot& s = at(next);
            if (s.unread == 1) r.value_.emplace(std::move(*s.value));  // the last reader
            else r.value_.emplace(*s.value);
            if (--s.unread == 0) s.value.reset();
            ++next;
            r.status_ = broadcast_status::value;
        } else if (senders == 0) {
            r.status_ = broadcast_status::closed;
        }
        return r;
    }

    // A completed recv whose task never resumed: back to where it was.
    void roll_back_locked(std::uint64_t& next, std::uint64_t before, broadcast_result<T>& r) {
        if (r.has_value() && before >= head) {
            slot& s = at(before);
            if (!s.value) s.value = std::move(r.value_);
            ++s.unread;
        }
        next = before;  // if it was overwritten meanwhile, the next recv reports the lag
    }

    // A receiver at `next` goes away: it will not read [next, tail).
    void forget_locked(std::uint64_t next) noexcept {
        for (std::uint64_t p = std::max(next, head); p < tail; ++p) {
            slot& s = at(p);
            if (--s.unread == 0) s.value.reset();
        }
    }
};

}  // namespace detail::sync

// What broadcast_receiver::recv() returns; `co_await` it for a
// broadcast_result<T> (a value, a lag, or closed; never empty).
template <class T>
class [[nodiscard]] broadcast_recv_awaitable : public detail::sync::leaf_awaitable<broadcast_recv_awaitable<T>> {
public:
    static constexpr const char* awaited_what = "aspen::broadcast_receiver::recv";

    broadcast_recv_awaitable(detail::sync::bcast<T>* c, std::uint64_t* next) noexcept : c_(c), next_(next) {}
    broadcast_recv_awaitable(broadcast_recv_awaitable&&) noexcept = default;  // until first awaited (see leaf_awaitable)
    ~broadcast_recv_awaitable() {
        wait_.abandon(c_->lock, [&] { c_->roll_back_locked(*next_, before_, result_); });
    }
    broadcast_result<T> await_resume() {
        this->rethrow_if_error();
        wait_.handed_out();
        return std::move(result_);
    }

private:
    friend class detail::sync::leaf_awaitable<broadcast_recv_awaitable>;

    bool poll(aspen::context& cx) {
        return wait_.poll(
            c_->lock, c_->waiters, cx, awaited_what, [&] { return c_->would_complete_locked(*next_); },
            [&] {
                before_ = *next_;
                result_ = c_->take_locked(*next_);
            });
    }

    detail::sync::bcast<T>* c_;
    std::uint64_t* next_;  // the receiver's position, guarded by c_->lock
    std::uint64_t before_ = 0;
    broadcast_result<T> result_;
    detail::sync::state_wait wait_;
};

template <class T>
class broadcast_receiver {
public:
    broadcast_receiver() noexcept = default;
    broadcast_receiver(broadcast_receiver&& other) noexcept
        : c_(std::move(other.c_)), next_(std::exchange(other.next_, 0)) {}
    broadcast_receiver& operator=(broadcast_receiver&& other) noexcept {
        if (this != &other) {
            drop();
            c_ = std::move(other.c_);
            next_ = std::exchange(other.next_, 0);
        }
        return *this;
    }
    ~broadcast_receiver() { drop(); }

    // co_await rx.recv() -> broadcast_result<T>.
    broadcast_recv_awaitable<T> recv() {
        return broadcast_recv_awaitable<T>(&checked("aspen::broadcast_receiver::recv"), &next_);
    }

    // For code outside the runtime, as Tokio's blocking_recv: recv()
    // sleeping this thread until a value (or a lag, or the end) is there.
    // From a plain thread or a spawn_blocking function; on a runtime's
    // thread it throws std::logic_error (it would block the worker).
    broadcast_result<T> blocking_recv() {
        return detail::wait_on_this_thread("aspen::broadcast_receiver::blocking_recv", recv());
    }

    // What recv would give right now, or status empty.
    broadcast_result<T> try_recv() {
        auto& c = checked("aspen::broadcast_receiver::try_recv");
        std::lock_guard g(c.lock);
        return c.take_locked(next_);
    }

    // A new receiver of the same channel, starting at the next value sent.
    broadcast_receiver resubscribe() const { return subscribe_to(c_, "aspen::broadcast_receiver::resubscribe"); }

    // Values sent that this receiver has not read yet (lagged ones included).
    std::uint64_t pending() const {
        auto& c = checked("aspen::broadcast_receiver::pending");
        std::lock_guard g(c.lock);
        return c.tail - next_;
    }
    bool valid() const noexcept { return c_ != nullptr; }

private:
    friend class broadcast_sender<T>;
    friend std::pair<broadcast_sender<T>, broadcast_receiver<T>> broadcast_channel<T>(std::size_t);
    explicit broadcast_receiver(std::shared_ptr<detail::sync::bcast<T>> c, std::uint64_t next) noexcept
        : c_(std::move(c)), next_(next) {}

    static broadcast_receiver subscribe_to(const std::shared_ptr<detail::sync::bcast<T>>& c, const char* what) {
        if (!c) throw std::logic_error(std::string(what) + ": the handle is empty (moved-from)");
        std::lock_guard g(c->lock);
        ++c->receivers;
        return broadcast_receiver(c, c->tail);
    }
    detail::sync::bcast<T>& checked(const char* what) const {
        if (!c_) throw std::logic_error(std::string(what) + ": the receiver is empty (moved-from)");
        return *c_;
    }
    void drop() noexcept {
        if (!c_) return;
        {
            std::lock_guard g(c_->lock);
            c_->forget_locked(next_);
            --c_->receivers;
        }
        c_.reset();
    }

    std::shared_ptr<detail::sync::bcast<T>> c_;
    std::uint64_t next_ = 0;  // position of the next value to read; under c_->lock
};

template <class T>
class broadcast_sender : public detail::sync::counted_handle<detail::sync::bcast<T>, &detail::sync::bcast<T>::senders> {
public:
    broadcast_sender() noexcept = default;

    // Never waits. nullopt: sent to every current receiver; otherwise no
    // receiver exists and the value comes back.
    [[nodiscard]] std::optional<T> send(T v) {
        auto& c = this->checked("aspen::broadcast_sender::send");
        std::optional<T> overwritten;  // destroyed after the lock is released
        std::unique_lock g(c.lock);
        if (c.receivers == 0) return std::optional<T>(std::move(v));
        if (c.tail - c.head == c.ring.size()) {
            overwritten = std::move(c.at(c.head).value);
            c.at(c.head).value.reset();
            ++c.head;
        }
        auto& s = c.at(c.tail);
        s.value.emplace(std::move(v));
        s.unread = c.receivers;
        ++c.tail;
        detail::sync::wake_all_locked(c.waiters, g);
        return std::nullopt;
    }

    // A new receiver, starting at the next value sent.
    broadcast_receiver<T> subscribe() const {
        return broadcast_receiver<T>::subscribe_to(this->c_, "aspen::broadcast_sender::subscribe");
    }

    std::size_t receiver_count() const {
        auto& c = this->checked("aspen::broadcast_sender::receiver_count");
        std::lock_guard g(c.lock);
        return c.receivers;
    }

private:
    using base = detail::sync::counted_handle<detail::sync::bcast<T>, &detail::sync::bcast<T>::senders>;
    friend std::pair<broadcast_sender<T>, broadcast_receiver<T>> broadcast_channel<T>(std::size_t);
    explicit broadcast_sender(std::shared_ptr<detail::sync::bcast<T>> c) noexcept : base(std::move(c)) {}
};

template <class T>
std::pair<broadcast_sender<T>, broadcast_receiver<T>> broadcast_channel(std::size_t capacity) {
    static_assert(std::is_copy_constructible_v<T>, "aspen::broadcast_channel: T must be copy-constructible");
    if (capacity == 0) throw std::invalid_argument("aspen::broadcast_channel: capacity must be at least 1");
    auto c = std::make_shared<detail::sync::bcast<T>>(capacity);
    return {broadcast_sender<T>(c), broadcast_receiver<T>(c, 0)};
}

}  // namespace aspen
