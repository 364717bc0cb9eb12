// unix_listener and unix_stream (the operation loop is drive(),
// io_source.hpp; reads and writes are tcp.cpp's transfer_awaitable).
#include <aspen/net/unix.hpp>

#include "io/io_source.hpp"
#include "io/unix_address.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

namespace aspen {

using detail::attempt_result;
using namespace std::chrono_literals;

using detail::describe;
using detail::make_address;
using detail::path_of;
using detail::query_path;
using detail::unix_address;

unix_listener unix_listener::bind(std::string_view path, int backlog) {
    const char* what = "aspen::unix_listener::bind";
    if (backlog < 0) throw std::invalid_argument("aspen::unix_listener::bind: the backlog must not be negative");
    unix_address a = make_address(path, what);
    detail::io_handle io = detail::make_io(detail::open_socket(AF_UNIX, SOCK_STREAM, what));
    if (::bind(io.fd(), reinterpret_cast<const sockaddr*>(&a.sa), a.len) != 0)
        detail::throw_errno(errno, describe(what, path));
    if (::listen(io.fd(), backlog) != 0) detail::throw_errno(errno, describe("aspen::unix_listener::listen", path));
    return unix_listener(std::move(io));
}

std::string unix_listener::local_path() const {
    const char* what = "aspen::unix_listener::local_path";
    return query_path(io_.require(what)->fd, ::getsockname, what);
}

bool unix_accept_awaitable::poll(context& cx) {
    int lfd = claim_.src->fd;
    return detail::drive(claim_, cx, what(), [&] {
        int fd = ::accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            accepted_ = detail::make_io(fd);
            return attempt_result::done;
        }
        // The connecting side went away while queued: take the next one.
        if (errno == ECONNABORTED) return attempt_result::again;
        return detail::classify_errno(what());  // EMFILE, ENFILE, ENOBUFS, ENOMEM throw
    });
}

unix_connect_awaitable::unix_connect_awaitable(std::string path) : path_(std::move(path)) {
    (void)make_address(path_, what());  // a bad path throws here, at the call
}

bool unix_connect_awaitable::poll(context& cx) {
    if (!io_) io_ = detail::make_io(detail::open_socket(AF_UNIX, SOCK_STREAM, what()));
    const unix_address a = make_address(path_, what());
    for (;;) {
        if (retry_ && !retry_->poll(cx)) return false;  // backlog full: waiting to try again
        if (::connect(io_.fd(), reinterpret_cast<const sockaddr*>(&a.sa), a.len) == 0) return true;
        int err = errno;
        if (err == EISCONN) return true;  // an interrupted attempt went through
        if (err == EINTR) continue;
        // Linux answers a non-blocking connect to a full backlog with EAGAIN
        // and nothing to wait on: poll again in a millisecond.
        if (err != EAGAIN) detail::throw_errno(err, describe("aspen::unix_stream::connect to", path_));
        if (retry_) retry_->reset(now() + 1ms);
        else retry_.emplace(now() + 1ms);
    }
}

std::pair<unix_stream, unix_stream> unix_stream::pair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0)
        detail::throw_errno(errno, "aspen::unix_stream::pair");
    auto [first, second] = detail::make_io_pair(fds);
    return {unix_stream(std::move(first)), unix_stream(std::move(second))};
}

unix_stream unix_stream::from_native(int fd) {
    detail::make_nonblocking(fd, "aspen::unix_stream::from_native");
    return unix_stream(detail::make_io(fd));
}

void unix_stream::shutdown(shutdown_mode how) {
    const char* what = "aspen::unix_stream::shutdown";
    detail::shutdown_socket(io_.require(what)->fd, how, what);
}

std::string unix_stream::local_path() const {
    const char* what = "aspen::unix_stream::local_path";
    return query_path(io_.require(what)->fd, ::getsockname, what);
}

std::string unix_stream::peer_path() const {
    const char* what = "aspen::unix_stream::peer_path";
    return query_path(io_.require(what)->fd, ::getpeername, what);
}

std::pair<unix_read_half, unix_write_half> unix_stream::into_split() && {
    detail::io_source* s = detail::split_source(io_, "aspen::unix_stream::into_split");
    return {unix_read_half(s), unix_write_half(s)};
}

std::string detail::unix_half::local_path() const {
    const char* what = io_.write_side() ? "aspen::unix_write_half::local_path" : "aspen::unix_read_half::local_path";
    return query_path(io_.require(what)->fd, ::getsockname, what);
}

std::string detail::unix_half::peer_path() const {
    const char* what = io_.write_side() ? "aspen::unix_write_half::peer_path" : "aspen::unix_read_half::peer_path";
    return query_path(io_.require(what)->fd, ::getpeername, what);
}

unix_credentials unix_stream::peer_credentials() const {
    const char* what = "aspen::unix_stream::peer_credentials";
    ucred c{};
    socklen_t len = sizeof c;
    if (::getsockopt(io_.require(what)->fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0) detail::throw_errno(errno, what);
    return {c.pid, c.uid, c.gid};
}

}  // namespace aspen
