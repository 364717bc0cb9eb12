// The awaitable of an operation that runs a caller's syscall on a
// registered fd: async_fd's read_with / write_with, and the same on the
// socket types (tcp_stream, udp_socket, unix_stream). How f's result is
// read is at the top of aspen/async_fd.hpp.
#pragma once

#include <aspen/detail/io_handle.hpp>

#include <concepts>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace aspen {

namespace detail {
// One attempt of such an operation: calls f(fd), maps its result as
// aspen/async_fd.hpp says. drive_fd runs them in the reactor's operation
// loop (src/io/async_fd.cpp); true when the operation is done, its result
// in `result`.
using fd_call = long long (*)(void* f, int fd);
bool drive_fd(io_claim& c, context& cx, const char* what, fd_call call, void* f, long long& result);

// What the reactor reported when a direction was found ready: its readiness
// bits and the tick they were read at (src/io/reactor.hpp, "Readiness
// protocol"). clear_fd_ready takes it to forget exactly that readiness.
struct fd_readiness {
    std::uint32_t ready = 0;
    std::uint32_t tick = 0;
};

// A readiness-only wait on one direction of a descriptor, for code that
// does its own syscalls (the C API's aspen_fd_ready_poll): the wait of
// readiness_awaitable (aspen/detail/stream_ops.hpp), which keeps what the
// reactor reported. poll() is a leaf poll: true once the direction is
// ready (await_resume() then gives the report), false with cx's waker
// stored. It holds the direction's slot while it waits, as any operation;
// it may be moved until its first poll.
class fd_ready_wait {
public:
    fd_ready_wait(io_source* s, bool write, const char* what) noexcept : claim_(s, write), what_(what) {}
    fd_ready_wait(fd_ready_wait&&) noexcept = default;
    bool poll(context& cx);  // src/io/async_fd.cpp
    fd_readiness await_resume() const noexcept { return seen_; }

private:
    io_claim claim_;
    const char* what_;
    fd_readiness seen_;
};

// The caller's own syscall said EAGAIN after `seen` was reported: forget
// that readiness, so that the next wait waits for a new edge, unless an
// edge arrived since it was reported (then it stays). The report's bits
// name its direction. No-op on a descriptor that is not registered
// (nothing is cached). Any thread.
void clear_fd_ready(io_source* s, fd_readiness seen) noexcept;
}  // namespace detail

// What read_with / write_with return; `co_await` it for f's result.
template <class F>
class [[nodiscard]] fd_op_awaitable : public detail::io_awaitable<fd_op_awaitable<F>> {
public:
    using result_type = std::invoke_result_t<F&, int>;

    // `what` names the operation in errors (a string literal).
    fd_op_awaitable(detail::io_source* s, bool write, const char* what, F f)
        : claim_(s, write), what_(what), f_(std::move(f)) {}
    fd_op_awaitable(fd_op_awaitable&&) = default;  // until it is awaited (see io_awaitable)

    result_type await_resume() {
        this->rethrow_if_error();
        return static_cast<result_type>(result_);
    }
    bool poll(context& cx) { return detail::drive_fd(claim_, cx, what_, &call, &f_, result_); }
    const char* what() const noexcept { return what_; }

private:
    static long long call(void* f, int fd) { return static_cast<long long>((*static_cast<F*>(f))(fd)); }

    detail::io_claim claim_;
    const char* what_;
    F f_;
    long long result_ = 0;
};

// f(fd) must return a signed integer, as a syscall does.
template <class F>
concept fd_operation = std::move_constructible<F> && std::invocable<F&, int> &&
                       std::signed_integral<std::invoke_result_t<F&, int>>;

namespace detail {
// read_with and write_with, for a type D (async_fd, udp_socket,
// unix_datagram) whose D::source(what) gives its state (std::logic_error
// if empty) and whose D::read_with_what / D::write_with_what name the
// operations in errors. (The byte streams have them in stream_reads and
// stream_writes, one per direction, for their split halves.)
template <class D>
class fd_ops {
public:
    // f(fd) once the descriptor is readable; see aspen/async_fd.hpp.
    template <fd_operation F>
    fd_op_awaitable<F> read_with(F f) {
        return fd_op_awaitable<F>(static_cast<D*>(this)->source(D::read_with_what), false, D::read_with_what,
                                  std::move(f));
    }
    // f(fd) once the descriptor is writable.
    template <fd_operation F>
    fd_op_awaitable<F> write_with(F f) {
        return fd_op_awaitable<F>(static_cast<D*>(this)->source(D::write_with_what), true, D::write_with_what,
                                  std::move(f));
    }
};
}  // namespace detail

}  // namespace aspen
