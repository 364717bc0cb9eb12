// select: wait for the first of several operations (channel and sync
// awaitables) inside the calling task, complete exactly that one, and drop
// the others.
//
//   auto r = co_await aspen::select(rx1.recv(), rx2.recv(), stop.cancelled());
//   switch (r.index) {
//       case 0: use(std::get<0>(r.value)); break;   // an std::optional<T> from rx1
//       case 1: use(std::get<1>(r.value)); break;
//       case 2: return;                               // std::monostate: cancelled
//   }
//
// The result is an aspen::first_of<V> (detail/combinator.hpp): the index of
// the operation that completed and its value; V is that value's type when
// every operation gives the same type, else a std::variant indexed like the
// operations (void gives std::monostate).
//
// How it works: select is itself one leaf of the task. Each poll polls the
// operations with the task's one waker, starting at a random one (so a
// busy operation cannot starve the others), and stops at the first that is
// ready. Only that one completes; the others were at most registered as
// waiting, and are destroyed at the end of the full expression that
// contains the co_await (that is, before the next statement runs), which
// gives their place up.
//
// Cancel safety: nothing is lost by the operations that do not win, because
// every operation aspen::select accepts takes its effect only in the poll
// that completes it, and its destructor undoes a registration (see each
// header): a losing recv() takes no message (mpsc: the message stays in the
// channel), a losing acquire() gives back permits granted while it waited,
// a losing notified() passes on a notify_one() that picked it, a losing
// lock() passes the lock on. A losing mpsc send() has sent nothing: its
// value is destroyed with it (as Tokio documents for its send), so use
// try_send or a dedicated task if the value must survive. select itself is
// cancel-safe when all its operations are: if the task is aborted while
// select waits, every operation is destroyed as a loser.
//
// What an operation is: an awaitable with `bool poll_as_branch(context&)`
// and `await_resume()`: every sync awaitable (aspen/sync/*), the
// cancelled() of a cancellation_token, join_set::next(), poll_fn, sleep /
// sleep_until (a deadline branch), and select itself. A join_handle is not an operation (yet): use when_any
// for tasks, or join_set::next().
//
// Rules: pass the operations as temporaries, in the co_await expression
// itself (select(rx.recv(), ...)): select keeps references to them, and a
// named awaitable would stay registered after losing. Lvalues are rejected
// at compile time. Do not store the select object; await it at once.
#pragma once

#include <aspen/detail/combinator.hpp>
#include <aspen/sync/waiter_list.hpp>
#include <aspen/waker.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace aspen {

namespace detail {

template <class A>
concept select_branch = requires(A& a, context& cx) {
    { a.poll_as_branch(cx) } -> std::same_as<bool>;
    a.await_resume();
};

template <class A>
using branch_value_t = or_monostate<decltype(std::declval<A&>().await_resume())>;

// Where select starts polling: a per-thread xorshift, enough to spread the
// start over the branches (not a source of randomness for anything else).
inline std::size_t select_start(std::size_t n) noexcept {
    thread_local std::uint64_t x = 0x9e3779b97f4a7c15ull ^ reinterpret_cast<std::uintptr_t>(&x);
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<std::size_t>(x % n);
}

}  // namespace detail

template <class... A>
class [[nodiscard]] select_awaitable : public detail::sync::leaf_awaitable<select_awaitable<A...>> {
    static constexpr std::size_t count = sizeof...(A);

public:
    static constexpr const char* awaited_what = "aspen::select";
    using value_type = detail::first_value_t<detail::branch_value_t<A>...>;

    explicit select_awaitable(A&... branches) noexcept : branches_(branches...) {}

    first_of<value_type> await_resume() {
        this->rethrow_if_error();
        return take(std::index_sequence_for<A...>{});
    }

private:
    friend class detail::sync::leaf_awaitable<select_awaitable>;

    bool poll(context& cx) {
        std::size_t start = detail::select_start(count);
        for (std::size_t k = 0; k < count; ++k) {
            std::size_t i = (start + k) % count;
            if (poll_one(i, cx, std::index_sequence_for<A...>{})) {
                winner_ = i;
                return true;
            }
        }
        return false;
    }

    template <std::size_t... I>
    bool poll_one(std::size_t i, context& cx, std::index_sequence<I...>) {
        bool ready = false;
        ((I == i ? void(ready = std::get<I>(branches_).poll_as_branch(cx)) : void()), ...);
        return ready;
    }

    template <std::size_t... I>
    first_of<value_type> take(std::index_sequence<I...>) {
        std::optional<first_of<value_type>> r;
        ((I == winner_ ? void(r.emplace(detail::make_first_of<value_type, I>(
                             detail::value_or_monostate(std::get<I>(branches_)))))
                       : void()),
         ...);
        return std::move(*r);
    }

    std::tuple<A&...> branches_;
    std::size_t winner_ = 0;
};

template <class... A>
    requires(sizeof...(A) >= 1 && (detail::select_branch<std::remove_cvref_t<A>> && ...))
select_awaitable<std::remove_reference_t<A>...> select(A&&... ops) {
    static_assert((!std::is_lvalue_reference_v<A> && ...),
                  "aspen::select: pass the operations as temporaries (select(rx.recv(), ...)); a named "
                  "awaitable would stay registered after losing");
    return select_awaitable<std::remove_reference_t<A>...>(ops...);
}

}  // namespace aspen
