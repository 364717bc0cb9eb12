// unix_datagram: receives on the operation loop (drive(), io_source.hpp);
// send_to on a retry timer (see poll_send); connected send and recv are
// tcp.cpp's transfer_awaitable.
#include <aspen/net/unix_datagram.hpp>

#include "io/io_source.hpp"
#include "io/unix_address.hpp"

#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <string_view>

namespace aspen {

using detail::attempt_result;
using namespace std::chrono_literals;

unix_datagram_awaitable::unix_datagram_awaitable(detail::io_source* s, kind k, void* data, std::size_t size,
                                                 std::string to)
    : claim_(s, k == kind::send_to), data_(data), size_(size), to_(std::move(to)), kind_(k) {
    if (k == kind::send_to) (void)detail::make_address(to_, what());  // a bad path throws here, at the call
}

const char* unix_datagram_awaitable::what() const noexcept {
    switch (kind_) {
        case kind::send_to:
            return "aspen::unix_datagram::send_to";
        case kind::peek_from:
            return "aspen::unix_datagram::peek_from";
        default:
            return "aspen::unix_datagram::recv_from";
    }
}

namespace {
// One recvfrom (recv_from, peek_from) / one sendto to a path: what the
// awaitables attempt and the try_ calls attempt once, so both report alike.
attempt_result recv_from_once(int fd, void* data, std::size_t size, bool peek, unix_datagram::received& out,
                              const char* what) {
    sockaddr_un from{};
    socklen_t len = sizeof from;
    attempt_result r = detail::recvfrom_once(fd, data, size, peek, reinterpret_cast<sockaddr*>(&from), len,
                                             out.size, out.truncated, what);
    if (r == attempt_result::done) out.path = detail::path_of(from, len);
    return r;
}

// would_block: the receiver's queue (or this socket's send buffer) is full.
attempt_result send_to_once(int fd, const void* data, std::size_t size, const detail::unix_address& a,
                            std::string_view path, std::size_t& sent, const char* what) {
    ssize_t n = ::sendto(fd, data, size, MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&a.sa), a.len);
    if (n >= 0) {
        sent = static_cast<std::size_t>(n);
        return attempt_result::done;
    }
    int err = errno;
    if (err == EINTR) return attempt_result::again;
    if (err == EAGAIN || err == EWOULDBLOCK) return attempt_result::would_block;
    detail::throw_errno(err, detail::describe(what, path));
}
}  // namespace

bool unix_datagram_awaitable::poll(context& cx) {
    if (kind_ == kind::send_to) return poll_send(cx);
    int fd = claim_.src->fd;
    return detail::drive(claim_, cx, what(), [&] {
        return recv_from_once(fd, data_, size_, kind_ == kind::peek_from, result_, what());
    });
}

// A sendto to a receiver whose queue is full (net.unix.max_dgram_qlen
// datagrams, 10 by default) fails with EAGAIN, yet the kernel arranges a
// wake-up for when the receiver makes room only for a socket connected to
// that receiver; the sending socket itself stays writable. Waiting on the
// reactor could wait forever, so the send is tried again every
// millisecond (so a send_to to a receiver that keeps its queue full moves
// about ten datagrams a millisecond; connect and send are faster then). No slot is claimed (no waker is stored on the
// socket), so sends to several receivers from several tasks may wait at
// once.
bool unix_datagram_awaitable::poll_send(context& cx) {
    const detail::unix_address a = detail::make_address(to_, what());
    for (;;) {
        if (detail::is_closed(*claim_.src, true)) detail::throw_closed(what());
        if (retry_ && !retry_->poll(cx)) return false;
        attempt_result r = send_to_once(claim_.src->fd, data_, size_, a, to_, result_.size, what());
        if (r == attempt_result::done) return true;
        if (r == attempt_result::again) continue;
        if (retry_) retry_->reset(now() + 1ms);
        else retry_.emplace(now() + 1ms);
    }
}

std::optional<unix_datagram::received> unix_datagram::try_recv_from(void* data, std::size_t size) {
    const char* what = "aspen::unix_datagram::try_recv_from";
    detail::io_source& s = *io_.require(what);
    received r;
    if (!detail::try_once(s, false, [&] { return recv_from_once(s.fd, data, size, false, r, what); }))
        return std::nullopt;
    return r;
}

// Not try_once: the reported write readiness says nothing about the
// receiver's queue (see poll_send), so it is neither consulted nor
// cleared (the header says why).
std::optional<std::size_t> unix_datagram::try_send_to(const void* data, std::size_t size, std::string_view path) {
    const char* what = "aspen::unix_datagram::try_send_to";
    int fd = io_.require(what)->fd;
    const detail::unix_address a = detail::make_address(path, what);
    std::size_t sent = 0;
    for (;;) {
        attempt_result r = send_to_once(fd, data, size, a, path, sent, what);
        if (r == attempt_result::done) return sent;
        if (r != attempt_result::again) return std::nullopt;
    }
}

std::optional<std::size_t> unix_datagram::try_recv(void* data, std::size_t size) {
    const char* what = "aspen::unix_datagram::try_recv";
    return detail::try_transfer_of(*io_.require(what), false, data, size, false, what);
}

std::optional<std::size_t> unix_datagram::try_send(const void* data, std::size_t size) {
    const char* what = "aspen::unix_datagram::try_send";
    return detail::try_transfer_of(*io_.require(what), true, const_cast<void*>(data), size, false, what);
}

unix_datagram unix_datagram::bind(std::string_view path) {
    const char* what = "aspen::unix_datagram::bind";
    detail::unix_address a = detail::make_address(path, what);
    detail::io_handle io = detail::make_io(detail::open_socket(AF_UNIX, SOCK_DGRAM, what));
    if (::bind(io.fd(), reinterpret_cast<const sockaddr*>(&a.sa), a.len) != 0)
        detail::throw_errno(errno, detail::describe(what, path));
    return unix_datagram(std::move(io));
}

unix_datagram unix_datagram::unbound() {
    return unix_datagram(detail::make_io(detail::open_socket(AF_UNIX, SOCK_DGRAM, "aspen::unix_datagram::unbound")));
}

std::pair<unix_datagram, unix_datagram> unix_datagram::pair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0)
        detail::throw_errno(errno, "aspen::unix_datagram::pair");
    auto [first, second] = detail::make_io_pair(fds);
    return {unix_datagram(std::move(first)), unix_datagram(std::move(second))};
}

unix_datagram unix_datagram::from_native(int fd) {
    detail::make_nonblocking(fd, "aspen::unix_datagram::from_native");
    return unix_datagram(detail::make_io(fd));
}

void unix_datagram::connect(std::string_view path) {
    const char* what = "aspen::unix_datagram::connect to";
    detail::unix_address a = detail::make_address(path, what);
    if (::connect(io_.require(what)->fd, reinterpret_cast<const sockaddr*>(&a.sa), a.len) != 0)
        detail::throw_errno(errno, detail::describe(what, path));
}

void unix_datagram::shutdown(shutdown_mode how) {
    const char* what = "aspen::unix_datagram::shutdown";
    detail::shutdown_socket(io_.require(what)->fd, how, what);
}

std::string unix_datagram::local_path() const {
    const char* what = "aspen::unix_datagram::local_path";
    return detail::query_path(io_.require(what)->fd, ::getsockname, what);
}

std::string unix_datagram::peer_path() const {
    const char* what = "aspen::unix_datagram::peer_path";
    return detail::query_path(io_.require(what)->fd, ::getpeername, what);
}

}  // namespace aspen
