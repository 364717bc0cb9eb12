// aspen::mpsc_channel<T>(capacity) and aspen::unbounded_channel<T>():
// multi-producer, single-consumer FIFO channels.
//
//   auto [tx, rx] = aspen::mpsc_channel<int>(16);
//   auto tx2 = tx;                                     // senders are copyable
//   std::optional<int> back = co_await tx.send(1);     // waits while full
//   if (back) { /* the receiver is gone: the value came back, unsent */ }
//   std::optional<int> rest = tx.try_send(2);          // never waits
//   std::optional<aspen::mpsc_permit<int>> room = co_await tx.reserve();
//   if (room) (void)room->send(3);                     // a reserved room: never waits
//   while (std::optional<int> v = co_await rx.recv()) { ... }
//   std::vector<int> batch;
//   std::size_t n = co_await rx.recv_many(batch, 64);  // one message or more
//   // nullopt: every sender is gone (or rx.close() was called) and the
//   // buffer is drained: end of stream.
//
//   // From a plain thread or a spawn_blocking function (never in a task):
//   std::optional<int> back3 = tx.blocking_send(4);    // sleeps while full
//   std::optional<int> got = rx.blocking_recv();       // sleeps while empty
//
//   auto [utx, urx] = aspen::unbounded_channel<int>();
//   std::optional<int> back2 = utx.send(3);            // never waits; not an await
//
// Order: messages from one sender arrive in the order it sent them. Senders
// that wait for room are served FIFO (in the order they started waiting), and
// a sender does not overtake senders already waiting (try_send fails while
// anyone waits). The number of live senders is tracked: copying adds one,
// destroying (or moving from and then assigning) removes one.
//
// Closing: rx.close() or destroying the receiver closes the channel: every
// send, waiting or new, then returns its value back. close() keeps the
// buffered messages receivable; destroying the receiver destroys them.
// tx.is_closed() tells whether the channel is closed, and
// `co_await tx.closed()` (either sender kind) waits until it is, as Tokio's
// Sender::closed: a producer stops when nobody reads any more. Any number
// of senders may wait so; the wait is cancel-safe (an aborted one leaves
// the list) and keeps the channel's state alive.
//
// Cancel safety (as Tokio documents for its mpsc):
// * `co_await tx.send(v)` is cancel-safe in the sense that a send is never
//   half done: the value is moved into the channel only inside the poll that
//   completes the await. If the sending task is aborted while it waits (or
//   the awaitable is destroyed unawaited), the value was NOT sent; it is
//   destroyed with the awaitable, and the place in the queue is given up.
//   A room that was reserved for it (granted while it waited but before it
//   resumed) is passed on to the next waiting sender. Use try_send, or await
//   send in a task that is not aborted, to keep the value in every case.
// * `co_await rx.recv()` is cancel-safe: if the receiving task is aborted,
//   no message is lost. A message is taken from the buffer only by the poll
//   that completes the await (and the coroutine resumes with it right away);
//   should the awaitable be destroyed holding one that was not handed out,
//   the message goes back to the front of the buffer.
//
// Note: end of stream waits for every sender copy. A sender held as a
// parameter of a spawned task goes when that task finishes (aspen destroys a
// finished task's frame at once, whether or not its join_handle is still
// held); one held as a parameter of a task awaited inline goes when that
// task's frame does, as for any coroutine.
//
// The receiver's batch: a receive that takes the channel's lock moves up to
// capacity / 16 messages (at most 64; none below a capacity of 32) out of
// the shared buffer into the receiver's own queue, and the next receives
// hand them out without the lock. Between two CPUs every lock is a cache
// line hand-off, so this halves them when the buffer holds many messages
// (4 producers on 2 workers: one lock per send and about one per 64
// receives instead of one per receive). Those messages keep their rooms
// until the receiver hands out the last of them (one lock: the rooms go
// back, waiting senders are granted, the next batch is taken), so a sender
// may wait while fewer than `capacity` messages are unreceived, never
// longer than it takes the receiver to hand out one batch; the capacity
// itself still bounds what is in the channel.
//
// Rules: a send/recv awaitable must not outlive the sender/receiver it came
// from; one recv at a time per receiver, and its recv and try_recv not on
// two threads at once (the receiver's batch has no lock). Senders, the
// receiver and the values may live on any thread. T must be
// move-constructible. capacity must be >= 1 (std::invalid_argument
// otherwise).
#pragma once

