// aspen::oneshot_channel<T>: send one value from one place to one task.
//
//   auto [tx, rx] = aspen::oneshot_channel<int>();
//   // producer (any thread, inside a task or not):
//   if (std::optional<int> back = tx.send(42)) { /* receiver gone: value returned */ }
//   // consumer task:
//   std::optional<int> v = co_await rx;   // nullopt: sender dropped without sending
//
// * send(v) delivers v and wakes the receiver; it returns nullopt on success
//   and gives v back when the receiver was already destroyed, so a value is
//   never silently dropped. send consumes the sender: it can be called once
//   (again, or on a moved-from sender, throws std::logic_error).
// * Destroying the sender without sending completes the receiver with
//   nullopt. tx.is_closed() tells whether the receiver is gone, and
//   `co_await tx.closed()` waits until it is (Tokio's Sender::closed: a
//   producer stops working on a reply nobody will read, e.g. in a select
//   beside the work). One closed() wait at a time per sender; it is
//   cancel-safe and keeps the channel's state alive while it waits.
// * co_await rx yields the value once; awaiting a receiver that already
//   delivered (or a moved-from one) throws std::logic_error.
// * A value sent but never received is destroyed with the channel (when both
//   ends are gone): the receiver chose not to take it.
//
// Cancel safety: `co_await rx` is cancel-safe. The value is moved out of
// the channel only in await_resume, in the resumed task; if the awaiting task
// is aborted (or the awaitable is destroyed unresumed), the awaitable's
// destructor removes its waker and the value stays in the channel, owned by
// the receiver: awaiting the receiver again still gets it. If the receiver
// itself is destroyed (e.g. it lived in the aborted task's frame) before the
// send, send() gives the value back. send() is not an await; it never blocks.
//
// Both ends may be moved and destroyed on any thread; the shared state is
// reference-counted. T must be move-constructible.
#pragma once

#include <aspen/detail/spin_mutex.hpp>
#include <aspen/detail/thread_parker.hpp>
#include <aspen/poll.hpp>
#include <aspen/sync/waiter_list.hpp>
#include <aspen/waker.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

namespace aspen {

template <class T>
class oneshot_sender;
template <class T>
class oneshot_receiver;
template <class T>
std::pair<oneshot_sender<T>, oneshot_receiver<T>> oneshot_channel();

namespace detail::sync {
// Moves `from`'s value into the empty `to` (no assignment: T need only be
// move-constructible).
template <class T>
void take_optional(std::optional<T>& to, std::optional<T>& from) {
    if (from) {
        to.emplace(std::move(*from));
        from.reset();
    }
}

template <class T>
struct oneshot_state {
    aspen::detail::spin_mutex lock;
    std::optional<T> value;
    bool sender_alive = true;    // neither sent nor dropped yet
    bool receiver_alive = true;
    aspen::waker receiver_waker;
    aspen::waker sender_waker;  // a closed() wait, woken when the receiver goes
};
}  // namespace detail::sync

template <class T>
class oneshot_sender {
public:
    oneshot_sender() noexcept = default;
    oneshot_sender(oneshot_sender&&) noexcept = default;
    oneshot_sender& operator=(oneshot_sender&& other) noexcept {
        if (this != &other) {
            drop();
            state_ = std::move(other.state_);
        }
        return *this;
    }
    ~oneshot_sender() { drop(); }

    // nullopt: delivered. Otherwise the receiver is gone and v comes back.
    [[nodiscard]] std::optional<T> send(T v) {
        if (!state_) throw std::logic_error("aspen::oneshot_sender::send: the sender was already used or moved from");
        std::shared_ptr<detail::sync::oneshot_state<T>> st = std::move(state_);
        aspen::waker w;
        {
            std::lock_guard g(st->lock);
            st->sender_alive = false;
            if (!st->receiver_alive) return std::optional<T>(std::move(v));
            st->value.emplace(std::move(v));
            w = std::move(st->receiver_waker);
        }
        w.wake();
        return std::nullopt;
    }

    // True when the receiver is gone (a send would give the value back).
    bool is_closed() const {
        if (!state_) return true;
        std::lock_guard g(state_->lock);
        return !state_->receiver_alive;
    }
    bool valid() const noexcept { return state_ != nullptr; }

    // co_await tx.closed(): completes once the receiver is gone.
    class [[nodiscard]] closed_awaitable : public detail::sync::leaf_awaitable<closed_awaitable> {
    public:
        static constexpr const char* awaited_what = "aspen::oneshot_sender::closed";

        explicit closed_awaitable(std::shared_ptr<detail::sync::oneshot_state<T>> st) noexcept : st_(std::move(st)) {}
        closed_awaitable(closed_awaitable&&) noexcept = default;  // until first awaited (see leaf_awaitable)
        ~closed_awaitable() {
            if (!waiting_) return;
            aspen::waker stale;  // dropped after the lock is released
            std::lock_guard g(st_->lock);
            stale = std::move(st_->sender_waker);
        }
        void await_resume() {
            this->rethrow_if_error();
            waiting_ = false;
        }

