// aspen::cancellation_token: a shared flag that, once cancelled, stays
// cancelled and wakes every task waiting for it (Tokio's CancellationToken).
//
//   aspen::cancellation_token stop;
//   auto worker = stop.child();                 // cancelled with its parent, or alone
//   ...
//   co_await worker.cancelled();                // waits for cancel()
//   auto r = co_await aspen::select(rx.recv(), worker.cancelled());  // a cancellable recv
//   std::optional<int> v = co_await worker.run_until_cancelled(job());  // nullopt if cancelled first
//   stop.cancel();                              // any thread; idempotent
//
// Copies share one flag. child() makes a token that is cancelled when this
// one is (at once if it already is), while cancelling the child leaves the
// parent alone. Children are held weakly: a child nobody holds costs its
// parent one slot until the parent next adds a child.
//
// std::stop_token: cancellation_token(std::stop_token) is cancelled when
// the stop_token's source requests stop (through a std::stop_callback, which
// runs cancel() on the requesting thread); token.stop_token() gives a
// std::stop_token whose stop is requested when the token is cancelled, for
// std::jthread or code that takes one. Both exist only where the standard
// library has std::stop_token (__cpp_lib_jthread; ASPEN_HAS_STOP_TOKEN is
// then 1): libstdc++ 10 and later, not libc++ 19 without
// -fexperimental-library.
//
// Cancel safety: `co_await token.cancelled()` is cancel-safe; a waiter
// destroyed while waiting (its task aborted, or it lost a select) unlinks
// itself and leaves nothing behind. Waiting consumes nothing: every waiter
// sees the cancellation.
//
// Rules: a token is cheap to copy (one shared_ptr) and may be used from
// any thread. cancel() runs the stop callbacks registered on stop_token()
// on the calling thread, outside any lock.
#pragma once

#include <aspen/detail/combinator.hpp>
#include <aspen/join_handle.hpp>
#include <aspen/poll.hpp>
#include <aspen/spawn.hpp>
#include <aspen/sync/gate.hpp>
#include <aspen/task.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <version>

#if defined(__cpp_lib_jthread)
#include <stop_token>
#define ASPEN_HAS_STOP_TOKEN 1
#else
#define ASPEN_HAS_STOP_TOKEN 0
#endif

namespace aspen {

namespace detail {
struct cancel_state;
}

class cancellation_token;

// What cancellation_token::cancelled() returns; `co_await` it (no value).
class [[nodiscard]] cancelled_awaitable : public detail::sync::leaf_awaitable<cancelled_awaitable> {
public:
    static constexpr const char* awaited_what = "aspen::cancellation_token::cancelled";

    explicit cancelled_awaitable(std::shared_ptr<detail::cancel_state> s) noexcept;
    void await_resume() { rethrow_if_error(); }

private:
    friend class detail::sync::leaf_awaitable<cancelled_awaitable>;
    bool poll(context& cx) { return wait_.poll(cx); }

    std::shared_ptr<detail::cancel_state> state_;  // declared first: outlives wait_
    detail::sync::gate::awaitable wait_;
};

class cancellation_token {
public:
    // A new token, not cancelled.
    cancellation_token();
#if ASPEN_HAS_STOP_TOKEN
    // Cancelled when st's source requests stop (now, if it already has).
    explicit cancellation_token(std::stop_token st);
#endif
    // Copies share the flag. There is no moved-from state: a move copies.
    cancellation_token(const cancellation_token&) = default;
    cancellation_token& operator=(const cancellation_token&) = default;

    // Cancels this token and all its children, wakes every waiter, and
    // requests stop on the source behind stop_token(). Idempotent.
    void cancel() noexcept;
    bool is_cancelled() const noexcept;
    cancelled_awaitable cancelled() const noexcept { return cancelled_awaitable(state_); }

    // A token cancelled with this one; cancelling it does not cancel this one.
    cancellation_token child() const;
#if ASPEN_HAS_STOP_TOKEN
    // A std::stop_token whose stop is requested when this token is cancelled.
    std::stop_token stop_token() const;
#endif

    // Runs t (spawned) until it finishes or the token is cancelled: its
    // value (std::monostate for void), its exception, or nullopt when the
    // token was cancelled first, in which case t is aborted and awaited
    // (if t had already finished by then, its outcome is returned).
    template <class T>
    task<std::optional<detail::or_monostate<T>>> run_until_cancelled(task<T> t) const;

    // Tasks waiting in cancelled() now (snapshot, for diagnostics and tests).
    std::size_t waiter_count() const;

private:
    explicit cancellation_token(std::shared_ptr<detail::cancel_state> s) noexcept : state_(std::move(s)) {}
    std::shared_ptr<detail::cancel_state> state_;
};

namespace detail {
// Waits until the task t is complete or the token's cancelled() is ready;
// true when t is complete.
task<bool> complete_or_cancelled(task_header* t, const cancellation_token& token);
}  // namespace detail

namespace detail {
// Takes the token by value: the returned task may be awaited after the
// token it came from is gone.
template <class T>
task<std::optional<or_monostate<T>>> run_until_cancelled(cancellation_token token, task<T> t) {
    using R = std::optional<or_monostate<T>>;
    if (token.is_cancelled()) co_return R();
    join_handle<T> h = spawn(std::move(t));
    on_exit abort_left([&] { h.abort(); });
    // Into a variable, not in the if: g++ 12 (README, compiler caveats).
    bool completed = co_await complete_or_cancelled(h.header(), token);
    if (!completed) {
        h.abort();
        task_header* child = h.header();
        co_await first_complete(&child, 1);
        if (is_cancelled_outcome(h.header())) {
            co_await drain(h);
            co_return R();
        }
    }
    if constexpr (std::is_void_v<T>) {
        co_await h;
        co_return R(std::monostate{});
    } else {
        co_return R(co_await h);
    }
}
}  // namespace detail

template <class T>
task<std::optional<detail::or_monostate<T>>> cancellation_token::run_until_cancelled(task<T> t) const {
    return detail::run_until_cancelled(*this, std::move(t));
}

}  // namespace aspen
