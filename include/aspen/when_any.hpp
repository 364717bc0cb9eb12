// when_any: run several tasks concurrently; the first to finish wins and
// the others are cancelled.
//
//   aspen::first_of<int> r = co_await aspen::when_any(ask(a), ask(b));   // r.index, r.value
//   aspen::first_of<std::variant<int, std::string>> m = co_await aspen::when_any(num(), text());
//   aspen::first_of<int> v = co_await aspen::when_any(std::move(tasks)); // a vector of task<int>
//
// Each operand is spawned on the awaiting task's runtime. When the first
// one finishes, every other is aborted AND awaited before when_any returns,
// so no operand outlives the call. The value is the operand's own type when
// all operands give the same type, else a std::variant indexed like the
// operands (void gives std::monostate). If the winner threw, its exception
// is rethrown (after the losers are gone). If several are found finished at
// once, the lowest index wins.
//
// Cancel safety: when_any is NOT cancel-safe for operands that consume
// something. A loser is cancelled wherever it happens to be: an operation
// it was waiting on gives up its place and loses nothing (every sync
// primitive and channel here is cancel-safe), but whatever the loser had
// already taken (a message received, a notification consumed) is dropped
// with it, and a loser that finished in the same instant as the winner has
// its value dropped. To wait for the first of several channel or sync
// operations without losing anything, use aspen::select (select.hpp),
// which completes exactly one of them.
//
// A loser is awaited after its abort: one that runs for a long time without
// reaching a suspension point delays when_any until it does. If the
// awaiting task is aborted, every operand is aborted (not awaited).
//
// Rules: await it inside a task; an empty vector throws
// std::invalid_argument (nothing could win).
#pragma once

#include <aspen/detail/combinator.hpp>
#include <aspen/join_handle.hpp>
#include <aspen/spawn.hpp>
#include <aspen/task.hpp>

#include <array>
#include <cstddef>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

namespace aspen {

namespace detail {

// The winner's outcome (value or exception) as a first_of<V>.
template <class V, std::size_t I, class T>
task<first_of<V>> take_winner(join_handle<T>& h) {
    if constexpr (std::is_void_v<T>) {
        co_await h;
        co_return make_first_of<V, I>(std::monostate{});
    } else {
        co_return make_first_of<V, I>(co_await h);
    }
}

template <class... T, std::size_t... I>
task<first_of<first_value_t<T...>>> when_any_tuple(std::index_sequence<I...>, task<T>... tasks) {
    using V = first_value_t<T...>;
    std::tuple<join_handle<T>...> handles;
    on_exit abort_left([&] { (std::get<I>(handles).abort(), ...); });
    ((std::get<I>(handles) = spawn(std::move(tasks))), ...);
    std::array<task_header*, sizeof...(T)> headers{std::get<I>(handles).header()...};
    std::size_t winner = co_await first_complete(headers.data(), headers.size());
    ((I != winner ? std::get<I>(handles).abort() : void()), ...);
    ((I != winner ? co_await drain(std::get<I>(handles)) : void()), ...);
    std::optional<first_of<V>> result;
    ((I == winner ? void(result.emplace(co_await take_winner<V, I>(std::get<I>(handles)))) : void()), ...);
    co_return std::move(*result);
}

}  // namespace detail

template <class T0, class... T>
task<first_of<detail::first_value_t<T0, T...>>> when_any(task<T0> first, task<T>... rest) {
    return detail::when_any_tuple(std::index_sequence_for<T0, T...>{}, std::move(first), std::move(rest)...);
}

// Over a vector: the winner's index in the vector and its value.
template <class T>
task<first_of<detail::or_monostate<T>>> when_any(std::vector<task<T>> tasks) {
    if (tasks.empty()) throw std::invalid_argument("aspen::when_any: no tasks (an empty vector has no first to finish)");
    std::vector<join_handle<T>> handles;
    handles.reserve(tasks.size());
    detail::on_exit abort_left([&] {
        for (auto& h : handles) h.abort();
    });
    for (auto& t : tasks) handles.push_back(spawn(std::move(t)));
    std::vector<detail::task_header*> headers;
    headers.reserve(handles.size());
    for (auto& h : handles) headers.push_back(h.header());
    std::size_t winner = co_await detail::first_complete(headers.data(), headers.size());
    for (std::size_t i = 0; i < handles.size(); ++i)
        if (i != winner) handles[i].abort();
    for (std::size_t i = 0; i < handles.size(); ++i)
        if (i != winner) co_await detail::drain(handles[i]);
    auto r = co_await detail::take_winner<detail::or_monostate<T>, 0>(handles[winner]);
    r.index = winner;
    co_return r;
}

}  // namespace aspen
