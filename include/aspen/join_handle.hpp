// join_handle<T>: what spawn returns. Await it for the value (or the task's
// exception), abort() to cancel, detach() or destroy it to let the task run
// on unobserved.
#pragma once

#include <aspen/detail/task_header.hpp>
#include <aspen/errors.hpp>
#include <aspen/task.hpp>
#include <aspen/waker.hpp>

#include <coroutine>
#include <exception>
#include <type_traits>
#include <stdexcept>
#include <utility>

namespace aspen {

template <class T>
class [[nodiscard]] join_handle {
public:
    join_handle() noexcept = default;
    explicit join_handle(detail::task_header* t) noexcept : task_(t) {}
    join_handle(join_handle&& other) noexcept
        : task_(std::exchange(other.task_, nullptr)), awaited_(std::exchange(other.awaited_, false)) {}
    join_handle& operator=(join_handle&& other) noexcept {
        if (this != &other) {
            detach();
            task_ = std::exchange(other.task_, nullptr);
            awaited_ = std::exchange(other.awaited_, false);
        }
        return *this;
    }
    join_handle(const join_handle&) = delete;
    join_handle& operator=(const join_handle&) = delete;
    ~join_handle() { detach(); }

    // Cancels the task: its frame is destroyed at its next suspension point,
    // or right away if it is waiting. Awaiting the handle then throws
    // task_cancelled. No effect once the task has finished.
    void abort() noexcept {
        if (task_) detail::abort_task(task_);
    }
    bool is_finished() const noexcept { return task_ && detail::is_complete(task_); }
    // Lets the task run on; its exception, if any, goes to the runtime's
    // unhandled_exception_handler.
    void detach() noexcept {
        if (task_) detail::drop_join_handle(std::exchange(task_, nullptr), awaited_);
    }
    bool valid() const noexcept { return task_ != nullptr; }

    struct awaiter {
        join_handle* self;
        bool await_ready() {
            self->check_awaitable();
            if (detail::is_complete(self->task_)) return true;
            detail::require_current_task("aspen::join_handle");
            return false;  // await_suspend inlines the child or registers
        }
        std::coroutine_handle<> await_suspend(std::coroutine_handle<> h) noexcept {
            return detail::suspend_on_join(h, this, &poll_thunk, self->task_);
        }
        T await_resume() { return self->take_result(); }

        static bool poll_thunk(void* me, context& cx) {
            auto* t = static_cast<awaiter*>(me)->self->task_;
            return !detail::register_join_waker(t, cx.waker());
        }
    };
    awaiter operator co_await() & { return awaiter{this}; }
    awaiter operator co_await() && { return awaiter{this}; }

    // Used by block_on: the task is known to be complete.
    T take_result() {
        check_awaitable();
        awaited_ = true;
        if (detail::is_cancelled_outcome(task_)) throw task_cancelled();
        // Moved out, not copied: the exception then dies with its catcher,
        // not with whichever thread drops the task's last reference.
        if (task_->error) std::rethrow_exception(std::exchange(task_->error, nullptr));
        // The frame is gone; the value waits in the result slot.
        if constexpr (!std::is_void_v<T>) return std::move(*static_cast<T*>(task_->result_slot()));
    }
    detail::task_header* header() const noexcept { return task_; }

private:
    void check_awaitable() const {
        if (!task_) throw std::logic_error("aspen::join_handle: awaiting an empty handle (moved-from or detached)");
        if (awaited_) throw std::logic_error("aspen::join_handle: the handle was already awaited");
    }

    detail::task_header* task_ = nullptr;
    bool awaited_ = false;
};

}  // namespace aspen
