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

bool unix_datagram_awaitable::poll(context& cx) {
    if (kind_ == kind::send_to) return poll_send(cx);
    int fd = claim_.src->fd;
    return detail::drive(claim_, cx, what(), [&] {
        sockaddr_un from{};
        socklen_t len = sizeof from;
        // MSG_TRUNC: returns the datagram's real length, so truncation shows.
        int flags = MSG_TRUNC | (kind_ == kind::peek_from ? MSG_PEEK : 0);
        ssize_t n = ::recvfrom(fd, data_, size_, flags, reinterpret_cast<sockaddr*>(&from), &len);
        if (n < 0) return detail::classify_errno(what());
        result_.size = std::min(static_cast<std::size_t>(n), size_);
        result_.truncated = static_cast<std::size_t>(n) > size_;
        result_.path = detail::path_of(from, len);
        return attempt_result::done;
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
        ssize_t n = ::sendto(claim_.src->fd, data_, size_, MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&a.sa),
                             a.len);
        if (n >= 0) {
            result_.size = static_cast<std::size_t>(n);
            return true;
        }
        int err = errno;
        if (err == EINTR) continue;
        if (err != EAGAIN && err != EWOULDBLOCK) detail::throw_errno(err, detail::describe(what(), to_));
        if (retry_) retry_->reset(now() + 1ms);
        else retry_.emplace(now() + 1ms);
    }
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
