// async_fd: adoption, release, and its operations on the socket operation
// loop (drive(), io_source.hpp).
#include <aspen/async_fd.hpp>

#include "io/io_source.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <stdexcept>
#include <string>

namespace aspen {

namespace detail {
bool drive_fd(io_claim& c, context& cx, const char* what, fd_call call, void* f, long long& result) {
    int fd = c.src->fd;
    return drive(c, cx, what, [&] {
        long long r = call(f, fd);
        if (r < 0) return classify_errno(what);  // f's errno, as a syscall leaves it
        result = r;
        return attempt_result::done;
    });
}

bool fd_ready_wait::poll(context& cx) {
    // Done as soon as the reactor reports the direction ready, as
    // readiness_awaitable (no syscall), keeping the report for a later
    // clear_fd_ready.
    return drive(claim_, cx, what_, [&](const ready_event& ev) {
        seen_ = {ev.ready, ev.tick};
        return attempt_result::done;
    });
}

void clear_fd_ready(io_source* s, fd_readiness seen) noexcept {
    // acquire: pairs with begin_op's release store, as in try_once; a
    // driver seen comes with its finished registration.
    driver* d = s->drv.load(std::memory_order_acquire);
    if (!d || !s->reg.is_registered()) return;  // never registered: no cache to clear
    // The tick makes it exact: an edge delivered after `seen` was read
    // bumped it, and then the bits stay (reactor::clear_readiness).
    d->io().clear_readiness(s->reg, ready_event{seen.ready, seen.tick});
}

fd_ready_wait ready_wait_of(const async_fd& fd, bool write, const char* what) {
    return fd_ready_wait(fd.source(what), write, what);
}

void clear_ready_of(const async_fd& fd, fd_readiness seen) noexcept {
    if (io_source* s = fd.io_.get()) clear_fd_ready(s, seen);
}
}  // namespace detail

async_fd async_fd::adopt(int fd) {
    const std::string what = "aspen::async_fd::adopt(" + std::to_string(fd) + ")";
    if (fd < 0) throw std::invalid_argument(what + ": not a file descriptor");
    struct stat st {};
    if (::fstat(fd, &st) != 0) detail::throw_errno(errno, what);
    // epoll_ctl refuses them with EPERM at the first operation; say why now.
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
        throw std::invalid_argument(what + ": a regular file or directory cannot be watched by epoll "
                                           "(its reads never wait); use aspen::spawn_blocking for file I/O");
    detail::make_nonblocking(fd, what);
    // Should the allocation throw, the fd stays the caller's (not closed).
    return async_fd(detail::io_handle(new detail::io_source(fd)));
}

int async_fd::release() {
    const char* what = "aspen::async_fd::release";
    detail::io_source* s = io_.require(what);
    // acquire: an operation awaitable lets go of its reference with acq_rel
    // (io_release), so its uses of the state happen before ours. Only this
    // object makes new operations, so the count cannot grow meanwhile.
    if (s->refs.load(std::memory_order_acquire) != 1)
        throw std::logic_error(std::string(what) + ": an operation on this fd still exists");
    io_.release();
    int fd = std::exchange(s->fd, -1);
    detail::io_release(s);  // the last reference: deregisters, keeps the fd open
    return fd;
}

}  // namespace aspen