    private:
        friend class detail::sync::leaf_awaitable<closed_awaitable>;
        bool poll(aspen::context& cx) {
            if (!st_) throw std::logic_error("aspen::oneshot_sender::closed: the sender was already used or moved from");
            std::lock_guard g(st_->lock);
            if (!st_->receiver_alive) return true;
            detail::sync::store_waker(st_->sender_waker, cx);
            waiting_ = true;
            return false;
        }

        std::shared_ptr<detail::sync::oneshot_state<T>> st_;
        bool waiting_ = false;  // a waker of ours may be stored (owner-only)
    };
    closed_awaitable closed() const { return closed_awaitable(state_); }

private:
    friend std::pair<oneshot_sender<T>, oneshot_receiver<T>> oneshot_channel<T>();
    explicit oneshot_sender(std::shared_ptr<detail::sync::oneshot_state<T>> s) noexcept : state_(std::move(s)) {}

    void drop() noexcept {
        if (!state_) return;
        std::shared_ptr<detail::sync::oneshot_state<T>> st = std::move(state_);
        aspen::waker w;
        {
            std::lock_guard g(st->lock);
            st->sender_alive = false;
            w = std::move(st->receiver_waker);
        }
        w.wake();
    }

    std::shared_ptr<detail::sync::oneshot_state<T>> state_;
};

template <class T>
class oneshot_receiver {
public:
    oneshot_receiver() noexcept = default;
    oneshot_receiver(oneshot_receiver&& other) noexcept
        : state_(std::move(other.state_)), received_(std::exchange(other.received_, false)) {}
    oneshot_receiver& operator=(oneshot_receiver&& other) noexcept {
        if (this != &other) {
            drop();
            state_ = std::move(other.state_);
            received_ = std::exchange(other.received_, false);
        }
        return *this;
    }
    ~oneshot_receiver() { drop(); }

    class [[nodiscard]] awaitable : public detail::sync::leaf_awaitable<awaitable> {
    public:
        static constexpr const char* awaited_what = "aspen::oneshot_receiver";

        explicit awaitable(oneshot_receiver* rx) noexcept : rx_(rx) {}
        awaitable(awaitable&&) noexcept = default;  // until first awaited (see leaf_awaitable)
        ~awaitable() {
            if (!waiting_) return;
            aspen::waker stale;  // dropped after the lock is released
            std::lock_guard g(rx_->state_->lock);
            stale = std::move(rx_->state_->receiver_waker);
        }
        std::optional<T> await_resume() {
            this->rethrow_if_error();
            waiting_ = false;
            rx_->received_ = true;
            std::optional<T> v;
            {
                std::lock_guard g(rx_->state_->lock);
                detail::sync::take_optional(v, rx_->state_->value);
            }
            return v;
        }

    private:
        friend class detail::sync::leaf_awaitable<awaitable>;
        bool poll(aspen::context& cx) {
            if (!rx_->state_) throw std::logic_error("aspen::oneshot_receiver: awaiting a moved-from receiver");
            if (rx_->received_) throw std::logic_error("aspen::oneshot_receiver: the value was already received");
            auto& st = *rx_->state_;
            std::lock_guard g(st.lock);
            if (st.value || !st.sender_alive) return true;
            detail::sync::store_waker(st.receiver_waker, cx);
            waiting_ = true;
            return false;
        }

        oneshot_receiver* rx_;
        bool waiting_ = false;  // a waker of ours may be stored (owner-only)
    };

    awaitable operator co_await() & noexcept { return awaitable(this); }
    awaitable operator co_await() && noexcept { return awaitable(this); }

    // For code outside the runtime, as Tokio's blocking_recv: `co_await rx`
    // sleeping this thread until the value is sent or the sender is gone.
    // From a plain thread or a spawn_blocking function; on a runtime's
    // thread it throws std::logic_error (it would block the worker).
    std::optional<T> blocking_recv() {
        return detail::wait_on_this_thread("aspen::oneshot_receiver::blocking_recv", awaitable(this));
    }

    bool valid() const noexcept { return state_ != nullptr; }

private:
    friend std::pair<oneshot_sender<T>, oneshot_receiver<T>> oneshot_channel<T>();
    explicit oneshot_receiver(std::shared_ptr<detail::sync::oneshot_state<T>> s) noexcept : state_(std::move(s)) {}

    void drop() noexcept {
        if (!state_) return;
        std::shared_ptr<detail::sync::oneshot_state<T>> st = std::move(state_);
        std::optional<T> unreceived;  // destroyed outside the lock
        aspen::waker stale, closed_wait;
        {
            std::lock_guard g(st->lock);
            st->receiver_alive = false;
            detail::sync::take_optional(unreceived, st->value);
            stale = std::move(st->receiver_waker);
            closed_wait = std::move(st->sender_waker);
        }
        closed_wait.wake();
    }

    std::shared_ptr<detail::sync::oneshot_state<T>> state_;
    bool received_ = false;
};

template <class T>
std::pair<oneshot_sender<T>, oneshot_receiver<T>> oneshot_channel() {
    auto st = std::make_shared<detail::sync::oneshot_state<T>>();
    return {oneshot_sender<T>(st), oneshot_receiver<T>(st)};
}

}  // namespace aspen
