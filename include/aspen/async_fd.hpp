// aspen::async_fd: any file descriptor epoll can watch (a pipe, an eventfd,
// a timerfd, a signalfd, a tty, a socket that a C library reads and writes
// itself) on the runtime's reactor, as Tokio's AsyncFd.
//
//   aspen::async_fd in = aspen::async_fd::adopt(pipe_read_end);
//   char buf[256];
//   auto n = co_await in.read_with([&](int fd) { return ::read(fd, buf, sizeof buf); });
//
// read_with(f) / write_with(f) wait until the reactor reports the fd
// readable / writable, then call f(fd): a non-blocking syscall, or anything
// that reports like one.
//   result >= 0                 the operation's result (co_await returns it)
//   -1, errno EAGAIN/EWOULDBLOCK not ready after all: the cached readiness is
//                               cleared and f is called again at the next
//                               readiness edge
//   -1, errno EINTR             f is called again at once
//   -1, any other errno         std::system_error with that errno
// f may run several times before the operation completes, so a call that
// reports EAGAIN must have done nothing (a syscall never has). An exception
// from f propagates to the awaiting task. End of file is a result (read's
// 0), not an error; a hung-up pipe stays readable, so every later read_with
// calls f at once.
//
// adopt() takes ownership: it sets O_NONBLOCK, and the destructor
// deregisters the fd and closes it. release() gives the fd back open and
// deregistered instead. Regular files and directories are refused (epoll
// cannot watch them: their reads never block; use spawn_blocking).
//
// Rules, as for sockets (aspen/net/tcp.hpp): the fd registers with the
// runtime of the first task that uses it; one read_with and one write_with
// may be in progress at a time (a second one of the same direction throws
// std::logic_error); destroying the async_fd while a task waits in one makes
// that operation throw std::system_error(ECANCELED). Each operation spends
// one unit of the task's coop budget.
//
// Cancel safety (abort, a lost when_any / timeout race, the awaitable
// destroyed while pending): f runs only inside the poll that completes the
// operation, so a completed call's result always reaches the task; an
// operation cancelled while waiting has called f only for EAGAINs. So
// read_with and write_with are cancel-safe when f is a single syscall. The
// awaitable may move (e.g. into aspen::timeout) until it is awaited.
#pragma once

#include <aspen/detail/fd_op.hpp>
#include <aspen/detail/io_handle.hpp>

#include <utility>

namespace aspen {

class async_fd;

namespace detail {
// A readiness-only wait on fd's read or write direction, and the clearing
// of what it reported (detail::fd_ready_wait, aspen/detail/fd_op.hpp): the
// C API's aspen_fd_ready_poll / aspen_fd_clear_ready. std::logic_error
// naming `what` if fd is empty.
fd_ready_wait ready_wait_of(const async_fd& fd, bool write, const char* what);
void clear_ready_of(const async_fd& fd, fd_readiness seen) noexcept;
}  // namespace detail

class async_fd : public detail::fd_ops<async_fd> {
public:
    async_fd() noexcept = default;  // empty: every operation throws std::logic_error
    async_fd(async_fd&&) noexcept = default;
    async_fd& operator=(async_fd&&) noexcept = default;

    // Takes ownership of fd and makes it non-blocking. Throws
    // std::invalid_argument for a negative fd, a regular file or a
    // directory (the fd then stays open and the caller's), and
    // std::system_error for an fd that is not open (EBADF).
    static async_fd adopt(int fd);

    // read_with(f), write_with(f) (detail::fd_ops): see the top of this file.

    // Deregisters the fd and returns it, open; the async_fd is empty after.
    // Throws std::logic_error while an operation on it exists (awaited or
    // not), or if it is empty.
    int release();

    int native_handle() const noexcept { return io_.fd(); }
    bool is_open() const noexcept { return static_cast<bool>(io_); }

private:
    friend class detail::fd_ops<async_fd>;
    friend detail::fd_ready_wait detail::ready_wait_of(const async_fd&, bool, const char*);
    friend void detail::clear_ready_of(const async_fd&, detail::fd_readiness) noexcept;
    static constexpr const char* read_with_what = "aspen::async_fd::read_with";
    static constexpr const char* write_with_what = "aspen::async_fd::write_with";
    explicit async_fd(detail::io_handle io) noexcept : io_(std::move(io)) {}
    detail::io_source* source(const char* what) const { return io_.require(what); }
    detail::io_handle io_;
};

}  // namespace aspen