#include <aspen/detail/spin_mutex.hpp>
#include <aspen/detail/thread_parker.hpp>
#include <aspen/poll.hpp>
#include <aspen/sync/waiter_list.hpp>
#include <aspen/task.hpp>
#include <aspen/waker.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace aspen {

namespace detail::sync {

// A sender waiting in closed().
struct closed_node : waiter_node {
    aspen::waker waker;
};

struct send_node : waiter_node {
    aspen::waker waker;
    bool granted = false;  // a room was reserved for this sender
};

template <class T>
struct chan {
    explicit chan(std::size_t cap) : capacity(cap), batch(batch_for(cap)) {}

    // See "The receiver's batch" above.
    static constexpr std::size_t batch_for(std::size_t cap) noexcept {
        return std::clamp<std::size_t>(cap / 16, 1, 64);
    }

    aspen::detail::spin_mutex lock;
    std::deque<T> buffer;
    const std::size_t capacity;  // max() for unbounded
    const std::size_t batch;     // most messages a receive takes per lock
    std::size_t reserved = 0;    // rooms granted to waiting senders that have not pushed yet
    std::size_t held = 0;        // rooms of the receiver's batch (taken, not given back)
    std::size_t senders = 1;
    bool closed = false;  // receiver closed or gone: sends give the value back
    aspen::waker receiver_waker;
    waiter_list send_waiters;
    waiter_list closed_waiters;  // senders in closed()
    // Receiver-only (one receive at a time): the batch, ahead of `buffer`
    // in the stream. held >= taken.size(); both drop to 0 together.
    std::deque<T> taken;
    // taken.size() for size(), which may run on any thread. Written by the
    // receiver only, so relaxed loads and stores (no RMW); size() is a
    // snapshot anyway.
    std::atomic<std::size_t> taken_count{0};

    bool has_room_locked() const noexcept { return buffer.size() + held + reserved < capacity; }

    // A room may have freed up: reserve it for the first waiting sender.
    void grant_locked(aspen::waker& wake) noexcept {
        if (closed || !has_room_locked()) return;
        if (auto* n = static_cast<send_node*>(send_waiters.pop_front())) {
            n->granted = true;
            ++reserved;
            wake = std::move(n->waker);
        }
    }

    // A waiting send or reserve goes away: a room granted to it (never
    // used) passes to the next waiting sender, else it leaves the line.
    void abandon_wait_locked(send_node& n, aspen::waker& wake) noexcept {
        if (n.granted) {
            --reserved;
            grant_locked(wake);
        } else if (n.linked()) {
            n.unlink();
        }
    }
    // A waiting send or reserve that was not granted a room finds the
    // channel closed (close() already took it out of the line).
    bool closed_for_locked(send_node& n) noexcept {
        if (!closed) return false;
        if (n.linked()) n.unlink();
        return true;
    }

    // Keeps `w` to be woken after the unlock; a full `wake` is woken now,
    // with the lock let go meanwhile.
    static void defer_wake(std::unique_lock<aspen::detail::spin_mutex>& g, waker_batch& wake,
                           aspen::waker&& w) noexcept {
        wake.push(std::move(w));
        if (wake.full()) {
            g.unlock();
            wake.wake_all();
            g.lock();
        }
    }

    // Several rooms may have freed up: grant each to a waiting sender, in
    // order.
    void grant_all_locked(std::unique_lock<aspen::detail::spin_mutex>& g, waker_batch& wake) noexcept {
        for (;;) {
            aspen::waker w;
            grant_locked(w);
            if (!w) return;
            defer_wake(g, wake, std::move(w));
        }
    }

    // Receiver, under the lock, buffer not empty: the first message goes to
    // `out` (its room is free at once, as without a batch: a waiting sender
    // granted it lands in `wake`, to be woken after the unlock), up to
    // batch - 1 more into `taken` with their rooms held.
    void take_batch_locked(std::optional<T>& out, aspen::waker& wake) {
        out.emplace(std::move(buffer.front()));
        buffer.pop_front();
        move_to_taken_locked(batch - 1);
        grant_locked(wake);
    }

