// task<T>: a lazy C++20 coroutine. Nothing runs until it is awaited (inline,
// by symmetric transfer) or spawned (then it runs in parallel).
#pragma once

#include <aspen/detail/frame_pool.hpp>
#include <aspen/detail/task_header.hpp>

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace aspen {

template <class T = void>
class task;

namespace detail {

// True when T's destructor certainly does nothing (an incomplete type, e.g.
// behind a reference parameter, counts as not known).
template <class T, class = void>
inline constexpr bool known_trivially_destructible = false;
template <class T>
inline constexpr bool known_trivially_destructible<T, std::void_t<decltype(sizeof(T))>> =
    std::is_trivially_destructible_v<T>;

// std::rethrow_exception(e), out of line: with the call and the copy of
// `e` inline, every await of a task carried their code (callgrind, fib(25)
// with every call awaited inline: 1 instruction a call more).
[[noreturn, gnu::cold]] void rethrow_error(const std::exception_ptr& e);

// Only a spawned root may use its task_header: clang elides the allocation
// of a coroutine awaited inline (HALO), so such a frame has no header in
// front of it. Spawned frames escape into the runtime and are never elided.
struct promise_base {
    promise_base() noexcept = default;
    // The coroutine's parameters: lvalues of their copies in the frame, or
    // of the objects that reference parameters (and `*this`, a lambda's
    // closure) refer to. Notes the one whose destructor may do something.
    template <class... Params>
    explicit promise_base(Params&... params) noexcept {
        (note_parameter(params), ...);
    }

    std::coroutine_handle<> continuation;
    std::exception_ptr error;

    // At final suspend, once the outcome has been moved out (the error, the
    // value), destroying a frame would run no code with an effect unless a
    // parameter copied into it has a destructor: locals are gone and the
    // promise is empty. A parameter that lives outside the frame was a
    // reference (the frame holds only the reference). So a spawned root
    // whose frame holds no such copy skips destroy(); its block is freed
    // with its header. Two or more candidates: destroyed, to keep it simple.
    bool nothing_to_destroy(task_header* t) const noexcept {
        std::uintptr_t p = nontrivial_parameter_;
        if (p == 0) return true;
        if (p == several) return false;
        auto block = reinterpret_cast<std::uintptr_t>(t);
        return p < block || p >= block + t->alloc_size;
    }

private:
    static constexpr std::uintptr_t several = 1;  // never an object's address
    // Set by unhandled_exception when a destructor threw while aspen
    // destroyed the frame (also never an address): see final_awaiter.
    static constexpr std::uintptr_t thrown_while_destroyed = 2;
    template <class P>
    void note_parameter(P& p) noexcept {
        // A function (a reference to one) has nothing to destroy.
        if constexpr (!std::is_function_v<P> && !known_trivially_destructible<std::remove_cv_t<P>>)
            nontrivial_parameter_ = nontrivial_parameter_ ? several : reinterpret_cast<std::uintptr_t>(std::addressof(p));
    }
    // 0: none; `several`: two or more; else the one's address.
    std::uintptr_t nontrivial_parameter_ = 0;

public:
    void unhandled_exception() noexcept {
        // Also reached when a destructor throws while aspen destroys the
        // frame (abort, shutdown): the frame and this promise are going
        // away, nobody could observe `error`, so it is reported at once.
        if (report_if_destroying(std::current_exception())) {
            nontrivial_parameter_ = thrown_while_destroyed;  // no longer needed: the frame ends here
            // Nobody is resumed: final_awaiter then tests for this case
            // only on its root path (no continuation), not at the end of
            // every frame awaited inline.
            continuation = nullptr;
        } else
            error = std::current_exception();
    }
    void rethrow_if_error() {
        if (error) [[unlikely]]
            rethrow_error(error);
    }

    static void* operator new(std::size_t size) { return allocate_frame(size, 0, 1); }
    static void operator delete(void* frame, std::size_t size) noexcept {
        deallocate_frame(frame, block_size_of(size, 0, 1));
    }

    std::suspend_always initial_suspend() noexcept { return {}; }

    struct final_awaiter {
        bool await_ready() const noexcept { return false; }
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
            // Symmetric transfer back to the awaiter keeps deep chains of
            // synchronous completions off the stack.
            if (auto c = h.promise().continuation) return c;
            // A destructor threw while the frame was being destroyed: the
            // frame's catch called unhandled_exception, which cleared the
            // continuation, and ran on to here (g++ and clang alike) instead
            // of freeing it. Nobody waits for it (its awaiter is being
            // destroyed too, or the runtime cancelled it): finish the
            // destruction, resume no one. Tested after the continuation, so
            // a frame awaited inline ends with one test (inline fib: 3
            // instructions a call fewer).
            if (h.promise().nontrivial_parameter_ == thrown_while_destroyed) {
                h.destroy();
                return std::noop_coroutine();
            }
            // A root: its header exists.
            task_header* t = task_header::of_frame(h.address());
            // Run by its joiner, which takes the outcome from the frame,
            // when the frame holds nothing else to destroy. A parameter
            // with a destructor (a sender, a receiver, a task_tracker's
            // count) must go when the task ends, as for any task: g++ 12
            // runs the await_suspend of every co_await in `f(co_await h,
            // (co_await w, 0))` (scalar or void results) before the
            // await_resume that would destroy this frame, so the joiner
            // could wait in w for that parameter to go, for ever. Such a
            // child ends as any nested run does (its result slot).
            if (t->adopted) {
                if (h.promise().nothing_to_destroy(t)) return resume_adopter(t);
                t->adopted = false;
            }
            // Move the outcome out of the frame (the frame is destroyed at
            // completion): the exception so it can be reported without
            // knowing T, the value into the slot.
            // (The header's slot starts empty: nothing to assign without one.)
            if (h.promise().error) t->error = std::move(h.promise().error);
            h.promise().store_root_result(t);
            t->frame_destroyed = h.promise().nothing_to_destroy(t);
            return on_root_final(t);
        }
        void await_resume() const noexcept {}
    };
    final_awaiter final_suspend() noexcept { return {}; }
};

// The result slot of a task<T>'s block: sizeof(T) bytes, and for a T with
// a destructor a pointer to it after them, which ends the block
// (task_header::result_dtor()).
template <class T>
struct result_layout {
    static constexpr bool has_dtor = !std::is_trivially_destructible_v<T>;
    using dtor_fn = task_header::result_dtor_fn;
    static constexpr std::size_t align = has_dtor && alignof(T) < alignof(dtor_fn) ? alignof(dtor_fn) : alignof(T);
    static constexpr std::size_t size =
        has_dtor ? (sizeof(T) + alignof(dtor_fn) - 1) / alignof(dtor_fn) * alignof(dtor_fn) + sizeof(dtor_fn)
                 : sizeof(T);
};

template <class T>
struct promise : promise_base {
    using promise_base::promise_base;
    std::optional<T> value;
    using layout = result_layout<T>;

    // Reserves the result slot a spawned root moves its value into.
    static void* operator new(std::size_t size) {
        static_assert(alignof(T) <= alignof(std::max_align_t), "over-aligned task results are not supported");
        return allocate_frame(size, layout::size, layout::align);
    }
    static void operator delete(void* frame, std::size_t size) noexcept {
        deallocate_frame(frame, block_size_of(size, layout::size, layout::align));
    }

    void store_root_result(task_header* t) noexcept {
        if (!value) return;
        ::new (t->result_slot()) T(std::move(*value));
        // A trivially destructible result needs neither a destructor (no
        // indirect call when the block is freed) nor a reset of the
        // optional (destroying it with the frame, if ever, does nothing).
        if constexpr (layout::has_dtor) {
            t->set_result_dtor([](void* p) noexcept { static_cast<T*>(p)->~T(); });
            t->result_live = true;
            value.reset();
        }
    }
    task<T> get_return_object() noexcept;
    template <class U = T>
        requires std::is_convertible_v<U&&, T>
    void return_value(U&& v) {
        value.emplace(std::forward<U>(v));
    }
    T take() {
        rethrow_if_error();
        return std::move(*value);
    }
};

template <>
struct promise<void> : promise_base {
    using promise_base::promise_base;
    void store_root_result(task_header*) noexcept {}
    task<void> get_return_object() noexcept;
    void return_void() noexcept {}
    void take() { rethrow_if_error(); }
};

template <class T>
task_header* release_task(task<T>&& t);

}  // namespace detail

