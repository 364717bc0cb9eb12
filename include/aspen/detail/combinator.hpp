// What when_all, when_any, select, join_set and cancellation_token share
// (not a public API, except aspen::first_of, the result of when_any and
// select).
#pragma once

#include <aspen/join_handle.hpp>
#include <aspen/task.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>
#include <variant>

namespace aspen {

// The first of several operations to finish: its position among the
// operands (from 0) and its value. V is that value's type when every operand
// gives the same type, else a std::variant whose alternative `index` holds
// it; void becomes std::monostate.
template <class V>
struct first_of {
    std::size_t index;
    V value;
};

namespace detail {

// A void result as a value that fits in a tuple, variant or optional.
template <class T>
using or_monostate = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

// The value type of first_of over operands giving R... (see first_of).
template <class... R>
struct first_value;
template <class R0, class... R>
struct first_value<R0, R...> {
    using type = std::conditional_t<(std::is_same_v<R0, R> && ...), or_monostate<R0>,
                                    std::variant<or_monostate<R0>, or_monostate<R>...>>;
};
template <class... R>
using first_value_t = typename first_value<R...>::type;

// Wraps the value of operand I (of a first_of<V>) as V.
template <class V, std::size_t I, class U>
first_of<V> make_first_of(U&& value) {
    if constexpr (std::is_same_v<V, std::remove_cvref_t<U>>)
        return first_of<V>{I, std::forward<U>(value)};
    else
        return first_of<V>{I, V(std::in_place_index<I>, std::forward<U>(value))};
}

// Awaits an awaitable, giving std::monostate for a void result.
template <class A>
auto value_or_monostate(A& a) {
    if constexpr (std::is_void_v<decltype(a.await_resume())>) {
        a.await_resume();
        return std::monostate{};
    } else {
        return a.await_resume();
    }
}

// Runs f when the scope is left, however it is left (a coroutine frame
// destroyed by abort included): combinators use it to abort the children
// they spawned, so none runs on unobserved.
template <class F>
class on_exit {
public:
    explicit on_exit(F f) noexcept : f_(std::move(f)) {}
    on_exit(const on_exit&) = delete;
    on_exit& operator=(const on_exit&) = delete;
    ~on_exit() { f_(); }

private:
    F f_;
};

// Waits until the task of h has finished, whatever its outcome, and drops
// that outcome (marking it observed, so an exception of a task that lost a
// race is not reported as unhandled).
template <class T>
task<void> drain(join_handle<T>& h) {
    try {
        (void)co_await h;
    } catch (...) {
    }
}

// Waits until one of the n tasks is complete; gives the lowest index among
// those found complete.
task<std::size_t> first_complete(task_header* const* tasks, std::size_t n);

}  // namespace detail
}  // namespace aspen