    // Receiver: the next message of the batch, if any, into `out`, without
    // the lock unless it was the last one.
    bool pop_taken(std::optional<T>& out) {
        if (taken.empty()) return false;
        out.emplace(std::move(taken.front()));
        taken.pop_front();
        if (taken.empty())
            give_back_batch();
        else
            set_taken_count();
        return true;
    }

    // The batch's last message was handed out: its rooms go back, the next
    // batch is taken, and the senders granted a room are woken (after the
    // unlock: `g` goes before `wake`).
    void give_back_batch() noexcept {
        waker_batch wake;
        std::unique_lock g(lock);
        held = 0;
        move_to_taken_locked(batch);
        grant_all_locked(g, wake);
    }

    // Undoes a hand-out that the receiving awaitable never delivered: the
    // message goes back to the front of the stream.
    void put_back(T&& v) {
        std::lock_guard g(lock);
        if (taken.empty()) {
            buffer.push_front(std::move(v));
        } else {
            taken.push_front(std::move(v));
            ++held;
            set_taken_count();
        }
    }

    // The batch is only a shortcut: if growing `taken` fails (bad_alloc, a
    // throwing move), the rest stays in `buffer`, where the next receive
    // finds it, and a message already handed out is not lost.
    void move_to_taken_locked(std::size_t n) noexcept {
        try {
            for (; n != 0 && !buffer.empty(); --n) {
                taken.push_back(std::move(buffer.front()));
                buffer.pop_front();
                ++held;
            }
        } catch (...) {
        }
        set_taken_count();
    }

    void drop_receiver_waker() noexcept {
        aspen::waker stale;  // dropped after the unlock
        std::lock_guard g(lock);
        stale = std::move(receiver_waker);
    }

    void set_taken_count() noexcept { taken_count.store(taken.size(), std::memory_order_relaxed); }

    // Pushes a message; the receiver's waker goes to `wake`.
    void push_locked(T&& v, aspen::waker& wake) {
        buffer.push_back(std::move(v));
        wake = std::move(receiver_waker);
    }

    // rx.close() / receiver drop: senders waiting now all get their value back.
    void close(bool drop_buffer) noexcept {
        std::deque<T> dropped, dropped_taken;  // destroyed after the lock is released
        waker_batch wake;
        std::unique_lock g(lock);
        closed = true;
        if (drop_buffer) {
            dropped.swap(buffer);
            dropped_taken.swap(taken);  // close(true) is the receiver's own drop
            held = 0;
            set_taken_count();
        }
        while (auto* n = static_cast<send_node*>(send_waiters.pop_front())) defer_wake(g, wake, std::move(n->waker));
        while (auto* n = static_cast<closed_node*>(closed_waiters.pop_front())) defer_wake(g, wake, std::move(n->waker));
    }

    void add_sender() {
        std::lock_guard g(lock);
        ++senders;
    }
    void drop_sender() noexcept {
        aspen::waker w;
        {
            std::lock_guard g(lock);
            if (--senders == 0) w = std::move(receiver_waker);  // end of stream
        }
        w.wake();
    }
    bool is_closed() {
        std::lock_guard g(lock);
        return closed;
    }
};

// What closed() returns: completes once the channel is closed (receiver
// closed or gone). Holds the channel, so the sender may go meanwhile.
template <class T>
class [[nodiscard]] closed_awaitable : public leaf_awaitable<closed_awaitable<T>> {
public:
    static constexpr const char* awaited_what = "aspen::mpsc_sender::closed";

    explicit closed_awaitable(std::shared_ptr<chan<T>> c) noexcept : c_(std::move(c)) {}
    closed_awaitable(closed_awaitable&&) noexcept = default;  // until first awaited (see leaf_awaitable)
    ~closed_awaitable() {
        if (!waiting_) return;
        aspen::waker stale;  // dropped after the lock is released
        std::lock_guard g(c_->lock);
        if (node_.linked()) node_.unlink();  // else close() took it out
        stale = std::move(node_.waker);
    }
    void await_resume() { this->rethrow_if_error(); }

private:
    friend class leaf_awaitable<closed_awaitable>;
    bool poll(aspen::context& cx) {
        std::lock_guard g(c_->lock);
        if (c_->closed) return true;
        if (!waiting_) {
            node_.waker = cx.waker();
            c_->closed_waiters.push_back(&node_);
            waiting_ = true;
        } else {
            store_waker(node_.waker, cx);
        }
        return false;
    }

