// join_handle<T>: what spawn returns. Await it for the value (or the task's
// exception), abort() to cancel, detach() or destroy it to let the task run
// on unobserved.
//
// A join_handle belongs to one owner at a time, as any standard object:
// calls on one handle from two threads at once race, also abort() against
// the owner's co_await. To cancel from elsewhere, hand out an abort_handle
// (aspen/abort_handle.hpp), which may be copied to any thread.
#pragma once

#include <aspen/abort_handle.hpp>
#include <aspen/detail/task_header.hpp>
#include <aspen/errors.hpp>
#include <aspen/task.hpp>
#include <aspen/task_id.hpp>
#include <aspen/waker.hpp>

#include <coroutine>
#include <cstdint>
#include <exception>
#include <type_traits>
#include <stdexcept>
#include <utility>

namespace aspen {

template <class T>
class [[nodiscard]] join_handle {
public:
    join_handle() noexcept = default;
    explicit join_handle(detail::task_header* t) noexcept : bits_(reinterpret_cast<std::uintptr_t>(t)) {}
    join_handle(join_handle&& other) noexcept : bits_(std::exchange(other.bits_, empty_bits)) {}
    join_handle& operator=(join_handle&& other) noexcept {
        if (this != &other) {
            detach();
            bits_ = std::exchange(other.bits_, empty_bits);
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
        if (holds_block()) detail::abort_task(task());
    }
    bool is_finished() const noexcept { return valid() && (!holds_block() || detail::is_complete(task())); }
    // A handle that can abort this task from anywhere, also after this
    // join_handle was awaited or dropped (see aspen/abort_handle.hpp).
    // Throws std::logic_error on an empty handle, as awaiting one does.
    aspen::abort_handle abort_handle() const {
        if (!valid()) throw std::logic_error("aspen::join_handle::abort_handle: the handle is empty (moved-from or detached)");
        if (!holds_block()) return aspen::abort_handle::of_finished(given_back_id());
        return aspen::abort_handle(task());
    }
    // The task's id (aspen/task_id.hpp), also once it finished or the
    // handle was awaited. Throws std::logic_error on an empty handle.
    task_id id() const {
        if (!valid()) throw std::logic_error("aspen::join_handle::id: the handle is empty (moved-from or detached)");
        if (!holds_block()) return task_id_access::from_value(given_back_id());
        return task_id_access::of(task());
    }
    // Lets the task run on; its exception, if any, goes to the runtime's
    // unhandled_exception_handler.
    void detach() noexcept {
        // likely: the common end of a handle is given back or empty.
        // Without the hint g++ 12 laid the drop inline, and fib ran 7%
        // slower with the same instructions.
        if (!holds_block()) [[likely]] {
            bits_ = empty_bits;
            return;
        }
        detail::task_header* t = task();
        bool observed = awaited();
        bits_ = empty_bits;
        if (!observed && t->adopted) [[unlikely]]
            end_untaken_adoption(t);
        detail::drop_join_handle(t, observed);
    }
    bool valid() const noexcept { return bits_ != empty_bits; }

    struct awaiter {
        join_handle* self;

        explicit awaiter(join_handle* h) noexcept : self(h) {}
        bool await_ready() {
            self->check_awaitable();
            detail::task_header* t = self->task();
            void* worker = detail::polling_worker;
            if (!worker) {
                if (detail::is_complete(t)) return true;
                detail::require_current_task("aspen::join_handle");
                return false;  // await_suspend registers the join waker
            }
            // A worker polling a task always has a current task. Its common
            // case first: a child that join_by_call can run was never run,
            // so it is not complete, and the word is read only once.
            if (detail::join_by_call(worker, t)) return true;
            return detail::is_complete(t);  // else await_suspend inlines the child or registers
        }
        std::coroutine_handle<> await_suspend(std::coroutine_handle<> h) noexcept {
            return detail::suspend_on_join(h, this, &poll_thunk, self->task());
        }
        T await_resume() {
            if (!self->task()->adopted) return self->take_result();
            return self->take_adopted(child_promise());
        }

        static bool poll_thunk(void* me, context& cx) {
            auto* t = static_cast<awaiter*>(me)->self->task();
            return !detail::register_join_waker(t, cx.waker());
        }

    private:
        detail::promise<T>& child_promise() const noexcept {
            return std::coroutine_handle<detail::promise<T>>::from_address(self->task()->frame()).promise();
        }
    };
    awaiter operator co_await() & { return awaiter{this}; }
    awaiter operator co_await() && { return awaiter{this}; }

    // Used by block_on: the task is known to be complete.
    T take_result() {
        check_awaitable();
        bits_ |= awaited_bit;
        detail::task_header* t = task();
        if (detail::is_cancelled_outcome(t)) throw task_cancelled();
        // Moved out, not copied: the exception then dies with its catcher,
        // not with whichever thread drops the task's last reference.
        if (t->error) std::rethrow_exception(std::exchange(t->error, nullptr));
        // The frame is gone; the value waits in the result slot.
        if constexpr (!std::is_void_v<T>) return std::move(*static_cast<T*>(t->result_slot()));
    }
    // The task's header while the handle holds it (not given back; block_on,
    // when_any and timeout use it before any await), else null.
    detail::task_header* header() const noexcept { return holds_block() ? task() : nullptr; }

private:
    // The child ran adopted by our awaiter and its final suspend resumed us:
    // its outcome is still in its frame (see "Adopted" in task_header.hpp).
    // The value is moved out and (if it has a destructor) the promise
    // emptied first, so that the frame needs no destroy() when nothing else
    // is in it (promise_base).
    T take_adopted(detail::promise<T>& p) {
        if (p.error) [[unlikely]]
            return rethrow_adopted(p);
        if constexpr (std::is_void_v<T>) {
            finish_adopted();
        } else if constexpr (std::is_nothrow_move_constructible_v<T>) {
            T value = std::move(*p.value);
            // Nothing to end for a trivially destructible value (skynet: a
            // store a join less).
            if constexpr (!std::is_trivially_destructible_v<T>) p.value.reset();
            finish_adopted();
            return value;
        } else {
            struct finish {
                join_handle* self;
                detail::promise<T>& p;
                ~finish() {
                    p.value.reset();
                    self->finish_adopted();
                }
            } at_exit{this, p};
            return std::move(*p.value);
        }
    }
    [[gnu::noinline]] T rethrow_adopted(detail::promise<T>& p) {
        std::exception_ptr error = std::move(p.error);
        finish_adopted();
        std::rethrow_exception(std::move(error));
    }
    // The child ran adopted and its outcome waits in its frame, but the
    // await that would take it never resumes: g++ 12 runs the await_suspend
    // of every co_await in `f(co_await h, co_await w)` (scalar or void
    // results) before either await_resume, and the joiner was destroyed
    // (aborted, shut down) while it waited in w. Completes the child as an
    // unobserved one: its frame (the value left in it) is destroyed, its
    // exception goes to the header, from where drop_join_handle reports it,
    // as for any task whose handle is dropped unobserved. Without this the
    // child never completed: its block leaked and it counted as alive for
    // ever.
    [[gnu::cold]] static void end_untaken_adoption(detail::task_header* t) noexcept {
        auto& p = std::coroutine_handle<detail::promise<T>>::from_address(t->frame()).promise();
        t->error = std::move(p.error);
        detail::finish_adopted(t, false);
    }
    // The outcome is out and the promise empty. A child still adopted at
    // its end had nothing else in its frame (final_awaiter, task.hpp, adopts
    // only such a frame), so nothing is left to destroy. The block is given
    // back at once when nothing else can reach it (see "Given back").
    void finish_adopted() noexcept {
        std::uint64_t id = detail::end_adopted(task());
        bits_ = id != detail::block_kept ? given_back_bits(id) : bits_ | awaited_bit;
    }

    void check_awaitable() const {
        if (!valid()) throw std::logic_error("aspen::join_handle: awaiting an empty handle (moved-from or detached)");
        if (awaited()) throw std::logic_error("aspen::join_handle: the handle was already awaited");
    }

    // One word: a handle is one pointer, so an array of them is half the
    // size, and building or destroying one is a single store or test.
    //   given_back_bit           empty (moved-from, detached): id 0, which
    //                            no task has. Not 0: the destructor of an
    //                            empty handle and of a given-back one is
    //                            then one bit test, and g++ 12 builds an
    //                            array of empty handles with vector stores
    //                            (an all-zero one of 96 bytes or more it
    //                            clears with `rep stosq`, slow to start).
    //                            nqueens, 12 handles in every task, ran 8%
    //                            to 10% faster (docs/performance.md,
    //                            History, stop 44).
    //   header | awaited_bit?    the task's block, and whether its outcome
    //                            was taken (task headers are 16-byte
    //                            aligned, so the low bits are free)
    //   id << id_shift | given_back_bit | awaited_bit
    //                            Given back: the task ran adopted by this
    //                            handle's await (task_header.hpp), and when
    //                            its outcome was taken nothing else could
    //                            reach its block (no waker clone, no
    //                            abort_handle, not in the registry), so
    //                            end_adopted freed it then, not this
    //                            handle's drop, and handed over the task's
    //                            id, or 0 if it never had one: the
    //                            handle's first id() or abort_handle()
    //                            then gives it one (given_back_id). The
    //                            task has finished: abort() has
    //                            nothing to do and is_finished() is true,
    //                            as before. In fork-join code nearly every
    //                            join ends here.
    static constexpr std::uintptr_t awaited_bit = 1;
    static constexpr std::uintptr_t given_back_bit = 2;
    // Ids count tasks from 1 and stay far below 2^62, so two bits free.
    static constexpr unsigned id_shift = 2;
    static constexpr std::uintptr_t empty_bits = given_back_bit;
    static_assert(alignof(detail::task_header) > (awaited_bit | given_back_bit), "the flags need free low bits");
    static std::uintptr_t given_back_bits(std::uint64_t id) noexcept {
        return (static_cast<std::uintptr_t>(id) << id_shift) | given_back_bit | awaited_bit;
    }
    // Nobody saw an id of a task that had none when it was given back, so
    // a fresh one serves, kept from then on. Given then, not at the join:
    // most handles of fork-join code are never asked (callgrind: skynet
    // 13 and fib 10 instructions a spawn less than with the same
    // per-thread batch of ids read at each join). const, as the calls it
    // serves: a handle is not for concurrent use (see the top).
    std::uint64_t given_back_id() const noexcept {
        if ((bits_ >> id_shift) == 0) [[unlikely]]
            bits_ = given_back_bits(detail::fresh_task_id());
        return bits_ >> id_shift;
    }
    bool holds_block() const noexcept { return !(bits_ & given_back_bit); }
    detail::task_header* task() const noexcept { return reinterpret_cast<detail::task_header*>(bits_ & ~awaited_bit); }
    bool awaited() const noexcept { return bits_ & awaited_bit; }

    mutable std::uintptr_t bits_ = empty_bits;  // mutable: given_back_id
};

}  // namespace aspen
