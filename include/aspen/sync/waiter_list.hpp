// Building blocks shared by the sync primitives and channels (mutex,
// semaphore, notify, oneshot, mpsc). Not a public API.
//
// * waiter_node / waiter_list: an intrusive, circular, doubly-linked FIFO with
//   a sentinel. A node unlinks itself without knowing which list holds it, so
//   a primitive can move its whole queue to a list on the stack (notify_all)
//   while the waiters in it can still be cancelled. Every operation runs under
//   the owning primitive's spin_mutex.
// * waker_batch: wakers taken out of nodes under the lock and woken after it
//   is released (a node may be destroyed the moment the lock is dropped, so
//   nothing but the moved-out waker is touched after that).
// * leaf_awaitable<D>: the poll-style leaf mechanism of poll_fn, as a base
//   class. D provides `bool poll(context&)` (true = ready). The object must
//   not move once awaited (it is registered by address), so awaitables are
//   neither copyable nor movable; they are returned as prvalues and live in
//   the awaiting coroutine's frame. An exception thrown by poll is rethrown
//   from await_resume, in the awaiting task. poll_as_branch lets aspen::select
//   poll several leaves inside one task.
//   from await_resume, in the awaiting task.
//   It also spends the coop budget (aspen/coop.hpp), here and nowhere else:
//   an await that completes at once costs one unit; one that waits costs
//   nothing; with no budget left the task yields BEFORE D::poll runs, and
//   D::poll runs first thing in the task's next poll. So a primitive opts in
//   just by deriving from leaf_awaitable, and needs no budget code, provided
//   (as for any cancel-safe await) that D::poll is where the operation takes
//   effect and D's destructor copes with never having been polled.
#pragma once

#include <aspen/coop.hpp>
#include <aspen/detail/task_header.hpp>
#include <aspen/waker.hpp>

#include <array>
#include <cassert>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <utility>

namespace aspen::detail::sync {

struct waiter_node {
    waiter_node* prev = nullptr;
    waiter_node* next = nullptr;

    bool linked() const noexcept { return next != nullptr; }
    // Removes the node from whatever list holds it.
    void unlink() noexcept {
        prev->next = next;
        next->prev = prev;
        prev = nullptr;
        next = nullptr;
    }
};

class waiter_list {
public:
    waiter_list() noexcept { head_.prev = head_.next = &head_; }
    waiter_list(const waiter_list&) = delete;
    waiter_list& operator=(const waiter_list&) = delete;

    bool empty() const noexcept { return head_.next == &head_; }
    waiter_node* front() const noexcept { return empty() ? nullptr : head_.next; }

    void push_back(waiter_node* n) noexcept {
        n->prev = head_.prev;
        n->next = &head_;
        head_.prev->next = n;
        head_.prev = n;
    }
    void push_front(waiter_node* n) noexcept {
        n->next = head_.next;
        n->prev = &head_;
        head_.next->prev = n;
        head_.next = n;
    }
    waiter_node* pop_front() noexcept {
        if (empty()) return nullptr;
        waiter_node* n = head_.next;
        n->unlink();
        return n;
    }
    // Moves every node of `other` to the back of this list.
    void splice_back(waiter_list& other) noexcept {
        if (other.empty()) return;
        waiter_node* first = other.head_.next;
        waiter_node* last = other.head_.prev;
        other.head_.prev = other.head_.next = &other.head_;
        first->prev = head_.prev;
        head_.prev->next = first;
        last->next = &head_;
        head_.prev = last;
    }
    std::size_t size() const noexcept {
        std::size_t n = 0;
        for (const waiter_node* p = head_.next; p != &head_; p = p->next) ++n;
        return n;
    }

private:
    waiter_node head_;
};

// Wakers collected under a lock, woken after it is released. The destructor
// wakes whatever is left, so declaring the batch before the lock guard wakes
// after the unlock.
class waker_batch {
public:
    static constexpr std::size_t capacity = 16;

    waker_batch() = default;
    waker_batch(const waker_batch&) = delete;
    waker_batch& operator=(const waker_batch&) = delete;
    ~waker_batch() { wake_all(); }

    bool full() const noexcept { return size_ == capacity; }
    void push(aspen::waker&& w) noexcept {
        if (w) slots_[size_++] = std::move(w);
    }
    void wake_all() noexcept {
        for (std::size_t i = 0; i < size_; ++i) slots_[i].wake();
        size_ = 0;
    }

private:
    std::array<aspen::waker, capacity> slots_;
    std::size_t size_ = 0;
};

// Stores a copy of the polling task's waker unless `slot` already wakes it.
inline void store_waker(aspen::waker& slot, const aspen::context& cx) {
    if (!slot.will_wake(cx.waker())) slot = cx.waker();
}

// An operation may be moved until it is first awaited or polled, so that
// aspen::timeout can take one into a task of its own (every derived
// operation is in its initial phase then: nothing points at it and its
// destructor does nothing); from then on the task or a waiter list points
// at it, and it stays where it is (in the awaiting coroutine's frame).
template <class Derived>
class leaf_awaitable {
public:
    leaf_awaitable() = default;
    leaf_awaitable(leaf_awaitable&& other) noexcept : error_(std::move(other.error_)) {
        assert(!other.started_ && "aspen: an operation moved after it was awaited or polled");
    }
    leaf_awaitable(const leaf_awaitable&) = delete;
    leaf_awaitable& operator=(const leaf_awaitable&) = delete;

    bool await_ready() {
        started_ = true;
        return detail::poll_budgeted_leaf(Derived::awaited_what, static_cast<leaf_awaitable*>(this), &thunk);
    }
    void await_suspend(std::coroutine_handle<> h) noexcept {
        detail::suspend_budgeted_leaf(h, static_cast<leaf_awaitable*>(this), &thunk, &thunk_after_yield);
    }

    // For combinators that wait on several leaves with one task's waker
    // (aspen::select): polls this leaf without awaiting it. True when ready;
    // then await_resume gives the outcome. A leaf never completed this way
    // is simply destroyed, and its destructor gives up its place.
    bool poll_as_branch(aspen::context& cx) noexcept {
        started_ = true;
        return thunk(this, cx);
    }

protected:
    ~leaf_awaitable() = default;
    void rethrow_if_error() {
        if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    }

private:
    static bool thunk(void* self, aspen::context& cx) noexcept {
        auto* me = static_cast<leaf_awaitable*>(self);
        try {
            return static_cast<Derived*>(me)->poll(cx);
        } catch (...) {
            me->error_ = std::current_exception();
            return true;
        }
    }
    // Yielded for budget, the operation takes effect in a later poll: it
    // spends a unit of that poll's budget, as it would have in await_ready.
    static bool thunk_after_yield(void* self, aspen::context& cx) noexcept {
        if (!thunk(self, cx)) return false;
        detail::coop_try_consume();
        return true;
    }

    std::exception_ptr error_;
    bool started_ = false;  // awaited or polled: no longer movable (checked by an assert)
};

}  // namespace aspen::detail::sync