    std::shared_ptr<chan<T>> c_;
    closed_node node_;
    bool waiting_ = false;  // node_ was queued (owner-only; the list itself is under the lock)
};

// Shared by the bounded and the unbounded sender: the count of live senders.
template <class T>
class sender_base {
public:
    sender_base() noexcept = default;
    sender_base(const sender_base& other) : c_(other.c_) {
        if (c_) c_->add_sender();
    }
    sender_base(sender_base&& other) noexcept : c_(std::move(other.c_)) {}
    sender_base& operator=(const sender_base& other) {
        if (this != &other) {
            sender_base copy(other);
            *this = std::move(copy);
        }
        return *this;
    }
    sender_base& operator=(sender_base&& other) noexcept {
        if (this != &other) {
            drop();
            c_ = std::move(other.c_);
        }
        return *this;
    }
    ~sender_base() { drop(); }

    // True when the receiver closed the channel or is gone.
    bool is_closed() const { return !c_ || c_->is_closed(); }
    // co_await tx.closed(): completes once that is true.
    closed_awaitable<T> closed() const {
        checked("aspen::mpsc_sender::closed");
        return closed_awaitable<T>(c_);
    }
    bool valid() const noexcept { return c_ != nullptr; }

protected:
    explicit sender_base(std::shared_ptr<chan<T>> c) noexcept : c_(std::move(c)) {}
    chan<T>& checked(const char* what) const {
        if (!c_) throw std::logic_error(std::string(what) + ": the sender is empty (moved-from)");
        return *c_;
    }
    std::shared_ptr<chan<T>> c_;

private:
    void drop() noexcept {
        if (c_) {
            c_->drop_sender();
            c_.reset();
        }
    }
};

}  // namespace detail::sync

template <class T>
class mpsc_sender;
template <class T>
class unbounded_sender;
template <class T>
class mpsc_receiver;
template <class T>
using unbounded_receiver = mpsc_receiver<T>;
template <class T>
std::pair<mpsc_sender<T>, mpsc_receiver<T>> mpsc_channel(std::size_t capacity);
template <class T>
std::pair<unbounded_sender<T>, mpsc_receiver<T>> unbounded_channel();

// What mpsc_sender::send(v) returns; `co_await` it for std::optional<T>:
// nullopt when sent, the value back when the channel is closed.
template <class T>
class [[nodiscard]] mpsc_send_awaitable : public detail::sync::leaf_awaitable<mpsc_send_awaitable<T>> {
public:
    static constexpr const char* awaited_what = "aspen::mpsc_sender::send";

    mpsc_send_awaitable(detail::sync::chan<T>* c, T v) : c_(c), value_(std::move(v)) {}
    mpsc_send_awaitable(mpsc_send_awaitable&&) = default;  // until first awaited (see leaf_awaitable); moves the value
    ~mpsc_send_awaitable() {
        if (phase_ != phase::waiting) return;
        aspen::waker w;
        {
            std::lock_guard g(c_->lock);
            c_->abandon_wait_locked(node_, w);
        }
        w.wake();
        // value_ (unsent) is destroyed after this, outside the lock.
    }
    std::optional<T> await_resume() {
        this->rethrow_if_error();
        phase_ = phase::done;
        return std::move(value_);
    }

private:
    friend class detail::sync::leaf_awaitable<mpsc_send_awaitable>;
    enum class phase : unsigned char { init, waiting, ready, done };  // owner-only

    bool poll(aspen::context& cx) {
        aspen::waker w;
        {
            std::lock_guard g(c_->lock);
            switch (phase_) {
                case phase::init:
                    if (c_->closed) {
                        phase_ = phase::ready;  // value_ comes back
                        return true;
                    }
                    if (c_->send_waiters.empty() && c_->has_room_locked()) {
                        c_->push_locked(std::move(*value_), w);
                        value_.reset();
                        phase_ = phase::ready;
                        break;
                    }
                    node_.waker = cx.waker();
                    c_->send_waiters.push_back(&node_);
                    phase_ = phase::waiting;
                    return false;
                case phase::waiting:
                    if (node_.granted) {
                        if (!c_->closed) {
                            c_->push_locked(std::move(*value_), w);
                            value_.reset();
                        }
                        node_.granted = false;
                        --c_->reserved;
                        phase_ = phase::ready;
                        break;
                    }
                    if (c_->closed_for_locked(node_)) {
                        phase_ = phase::ready;
                        return true;
                    }
                    detail::sync::store_waker(node_.waker, cx);
                    return false;
                case phase::ready:
                case phase::done:
                    throw std::logic_error("aspen::mpsc_sender::send: the awaitable was already awaited");
            }
        }
        w.wake();
        return true;
    }

