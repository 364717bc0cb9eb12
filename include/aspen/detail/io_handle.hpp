// What the socket types (aspen/net/*.hpp) share: an owning handle to a
// socket's internal state, the claim an operation holds on one direction of
// it, and the base of every socket awaitable.
//
// The state (src/io/io_source.hpp: fd, reactor registration, driver) is one
// heap allocation per socket, so sockets can move while operations on them
// are pending, and the reactor's types stay out of public headers.
//
// Wait slots: the reactor stores one reader and one writer waker per fd. An
// operation claims its direction's slot on its first poll and gives it back
// when it completes or is destroyed (then it also drops the waker it stored).
// A second operation of the same direction while one is in progress would
// overwrite the first one's waker (a hang), so it throws std::logic_error
// instead: one read-side and one write-side operation at a time per socket.
#pragma once

#include <aspen/coop.hpp>
#include <aspen/detail/task_header.hpp>
#include <aspen/waker.hpp>

#include <cassert>
#include <coroutine>
#include <exception>
#include <utility>

namespace aspen::detail {

struct io_source;  // src/io/io_source.hpp

// The socket object lets go: operations still waiting on it are woken and
// throw ECANCELED; the fd is deregistered and closed with the last
// reference (src/io/io_source.hpp, "lifetime"). nullptr is a no-op.
void io_close(io_source* s) noexcept;
// One half of a split stream lets go: as io_close, but only the operations
// of its direction (`write` or read) throw ECANCELED; the other half keeps
// the socket open.
void io_close_side(io_source* s, bool write) noexcept;
// s, or std::logic_error naming `what` if s is null (a moved-from, split or
// default-constructed socket).
io_source* io_require(io_source* s, const char* what);
// An operation's reference, from its awaitable's construction to its
// destruction (so a closed socket's state outlives it).
void io_retain(io_source* s) noexcept;
void io_release(io_source* s) noexcept;
int io_fd(const io_source* s) noexcept;

class io_handle {
public:
    io_handle() noexcept = default;
    explicit io_handle(io_source* s) noexcept : s_(s) {}
    io_handle(io_handle&& other) noexcept : s_(std::exchange(other.s_, nullptr)) {}
    io_handle& operator=(io_handle&& other) noexcept {
        if (this != &other) io_close(std::exchange(s_, std::exchange(other.s_, nullptr)));
        return *this;
    }
    ~io_handle() { io_close(s_); }

    io_source* get() const noexcept { return s_; }
    // The source for an operation: std::logic_error naming `what` if empty
    // (a moved-from or default-constructed socket).
    io_source* require(const char* what) const { return io_require(s_, what); }
    int fd() const noexcept { return io_fd(s_); }
    explicit operator bool() const noexcept { return s_ != nullptr; }
    // Gives up ownership without closing (the reference moves to the caller).
    io_source* release() noexcept { return std::exchange(s_, nullptr); }

private:
    io_source* s_ = nullptr;
};

// Owns one direction of a split stream (one reference to its state): the
// read side or the write side. Closing it (destructor, assignment) wakes
// and cancels only that direction's operations; the fd is closed with the
// last reference.
class io_half {
public:
    io_half() noexcept = default;
    io_half(io_source* s, bool write) noexcept : s_(s), write_(write) {}
    io_half(io_half&& other) noexcept : s_(std::exchange(other.s_, nullptr)), write_(other.write_) {}
    io_half& operator=(io_half&& other) noexcept {
        if (this != &other) {
            io_close_side(std::exchange(s_, std::exchange(other.s_, nullptr)), write_);
            write_ = other.write_;
        }
        return *this;
    }
    ~io_half() { io_close_side(s_, write_); }

    io_source* require(const char* what) const { return io_require(s_, what); }
    int fd() const noexcept { return io_fd(s_); }
    explicit operator bool() const noexcept { return s_ != nullptr; }
    bool write_side() const noexcept { return write_; }

private:
    io_source* s_ = nullptr;
    bool write_ = false;
};

// One operation's reference to a socket's state and its claim on the
// read or the write slot (held from the first poll until it completes).
struct io_claim {
    io_source* src = nullptr;
    bool write = false;
    bool held = false;

    io_claim(io_source* s, bool w) noexcept : write(w) { attach(s); }
    // Only before the operation's first poll (see io_awaitable), when no
    // slot is held yet: the reference moves along.
    io_claim(io_claim&& other) noexcept : src(std::exchange(other.src, nullptr)), write(other.write) {
        assert(!other.held && "aspen: a socket operation moved after it started");
    }
    io_claim(const io_claim&) = delete;
    io_claim& operator=(const io_claim&) = delete;
    // An operation destroyed before it completed (abort, a lost race):
    // drop its stored waker and free the slot.
    ~io_claim() {
        if (held) abandon();
        if (src) io_release(src);
    }
    void attach(io_source* s) noexcept {
        src = s;
        if (s) io_retain(s);
    }
    void abandon() noexcept;
};

// Base of the socket awaitables: spends one unit of coop budget per
// operation (when it is spent, the operation yields first and runs in the
// task's next poll), then polls D::poll(context&) as a leaf. An exception
// from poll is rethrown by await_resume, in the awaiting task. An awaitable
// may be moved until it is awaited, so that aspen::timeout can take one
// into a task of its own; once awaited the task points at it, and it stays
// in the awaiting coroutine's frame, which nothing moves.
template <class D>
class io_awaitable {
public:
    io_awaitable() = default;
    io_awaitable(io_awaitable&& other) noexcept : error_(std::move(other.error_)), budget_ok_(other.budget_ok_) {}
    io_awaitable(const io_awaitable&) = delete;
    io_awaitable& operator=(const io_awaitable&) = delete;

    bool await_ready() {
        auto& t = require_current_task(static_cast<D*>(this)->what());
        if (!coop_try_consume()) return false;  // yield in await_suspend
        budget_ok_ = true;
        return poll_leaf_now(t, this, &thunk);
    }
    void await_suspend(std::coroutine_handle<> h) noexcept {
        if (budget_ok_) suspend_on_leaf(h, this, &thunk);
        else yield_on_leaf(h, this, &thunk);
    }

protected:
    ~io_awaitable() = default;
    void rethrow_if_error() {
        if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    }

private:
    static bool thunk(void* self, context& cx) noexcept {
        auto* me = static_cast<io_awaitable*>(self);
        try {
            return static_cast<D*>(me)->poll(cx);
        } catch (...) {
            me->error_ = std::current_exception();
            return true;
        }
    }
    std::exception_ptr error_;
    bool budget_ok_ = false;
};

}  // namespace aspen::detail