template <class T>
class [[nodiscard]] task {
    static_assert(!std::is_reference_v<T>, "task<T&> is not supported; return a pointer or a value");

public:
    using promise_type = detail::promise<T>;
    using value_type = T;

    task() noexcept = default;
    explicit task(std::coroutine_handle<promise_type> h) noexcept : h_(h) {}
    task(task&& other) noexcept : h_(std::exchange(other.h_, {})) {}
    task& operator=(task&& other) noexcept {
        if (this != &other) {
            reset();
            h_ = std::exchange(other.h_, {});
        }
        return *this;
    }
    task(const task&) = delete;
    task& operator=(const task&) = delete;
    // Not reset(): nothing reads h_ after the destructor, and the store of
    // an empty handle that reset() makes before destroy() (an opaque call,
    // so the compiler keeps it) came at the end of every inline await.
    ~task() {
        if (h_) h_.destroy();
    }

    bool valid() const noexcept { return static_cast<bool>(h_); }

    struct awaiter {
        std::coroutine_handle<promise_type> h;
        bool started = false;
        bool await_ready() {
            if (!h) throw std::logic_error("aspen::task: awaiting an empty task (moved-from or spawned)");
            if (h.done()) throw std::logic_error("aspen::task: the task was already awaited");
            if (detail::nested_calls == detail::max_nested_calls) return false;
            // Run it now by a plain call (see task_header.hpp, "Joined by
            // a call"): its final suspend returns here through the noop
            // continuation. Nobody can resume it meanwhile: the task it
            // belongs to is being polled by this thread.
            started = true;
            h.promise().continuation = std::noop_coroutine();
            ++detail::nested_calls;
            h.resume();
            --detail::nested_calls;
            return h.done();
        }
        std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
            h.promise().continuation = awaiting;
            // Started and suspended: whoever resumes it resumes us at its end.
            if (started) return std::noop_coroutine();
            return h;
        }
        T await_resume() { return h.promise().take(); }
    };
    awaiter operator co_await() & noexcept { return awaiter{h_, false}; }
    awaiter operator co_await() && noexcept { return awaiter{h_, false}; }

private:
    friend detail::task_header* detail::release_task<T>(task<T>&&);
    void reset() noexcept {
        if (h_) std::exchange(h_, {}).destroy();
    }
    std::coroutine_handle<promise_type> h_;
};

namespace detail {
template <class T>
task<T> promise<T>::get_return_object() noexcept {
    return task<T>(std::coroutine_handle<promise<T>>::from_promise(*this));
}
inline task<void> promise<void>::get_return_object() noexcept {
    return task<void>(std::coroutine_handle<promise<void>>::from_promise(*this));
}
// release_task's refusal: std::logic_error for an empty task (`empty`)
// or one that has already run. Out of line, so that every spawn inlines
// release_task's two tests (skynet: 12 instructions a spawn less than a
// call to it).
[[noreturn, gnu::cold]] void refuse_release(bool empty);
// Takes the frame out of the task object for spawning.
template <class T>
inline task_header* release_task(task<T>&& t) {
    if (!t.h_ || t.h_.done()) [[unlikely]]
        refuse_release(!t.h_);
    return task_header::of_frame(std::exchange(t.h_, {}).address());
}
}  // namespace detail

}  // namespace aspen