    detail::sync::chan<T>* c_;
    std::optional<T> value_;
    detail::sync::send_node node_;
    phase phase_ = phase::init;
};

// One room of a bounded channel, reserved (Tokio's Permit): send(v) puts v
// in it without waiting; dropped unused, the room goes to the next waiting
// sender. Holds the channel, so the sender may go meanwhile. Move-only.
template <class T>
class [[nodiscard]] mpsc_permit {
public:
    mpsc_permit() noexcept = default;
    mpsc_permit(mpsc_permit&& other) noexcept : c_(std::move(other.c_)) {}
    mpsc_permit& operator=(mpsc_permit&& other) noexcept {
        if (this != &other) {
            release();
            c_ = std::move(other.c_);
        }
        return *this;
    }
    ~mpsc_permit() { release(); }

    // Sends v in the reserved room; nullopt when sent, v back when the
    // channel closed since the room was reserved. Uses the permit up.
    std::optional<T> send(T v) {
        if (!c_) throw std::logic_error("aspen::mpsc_permit::send: the permit is empty (used or moved from)");
        std::shared_ptr<detail::sync::chan<T>> c = std::move(c_);
        aspen::waker w;
        {
            std::lock_guard g(c->lock);
            --c->reserved;  // ours: there is room for v now
            if (c->closed) return std::optional<T>(std::move(v));
            c->push_locked(std::move(v), w);
        }
        w.wake();
        return std::nullopt;
    }
    bool valid() const noexcept { return c_ != nullptr; }

private:
    template <class>
    friend class mpsc_reserve_awaitable;
    template <class>
    friend class mpsc_sender;
    explicit mpsc_permit(std::shared_ptr<detail::sync::chan<T>> c) noexcept : c_(std::move(c)) {}

    // Unused: the room goes to the first waiting sender.
    void release() noexcept {
        if (!c_) return;
        std::shared_ptr<detail::sync::chan<T>> c = std::move(c_);
        aspen::waker w;
        {
            std::lock_guard g(c->lock);
            --c->reserved;
            c->grant_locked(w);
        }
        w.wake();
    }

    std::shared_ptr<detail::sync::chan<T>> c_;
};

// What mpsc_sender::reserve() returns; `co_await` it for
// std::optional<mpsc_permit<T>>: a permit once a room is free (in line with
// the waiting sends), nullopt when the channel is closed.
template <class T>
class [[nodiscard]] mpsc_reserve_awaitable : public detail::sync::leaf_awaitable<mpsc_reserve_awaitable<T>> {
public:
    static constexpr const char* awaited_what = "aspen::mpsc_sender::reserve";

    explicit mpsc_reserve_awaitable(std::shared_ptr<detail::sync::chan<T>> c) noexcept : c_(std::move(c)) {}
    mpsc_reserve_awaitable(mpsc_reserve_awaitable&&) noexcept = default;  // until first awaited (see leaf_awaitable)
    ~mpsc_reserve_awaitable() {
        if (phase_ == phase::ready && got_) {
            mpsc_permit<T> unused(std::move(c_));  // reserved, never handed out: passed on
            return;
        }
        if (phase_ != phase::waiting) return;
        aspen::waker w;
        {
            std::lock_guard g(c_->lock);
            c_->abandon_wait_locked(node_, w);
        }
        w.wake();
    }
    std::optional<mpsc_permit<T>> await_resume() {
        this->rethrow_if_error();
        phase_ = phase::done;
        if (!got_) return std::nullopt;
        return mpsc_permit<T>(std::move(c_));
    }

private:
    friend class detail::sync::leaf_awaitable<mpsc_reserve_awaitable>;
    enum class phase : unsigned char { init, waiting, ready, done };  // owner-only

