// poll<T> and poll_fn: write a leaf future in the poll style.
//
//   auto v = co_await aspen::poll_fn([&](aspen::context& cx) -> aspen::poll<int> {
//       if (slot.ready()) return aspen::ready(slot.value());
//       slot.store_waker(cx.waker());   // store BEFORE returning pending
//       return aspen::pending;
//   });
//
// The function is polled once when awaited; if pending, the task is not
// polled again until the stored waker fires, and then only this function is
// re-polled until it returns ready. The coroutine resumes only after ready,
// so a spurious wake costs one extra poll, never a wrong resume.
#pragma once

#include <aspen/detail/task_header.hpp>
#include <aspen/waker.hpp>

#include <coroutine>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

namespace aspen {

struct pending_t {
    explicit constexpr pending_t(int) noexcept {}
};
inline constexpr pending_t pending{0};

template <class T>
class poll {
public:
    poll(pending_t) noexcept {}
    poll(T value) : value_(std::move(value)) {}
    bool is_ready() const noexcept { return value_.has_value(); }
    bool is_pending() const noexcept { return !value_.has_value(); }
    T& value() & { return *value_; }
    T take() { return std::move(*value_); }

private:
    std::optional<T> value_;
};

template <>
class poll<void> {
public:
    poll(pending_t) noexcept {}
    struct ready_t {};
    poll(ready_t) noexcept : ready_(true) {}
    bool is_ready() const noexcept { return ready_; }
    bool is_pending() const noexcept { return !ready_; }
    void take() noexcept {}

private:
    bool ready_ = false;
};

template <class T>
poll<std::decay_t<T>> ready(T&& value) {
    return poll<std::decay_t<T>>(std::forward<T>(value));
}
inline poll<void> ready() noexcept { return poll<void>(poll<void>::ready_t{}); }

namespace detail {
template <class P>
struct poll_value;
template <class T>
struct poll_value<poll<T>> {
    using type = T;
};
}  // namespace detail

template <class F>
class poll_fn_awaitable {
    using poll_type = std::invoke_result_t<F&, context&>;
    using value_type = typename detail::poll_value<poll_type>::type;

public:
    explicit poll_fn_awaitable(F f) : fn_(std::move(f)) {}

    bool await_ready() {
        auto& task = detail::require_current_task("aspen::poll_fn");
        return detail::poll_leaf_now(task, this, &poll_thunk);
    }
    void await_suspend(std::coroutine_handle<> h) noexcept {
        detail::suspend_on_leaf(h, this, &poll_thunk);
    }
    value_type await_resume() {
        if (error_) std::rethrow_exception(error_);
        return result_->take();
    }
    // Lets aspen::select poll this function as one of its branches.
    bool poll_as_branch(context& cx) noexcept { return poll_thunk(this, cx); }

private:
    // A re-poll runs on the worker, outside the coroutine: an exception is
    // carried to await_resume, which rethrows it in the awaiting task.
    static bool poll_thunk(void* self, context& cx) noexcept {
        auto* me = static_cast<poll_fn_awaitable*>(self);
        try {
            poll_type p = me->fn_(cx);
            if (p.is_pending()) return false;
            me->result_.emplace(std::move(p));
        } catch (...) {
            me->error_ = std::current_exception();
        }
        return true;
    }

    F fn_;
    std::optional<poll_type> result_;
    std::exception_ptr error_;
};

template <class F>
poll_fn_awaitable<std::decay_t<F>> poll_fn(F&& f) {
    return poll_fn_awaitable<std::decay_t<F>>(std::forward<F>(f));
}

}  // namespace aspen
