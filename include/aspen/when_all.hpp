// when_all: run several tasks concurrently and wait for all of them.
//
//   auto [a, b] = co_await aspen::when_all(fetch(1), fetch(2));    // std::tuple
//   std::vector<int> v = co_await aspen::when_all(std::move(tasks)); // a vector of task<int>
//
// Each operand is spawned on the runtime of the awaiting task (so they run
// in parallel on a multi-threaded runtime, and interleave on a
// current_thread_runtime); nothing starts before the when_all is awaited.
// A void operand gives std::monostate in the tuple; over a vector of
// task<void> the result is void. Results keep the operands' order.
//
// Errors: every operand is awaited even if one throws; then the exception
// of the first operand that threw (in argument order) is rethrown, so no
// operand is still running when when_all returns or throws. The others'
// exceptions are dropped.
//
// Cancellation: if the awaiting task is aborted, the operands are aborted
// too (each stops at its next suspension point, or at once if it is
// waiting); they are not awaited then, as nothing can wait in a destructor.
//
// Rules: await it inside a task (std::logic_error otherwise, from spawn).
#pragma once

#include <aspen/detail/combinator.hpp>
#include <aspen/join_handle.hpp>
#include <aspen/spawn.hpp>
#include <aspen/task.hpp>

#include <cstddef>
#include <exception>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

namespace aspen {

namespace detail {

// Awaits h; its value goes to out, its exception to `first` unless an
// earlier operand's is already there.
template <class T>
task<void> collect(join_handle<T>& h, std::optional<or_monostate<T>>& out, std::exception_ptr& first) {
    try {
        if constexpr (std::is_void_v<T>) {
            co_await h;
            out.emplace();
        } else {
            out.emplace(co_await h);
        }
    } catch (...) {
        if (!first) first = std::current_exception();
    }
}

template <class... T, std::size_t... I>
task<std::tuple<or_monostate<T>...>> when_all_tuple(std::index_sequence<I...>, task<T>... tasks) {
    std::tuple<join_handle<T>...> handles;
    on_exit abort_left([&] { (std::get<I>(handles).abort(), ...); });
    ((std::get<I>(handles) = spawn(std::move(tasks))), ...);
    std::tuple<std::optional<or_monostate<T>>...> results;
    std::exception_ptr first;
    ((co_await collect(std::get<I>(handles), std::get<I>(results), first)), ...);
    if (first) std::rethrow_exception(first);
    co_return std::tuple<or_monostate<T>...>(std::move(*std::get<I>(results))...);
}

}  // namespace detail

template <class... T>
task<std::tuple<detail::or_monostate<T>...>> when_all(task<T>... tasks) {
    return detail::when_all_tuple(std::index_sequence_for<T...>{}, std::move(tasks)...);
}

// Over a vector: the results in the vector's order (void for task<void>).
template <class T>
task<std::conditional_t<std::is_void_v<T>, void, std::vector<T>>> when_all(std::vector<task<T>> tasks) {
    std::vector<join_handle<T>> handles;
    handles.reserve(tasks.size());
    detail::on_exit abort_left([&] {
        for (auto& h : handles) h.abort();
    });
    for (auto& t : tasks) handles.push_back(spawn(std::move(t)));
    std::vector<std::optional<detail::or_monostate<T>>> results(handles.size());
    std::exception_ptr first;
    for (std::size_t i = 0; i < handles.size(); ++i) co_await detail::collect(handles[i], results[i], first);
    if (first) std::rethrow_exception(first);
    if constexpr (!std::is_void_v<T>) {
        std::vector<T> values;
        values.reserve(results.size());
        for (auto& r : results) values.push_back(std::move(*r));
        co_return values;
    }
}

}  // namespace aspen