    bool poll(aspen::context& cx) {
        std::lock_guard g(c_->lock);
        switch (phase_) {
            case phase::init:
                if (!c_->closed && c_->send_waiters.empty() && c_->has_room_locked()) {
                    ++c_->reserved;
                    got_ = true;
                }
                if (got_ || c_->closed) {
                    phase_ = phase::ready;
                    return true;
                }
                node_.waker = cx.waker();
                c_->send_waiters.push_back(&node_);
                phase_ = phase::waiting;
                return false;
            case phase::waiting:
                if (node_.granted) {  // the room stays reserved, now the permit's
                    node_.granted = false;
                    got_ = true;
                    phase_ = phase::ready;
                    return true;
                }
                if (c_->closed_for_locked(node_)) {
                    phase_ = phase::ready;
                    return true;
                }
                detail::sync::store_waker(node_.waker, cx);
                return false;
            case phase::ready:
            case phase::done:
                break;
        }
        throw std::logic_error("aspen::mpsc_sender::reserve: the awaitable was already awaited");
    }

    std::shared_ptr<detail::sync::chan<T>> c_;
    detail::sync::send_node node_;
    phase phase_ = phase::init;
    bool got_ = false;  // a room is reserved for us (owner-only)
};

template <class T>
class mpsc_sender : public detail::sync::sender_base<T> {
public:
    mpsc_sender() noexcept = default;

    // co_await tx.reserve() -> std::optional<mpsc_permit<T>>: waits, in line
    // with the waiting sends, for a room and keeps it for a later
    // permit.send(v), which never waits (Tokio's Sender::reserve: decide
    // what to send once there is room, or hold the room across a select);
    // nullopt on a closed channel. Cancel-safe: an aborted reserve takes
    // no room.
    mpsc_reserve_awaitable<T> reserve() {
        this->checked("aspen::mpsc_sender::reserve");
        return mpsc_reserve_awaitable<T>(this->c_);
    }
    // A room now, if one is free and nobody is waiting; else nullopt
    // (is_closed() tells full from closed).
    std::optional<mpsc_permit<T>> try_reserve() {
        auto& c = this->checked("aspen::mpsc_sender::try_reserve");
        std::lock_guard g(c.lock);
        if (c.closed || !c.send_waiters.empty() || !c.has_room_locked()) return std::nullopt;
        ++c.reserved;
        return mpsc_permit<T>(this->c_);
    }

    // co_await tx.send(v) -> std::optional<T> (nullopt: sent).
    mpsc_send_awaitable<T> send(T v) {
        return mpsc_send_awaitable<T>(&this->checked("aspen::mpsc_sender::send"), std::move(v));
    }

    // For code outside the runtime, as Tokio's blocking_send: sends as
    // `co_await send(v)` does, sleeping this thread while the channel is
    // full. nullopt: sent; on a closed channel the value comes back. From a
    // plain thread or a spawn_blocking function; on a runtime's thread it
    // throws std::logic_error (it would block the worker).
    [[nodiscard]] std::optional<T> blocking_send(T v) {
        return detail::wait_on_this_thread("aspen::mpsc_sender::blocking_send", send(std::move(v)));
    }

    // Sends if there is room now and no sender is waiting; otherwise gives
    // the value back (is_closed() tells full from closed).
    [[nodiscard]] std::optional<T> try_send(T v) {
        auto& c = this->checked("aspen::mpsc_sender::try_send");
        aspen::waker w;
        {
            std::lock_guard g(c.lock);
            if (c.closed || !c.send_waiters.empty() || !c.has_room_locked()) return std::optional<T>(std::move(v));
            c.push_locked(std::move(v), w);
        }
        w.wake();
        return std::nullopt;
    }

    std::size_t capacity() const { return this->checked("aspen::mpsc_sender::capacity").capacity; }

private:
    friend std::pair<mpsc_sender<T>, mpsc_receiver<T>> mpsc_channel<T>(std::size_t);
    explicit mpsc_sender(std::shared_ptr<detail::sync::chan<T>> c) noexcept
        : detail::sync::sender_base<T>(std::move(c)) {}
};

template <class T>
class unbounded_sender : public detail::sync::sender_base<T> {
public:
    unbounded_sender() noexcept = default;

