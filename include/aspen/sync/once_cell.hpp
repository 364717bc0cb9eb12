// aspen::once_cell<T>: a value made once, by the first task that needs it,
// while the others wait without blocking a worker (as tokio::sync::OnceCell).
//
//   aspen::once_cell<settings> cell;
//   settings& s = co_await cell.get_or_init([&]() -> aspen::task<settings> {
//       co_return co_await load_settings();   // runs once, may await anything
//   });
//   if (settings* s = cell.get()) ...         // never waits: null while empty
//
// get_or_init gives a std::reference_wrapper<T> (a task cannot give a
// reference): bind it to `T&` as above, or call .get() on it. One
// initializer runs at a time; the tasks that call get_or_init meanwhile wait
// in FIFO order (an aspen::mutex) and then get the value it made, without
// running theirs. If the initializer throws, the exception goes to its
// caller and the cell stays empty, so the next waiter runs its own
// initializer (as Tokio's get_or_try_init); the same if the initializing
// task is aborted.
//
// set(v) stores v if the cell is empty and no initializer runs; it moves
// from v only when it returns true. get() and initialized() may be called
// from any thread, also outside a runtime; the value never changes once set
// and lives until the cell is destroyed.
//
// Cancel safety: get_or_init is cancel-safe while it waits for the
// initializer of another task (it leaves the queue, as mutex::lock does);
// aborted while its own initializer runs, that initializer is destroyed
// with it and the cell stays empty.
//
// Rules: the cell must outlive every get_or_init on it, and must not move
// (it is neither copyable nor movable).
#pragma once

#include <aspen/sync/mutex.hpp>
#include <aspen/task.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

namespace aspen {

template <class T>
class once_cell {
    static_assert(!std::is_reference_v<T>, "aspen::once_cell<T&> is not supported; store a pointer");

public:
    once_cell() noexcept = default;
    // Starts set.
    explicit once_cell(T value) { publish(std::move(value)); }
    once_cell(const once_cell&) = delete;
    once_cell& operator=(const once_cell&) = delete;
    ~once_cell() {
        // relaxed: the cell's owner destroys it after every user is done.
        if (set_.load(std::memory_order_relaxed)) value_ptr()->~T();
    }

    // The value, or null while the cell is empty.
    T* get() noexcept { return initialized() ? value_ptr() : nullptr; }
    const T* get() const noexcept { return initialized() ? value_ptr() : nullptr; }
    bool initialized() const noexcept {
        // acquire: pairs with publish()'s release, so a caller that sees the
        // flag sees the constructed value.
        return set_.load(std::memory_order_acquire);
    }

    // Stores v if the cell is empty and nobody is initializing it; true if
    // it did (v is moved from only then).
    bool set(T&& v) {
        std::optional<mutex_guard> g = init_.try_lock();
        if (!g || initialized()) return false;
        publish(std::move(v));
        return true;
    }
    bool set(const T& v) {
        T copy(v);
        return set(std::move(copy));
    }

    // The value; if the cell is empty, runs init() (a callable returning
    // task<T>) to make it, unless another task's initializer is running:
    // then waits for it (see above).
    template <class F>
        requires std::is_same_v<std::invoke_result_t<F&>, task<T>>
    task<std::reference_wrapper<T>> get_or_init(F init) {
        if (T* p = get()) co_return std::ref(*p);
        mutex_guard g = co_await init_.lock();
        if (T* p = get()) co_return std::ref(*p);  // made while this task waited
        T v = co_await init();
        publish(std::move(v));
        co_return std::ref(*value_ptr());
    }

private:
    T* value_ptr() noexcept { return std::launder(reinterpret_cast<T*>(storage_)); }
    const T* value_ptr() const noexcept { return std::launder(reinterpret_cast<const T*>(storage_)); }
    // Only under init_ (or in the constructor): constructs the value, then
    // publishes it.
    void publish(T&& v) {
        ::new (static_cast<void*>(storage_)) T(std::move(v));
        // release: the value's construction happens before any acquire load
        // that sees true (initialized()).
        set_.store(true, std::memory_order_release);
    }

    alignas(T) unsigned char storage_[sizeof(T)];
    std::atomic<bool> set_{false};
    mutex init_;  // held by the one initializer (or set) at a time
};

}  // namespace aspen
