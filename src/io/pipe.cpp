// Pipes: adopting an end, making a pair, and a write that cannot raise
// SIGPIPE. Reads and writes are tcp.cpp's transfer_awaitable, which picks
// read(2) / write(2) for a source marked is_pipe.
#include <aspen/pipe.hpp>

#include "io/io_source.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <stdexcept>
#include <string>

namespace aspen {

namespace detail {
// Linux sends SIGPIPE to the writing thread. With the signal blocked on
// this thread for the write, it stays pending instead of killing the
// process, and sigtimedwait takes it back, unless one was pending before
// (not ours: left for whoever blocked it). The thread's mask is restored
// after, so the caller's signal set-up is untouched.
ssize_t pipe_write(int fd, const void* data, std::size_t size) noexcept {
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    bool was_pending = sigismember(&pending, SIGPIPE) == 1;
    ssize_t n = ::write(fd, data, size);
    int err = errno;
    if (n < 0 && err == EPIPE && !was_pending) {
        timespec none{};
        while (sigtimedwait(&pipe_only, nullptr, &none) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    errno = err;
    return n;
}

namespace {
// The end's state, marked as a pipe. Takes ownership of fd.
io_handle make_pipe_io(int fd) {
    io_handle io = make_io(fd);
    io.get()->is_pipe = true;
    return io;
}

// Checks that fd is a pipe or FIFO opened for `access` (O_RDONLY /
// O_WRONLY) and makes it non-blocking; `what` names the call in errors.
void check_pipe_end(int fd, int access, const std::string& what) {
    if (fd < 0) throw std::invalid_argument(what + ": not a file descriptor");
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw_errno(errno, what);
    if (!S_ISFIFO(st.st_mode)) throw std::invalid_argument(what + ": not a pipe or FIFO");
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0) throw_errno(errno, what);
    int mode = flags & O_ACCMODE;
    // A FIFO opened O_RDWR can be either end.
    if (mode != access && mode != O_RDWR)
        throw std::invalid_argument(what + (access == O_RDONLY ? ": not open for reading" : ": not open for writing"));
    make_nonblocking(fd, what);
}
}  // namespace
}  // namespace detail

pipe_reader pipe_reader::from_native(int fd) {
    detail::check_pipe_end(fd, O_RDONLY, "aspen::pipe_reader::from_native(" + std::to_string(fd) + ")");
    return pipe_reader(detail::make_pipe_io(fd));
}

pipe_writer pipe_writer::from_native(int fd) {
    detail::check_pipe_end(fd, O_WRONLY, "aspen::pipe_writer::from_native(" + std::to_string(fd) + ")");
    return pipe_writer(detail::make_pipe_io(fd));
}

std::pair<pipe_reader, pipe_writer> pipe() {
    int fds[2];
    if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) detail::throw_errno(errno, "aspen::pipe");
    auto [rd, wr] = detail::make_io_pair(fds);
    rd.get()->is_pipe = true;
    wr.get()->is_pipe = true;
    return {pipe_reader(std::move(rd)), pipe_writer(std::move(wr))};
}

}  // namespace aspen