    // Never waits. nullopt: sent; otherwise the channel is closed and the
    // value comes back.
    [[nodiscard]] std::optional<T> send(T v) {
        auto& c = this->checked("aspen::unbounded_sender::send");
        aspen::waker w;
        {
            std::lock_guard g(c.lock);
            if (c.closed) return std::optional<T>(std::move(v));
            c.push_locked(std::move(v), w);
        }
        w.wake();
        return std::nullopt;
    }

private:
    friend std::pair<unbounded_sender<T>, mpsc_receiver<T>> unbounded_channel<T>();
    explicit unbounded_sender(std::shared_ptr<detail::sync::chan<T>> c) noexcept
        : detail::sync::sender_base<T>(std::move(c)) {}
};

// What mpsc_receiver::recv() returns; `co_await` it for std::optional<T>:
// the next message, or nullopt at the end of the stream.
template <class T>
class [[nodiscard]] mpsc_recv_awaitable : public detail::sync::leaf_awaitable<mpsc_recv_awaitable<T>> {
public:
    static constexpr const char* awaited_what = "aspen::mpsc_receiver::recv";

    explicit mpsc_recv_awaitable(detail::sync::chan<T>* c) noexcept : c_(c) {}
    mpsc_recv_awaitable(mpsc_recv_awaitable&&) noexcept = default;  // until first awaited (see leaf_awaitable)
    ~mpsc_recv_awaitable() {
        if (phase_ == phase::waiting) {
            c_->drop_receiver_waker();  // ours
        } else if (phase_ == phase::ready && result_) {
            // Taken but never handed out: put it back where it was.
            c_->put_back(std::move(*result_));
        }
    }
    std::optional<T> await_resume() {
        this->rethrow_if_error();
        phase_ = phase::done;
        return std::move(result_);
    }

private:
    friend class detail::sync::leaf_awaitable<mpsc_recv_awaitable>;
    enum class phase : unsigned char { init, waiting, ready, done };  // owner-only

    bool poll(aspen::context& cx) {
        if (phase_ == phase::ready || phase_ == phase::done)
            throw std::logic_error("aspen::mpsc_receiver::recv: the awaitable was already awaited");
        if (c_->pop_taken(result_)) {
            // A try_recv took a batch while this receive waited: its waker
            // is not wanted any more.
            if (phase_ == phase::waiting) c_->drop_receiver_waker();
            phase_ = phase::ready;
            return true;
        }
        aspen::waker stale, w;
        {
            std::lock_guard g(c_->lock);
            if (!c_->buffer.empty()) {
                c_->take_batch_locked(result_, w);
                if (phase_ == phase::waiting) stale = std::move(c_->receiver_waker);
                phase_ = phase::ready;
            } else if (c_->senders == 0 || c_->closed) {
                if (phase_ == phase::waiting) stale = std::move(c_->receiver_waker);
                phase_ = phase::ready;  // end of stream: result_ stays empty
            } else {
                detail::sync::store_waker(c_->receiver_waker, cx);
                phase_ = phase::waiting;
                return false;
            }
        }
        w.wake();
        return true;
    }

    detail::sync::chan<T>* c_;
    std::optional<T> result_;
    phase phase_ = phase::init;
};

template <class T>
class mpsc_receiver {
public:
    mpsc_receiver() noexcept = default;
    mpsc_receiver(mpsc_receiver&&) noexcept = default;
    mpsc_receiver& operator=(mpsc_receiver&& other) noexcept {
        if (this != &other) {
            drop();
            c_ = std::move(other.c_);
        }
        return *this;
    }
    ~mpsc_receiver() { drop(); }

    // co_await rx.recv() -> std::optional<T>; nullopt = end of stream.
    mpsc_recv_awaitable<T> recv() { return mpsc_recv_awaitable<T>(&checked("aspen::mpsc_receiver::recv")); }

    // Waits for a message as recv() does, then takes those already buffered
    // behind it, up to `limit` in all, appending them to out (as Tokio's
    // recv_many): one wake for a burst. Returns how many; 0 only at end of
    // stream, or for limit 0 (at once). Cancel-safe as recv(): aborted while
    // it waits, it has taken nothing.
    task<std::size_t> recv_many(std::vector<T>& out, std::size_t limit) {
        if (limit == 0) co_return 0;
        std::optional<T> first = co_await recv();
        if (!first) co_return 0;
        co_return append_buffered(out, std::move(*first), limit);
    }

    // For code outside the runtime, as Tokio's blocking_recv and
    // blocking_recv_many: recv() and recv_many() sleeping this thread while
    // the channel is empty. From a plain thread or a spawn_blocking
    // function; on a runtime's thread they throw std::logic_error.
    std::optional<T> blocking_recv() {
        return detail::wait_on_this_thread("aspen::mpsc_receiver::blocking_recv", recv());
    }
    std::size_t blocking_recv_many(std::vector<T>& out, std::size_t limit) {
        if (limit == 0) return 0;
        std::optional<T> first =
            detail::wait_on_this_thread("aspen::mpsc_receiver::blocking_recv_many", recv());
        return first ? append_buffered(out, std::move(*first), limit) : 0;
    }

    // The next message if one is buffered now.
    std::optional<T> try_recv() {
        auto& c = checked("aspen::mpsc_receiver::try_recv");
        std::optional<T> v;
        if (c.pop_taken(v)) return v;
        aspen::waker w;
        {
            std::lock_guard g(c.lock);
            if (c.buffer.empty()) return v;
            c.take_batch_locked(v, w);
        }
        w.wake();
        return v;
    }

    // Closes the channel for sending; buffered messages stay receivable and
    // recv() ends the stream once they are drained.
    void close() { checked("aspen::mpsc_receiver::close").close(false); }

    // Snapshots, for diagnostics and tests.
    std::size_t size() const {
        auto& c = checked("aspen::mpsc_receiver::size");
        std::lock_guard g(c.lock);
        // relaxed: see taken_count.
        return c.buffer.size() + c.taken_count.load(std::memory_order_relaxed);
    }
    std::size_t sender_count() const {
        auto& c = checked("aspen::mpsc_receiver::sender_count");
        std::lock_guard g(c.lock);
        return c.senders;
    }
    std::size_t waiting_senders() const {
        auto& c = checked("aspen::mpsc_receiver::waiting_senders");
        std::lock_guard g(c.lock);
        return c.send_waiters.size();
    }
    // As Tokio's Receiver::is_empty: no message is waiting to be received.
    bool is_empty() const { return size() == 0; }
    // As Tokio's Receiver::is_closed: nothing can be sent any more (close()
    // was called or every sender is gone); messages may still be waiting.
    bool is_closed() const {
        auto& c = checked("aspen::mpsc_receiver::is_closed");
        std::lock_guard g(c.lock);
        return c.closed || c.senders == 0;
    }
    bool valid() const noexcept { return c_ != nullptr; }

private:
    friend std::pair<mpsc_sender<T>, mpsc_receiver<T>> mpsc_channel<T>(std::size_t);
    friend std::pair<unbounded_sender<T>, mpsc_receiver<T>> unbounded_channel<T>();
    explicit mpsc_receiver(std::shared_ptr<detail::sync::chan<T>> c) noexcept : c_(std::move(c)) {}

    detail::sync::chan<T>& checked(const char* what) const {
        if (!c_) throw std::logic_error(std::string(what) + ": the receiver is empty (moved-from)");
        return *c_;
    }
    // recv_many's rest: `first`, then what is buffered behind it, up to
    // `limit` in all. Returns how many.
    std::size_t append_buffered(std::vector<T>& out, T first, std::size_t limit) {
        out.push_back(std::move(first));
        std::size_t n = 1;
        while (n < limit) {
            std::optional<T> more = try_recv();
            if (!more) break;
            out.push_back(std::move(*more));
            ++n;
        }
        return n;
    }
    void drop() noexcept {
        if (c_) {
            c_->close(true);
            c_.reset();
        }
    }

    std::shared_ptr<detail::sync::chan<T>> c_;
};

template <class T>
std::pair<mpsc_sender<T>, mpsc_receiver<T>> mpsc_channel(std::size_t capacity) {
    if (capacity == 0) throw std::invalid_argument("aspen::mpsc_channel: capacity must be at least 1");
    auto c = std::make_shared<detail::sync::chan<T>>(capacity);
    return {mpsc_sender<T>(c), mpsc_receiver<T>(c)};
}

template <class T>
std::pair<unbounded_sender<T>, mpsc_receiver<T>> unbounded_channel() {
    auto c = std::make_shared<detail::sync::chan<T>>(std::numeric_limits<std::size_t>::max());
    return {unbounded_sender<T>(c), mpsc_receiver<T>(c)};
}

}  // namespace aspen
