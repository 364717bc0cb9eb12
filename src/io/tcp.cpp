// tcp_listener, tcp_stream and the stream awaitables (the operation loop is
// drive(), io_source.hpp).
#include <aspen/net/tcp.hpp>

#include "io/io_source.hpp"
#include "scheduler/scheduler.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace aspen {

using detail::attempt_result;

namespace {
// Asks the kernel to tell, with every read, how many bytes it left in the
// receive queue. Best effort: on a kernel or socket type without TCP_INQ
// (e.g. a Unix stream adopted by from_native) the flag stays clear and
// reads go on as before.
void enable_inq(detail::io_source& s) noexcept {
    int one = 1;
    s.reports_inq = ::setsockopt(s.fd, IPPROTO_TCP, TCP_INQ, &one, sizeof one) == 0;
}

// recv, and whether the receive queue was empty right after it (the
// TCP_CM_INQ message). The kernel reports a received FIN as one byte left,
// so end of stream is never mistaken for an empty queue.
ssize_t recv_reporting_inq(int fd, void* data, std::size_t size, bool& queue_empty) noexcept {
    iovec iov{data, size};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(fd, &msg, 0);
    queue_empty = false;
    if (n <= 0) return n;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != IPPROTO_TCP || c->cmsg_type != TCP_CM_INQ) continue;
        int left = 0;
        std::memcpy(&left, CMSG_DATA(c), sizeof left);
        queue_empty = left == 0;
    }
    return n;
}
// One syscall of a transfer: its result, as the syscall's.
ssize_t transfer_once(const detail::io_source& s, bool reading, bool peeking, std::byte* data, std::size_t size,
                      bool& queue_empty) noexcept {
    int fd = s.fd;
    if (!reading) return s.is_pipe ? detail::pipe_write(fd, data, size) : ::send(fd, data, size, MSG_NOSIGNAL);
    if (peeking) return ::recv(fd, data, size, MSG_PEEK);
    if (s.is_pipe) return ::read(fd, data, size);
    return s.reports_inq ? recv_reporting_inq(fd, data, size, queue_empty) : ::recv(fd, data, size, 0);
}
}  // namespace

bool transfer_awaitable::poll(context& cx) {
    bool exact = kind_ == kind::read_exact || kind_ == kind::write_all;
    // Nothing (left) to do. A stream read or write of 0 bytes completes at
    // once, as recv/send would, instead of waiting for readiness first (a
    // datagram of 0 bytes is a real datagram, so not for those).
    if ((exact || stream_) && done_ == size_) return true;
    bool peeking = kind_ == kind::peek;
    bool reading = kind_ == kind::read || kind_ == kind::read_exact || peeking;
    bool finished = detail::drive(claim_, cx, what_, [&] {
        std::size_t want = size_ - done_;
        bool queue_empty = false;
        ssize_t n = transfer_once(*claim_.src, reading, peeking, data_ + (peeking ? 0 : done_), want, queue_empty);
        if (n < 0) return detail::classify_errno(what_);
        done_ += static_cast<std::size_t>(n);
        // The peeked bytes are still there: the socket stays readable.
        if (peeking) return attempt_result::done;
        // On a stream, reads and writes stop short only when the receive
        // queue is empty / the send buffer full (Linux TCP and Unix stream
        // sockets, and pipes, copy until one or the other); the next edge
        // will say when that changes. A TCP read that filled the buffer knows it from TCP_INQ:
        // a client's read_exact of a whole reply then spares its next read
        // the EAGAIN syscall (tcp_echo: 0.96 of them per round trip before).
        // Datagram sockets tell nothing of the kind.
        bool drained = stream_ && n > 0 && (static_cast<std::size_t>(n) < want || queue_empty);
        // A read of 0 is end of stream: done, also for read_exact (short count).
        if (exact && done_ < size_ && (n > 0 || !reading))
            return drained ? attempt_result::progress_drained : attempt_result::again;
        return drained ? attempt_result::done_drained : attempt_result::done;
    });
    // The bytes just sent to a loopback peer are already in its receive
    // queue; if the peer is a task of this runtime, it is ready now.
    if (finished && !reading && claim_.src->loopback_peer)
        if (detail::scheduler* s = detail::current_scheduler()) s->poll_after_send();
    return finished;
}

bool readiness_awaitable::poll(context& cx) {
    // Done as soon as the reactor reports the direction ready: no syscall.
    return detail::drive(claim_, cx, what_, [] { return attempt_result::done; });
}

std::optional<std::size_t> detail::try_transfer_of(io_source& s, bool write, void* data, std::size_t size,
                                                   bool stream, const char* what) {
    if (stream && size == 0) return 0;
    std::size_t done = 0;
    bool finished = try_once(s, write, [&] {
        bool queue_empty = false;
        ssize_t n = transfer_once(s, !write, false, static_cast<std::byte*>(data), size, queue_empty);
        if (n < 0) return detail::classify_errno(what);
        done = static_cast<std::size_t>(n);
        return attempt_result::done;
    });
    if (!finished) return std::nullopt;
    return done;
}

std::optional<std::size_t> detail::try_transfer(io_source* s, bool write, void* data, std::size_t size,
                                                const char* what) {
    return try_transfer_of(*s, write, data, size, true, what);
}

namespace {
bool is_loopback_peer(const sockaddr_storage& peer, socklen_t len) noexcept {
    if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) return false;
    return socket_address::from_native(reinterpret_cast<const sockaddr*>(&peer), len).is_loopback();
}
}  // namespace

bool accept_awaitable::poll(context& cx) {
    int lfd = claim_.src->fd;
    return detail::drive(claim_, cx, what(), [&] {
        sockaddr_storage peer{};
        socklen_t len = sizeof peer;
        int fd = ::accept4(lfd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            accepted_ = detail::make_io(fd);
            accepted_.get()->loopback_peer = is_loopback_peer(peer, len);
            enable_inq(*accepted_.get());
            return attempt_result::done;
        }
        // The connection died in the queue (or a network error Linux
        // passes on to accept): it is not ours to report; take the next.
        switch (errno) {
            case ECONNABORTED:
            case EPROTO:
            case ENETDOWN:
            case ENOPROTOOPT:
            case EHOSTDOWN:
            case ENONET:
            case EHOSTUNREACH:
            case EOPNOTSUPP:
            case ENETUNREACH:
                return attempt_result::again;
            default:
                return detail::classify_errno(what());  // EMFILE, ENFILE, ENOBUFS, ENOMEM throw
        }
    });
}

namespace {
// e.g. "aspen::tcp_socket::connect to 127.0.0.1:80"
std::string connect_error(const char* what, const socket_address& addr) {
    return std::string(what) + " to " + addr.to_string();
}
}  // namespace

connect_awaitable::connect_awaitable(const socket_address& addr, std::optional<clock::duration> timeout)
    : addr_(addr), timeout_(timeout) {
    if (timeout_) timer_.emplace(now() + *timeout_);
}

connect_awaitable::connect_awaitable(detail::io_handle io, const socket_address& addr,
                                     std::optional<clock::duration> timeout, const char* what)
    : connect_awaitable(addr, timeout) {
    io_ = std::move(io);
    what_ = what;
}

void connect_awaitable::start() {
    started_ = true;
    // tcp_stream::connect opens its socket only here, in the first poll, so
    // that an awaitable never awaited holds no fd.
    if (!io_) io_ = detail::make_io(detail::open_socket(addr_.family(), SOCK_STREAM, what()));
    int fd = io_.fd();
    io_.get()->loopback_peer = addr_.is_loopback();
    enable_inq(*io_.get());
    claim_.attach(io_.get());
    if (::connect(fd, addr_.native(), addr_.native_size()) == 0) {
        connected_ = true;
        return;
    }
    int err = errno;  // before connect_error's allocations
    if (err != EINPROGRESS) detail::throw_errno(err, connect_error(what(), addr_));
}

bool connect_awaitable::poll(context& cx) {
    if (!started_) start();
    if (connected_) return true;
    int fd = io_.fd();
    bool done = detail::drive(claim_, cx, what(), [&] {
        int err = 0;
        socklen_t len = sizeof err;
        if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        if (err != 0) detail::throw_errno(err, connect_error(what(), addr_));
        // Writable without an error but not connected yet: wait on.
        sockaddr_storage peer{};
        socklen_t plen = sizeof peer;
        if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) == 0) return attempt_result::done;
        if (errno == ENOTCONN) return attempt_result::would_block;
        return detail::classify_errno(what());
    });
    if (done) {
        connected_ = true;
        return true;
    }
    if (timer_ && timer_->poll(cx)) {
        claim_.abandon();
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*timeout_).count();
        detail::throw_errno(ETIMEDOUT, connect_error(what(), addr_) + ": timed out after " +
                                           std::to_string(ms) + " ms");
    }
    return false;
}

tcp_stream tcp_stream::from_native(int fd) {
    detail::make_nonblocking(fd, "aspen::tcp_stream::from_native");
    detail::io_handle io = detail::make_io(fd);
    enable_inq(*io.get());
    return tcp_stream(std::move(io));
}

void detail::shutdown_socket(int fd, shutdown_mode how, const char* what) {
    int h = how == shutdown_mode::read ? SHUT_RD : how == shutdown_mode::write ? SHUT_WR : SHUT_RDWR;
    if (::shutdown(fd, h) != 0) detail::throw_errno(errno, what);
}

void tcp_stream::shutdown(shutdown_mode how) {
    const char* what = "aspen::tcp_stream::shutdown";
    detail::shutdown_socket(io_.require(what)->fd, how, what);
}

namespace {
void set_nodelay_of(int fd, bool on, const char* what) {
    detail::set_flag_option(fd, IPPROTO_TCP, TCP_NODELAY, on, what);
}
bool nodelay_of(int fd, const char* what) { return detail::flag_option(fd, IPPROTO_TCP, TCP_NODELAY, what); }
}  // namespace

void tcp_stream::set_nodelay(bool on) {
    const char* what = "aspen::tcp_stream::set_nodelay";
    set_nodelay_of(io_.require(what)->fd, on, what);
}

bool tcp_stream::nodelay() const {
    const char* what = "aspen::tcp_stream::nodelay";
    return nodelay_of(io_.require(what)->fd, what);
}

void tcp_stream::set_linger(std::optional<std::chrono::seconds> linger) {
    const char* what = "aspen::tcp_stream::set_linger";
    if (linger && (linger->count() < 0 || linger->count() > std::numeric_limits<int>::max()))
        throw std::invalid_argument(std::string(what) + ": the linger time must be 0 to INT_MAX seconds, not " +
                                    std::to_string(linger->count()));
    ::linger l{linger ? 1 : 0, linger ? static_cast<int>(linger->count()) : 0};
    if (::setsockopt(io_.require(what)->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l) != 0) detail::throw_errno(errno, what);
}

std::optional<std::chrono::seconds> tcp_stream::linger() const {
    const char* what = "aspen::tcp_stream::linger";
    ::linger l{};
    socklen_t len = sizeof l;
    if (::getsockopt(io_.require(what)->fd, SOL_SOCKET, SO_LINGER, &l, &len) != 0) detail::throw_errno(errno, what);
    if (!l.l_onoff) return std::nullopt;
    return std::chrono::seconds(l.l_linger);
}

void tcp_stream::set_ttl(std::uint32_t ttl) {
    const char* what = "aspen::tcp_stream::set_ttl";
    detail::set_ttl_of(io_.require(what)->fd, ttl, what);
}

std::uint32_t tcp_stream::ttl() const {
    const char* what = "aspen::tcp_stream::ttl";
    return detail::ttl_of(io_.require(what)->fd, what);
}

socket_address tcp_stream::local_addr() const {
    const char* what = "aspen::tcp_stream::local_addr";
    return detail::local_address(io_.require(what)->fd, what);
}

socket_address tcp_stream::peer_addr() const {
    const char* what = "aspen::tcp_stream::peer_addr";
    return detail::peer_address(io_.require(what)->fd, what);
}

std::pair<tcp_read_half, tcp_write_half> tcp_stream::into_split() && {
    detail::io_source* s = detail::split_source(io_, "aspen::tcp_stream::into_split");
    return {tcp_read_half(s), tcp_write_half(s)};
}

socket_address detail::tcp_half::local_addr() const {
    const char* what = io_.write_side() ? "aspen::tcp_write_half::local_addr" : "aspen::tcp_read_half::local_addr";
    return detail::local_address(io_.require(what)->fd, what);
}

socket_address detail::tcp_half::peer_addr() const {
    const char* what = io_.write_side() ? "aspen::tcp_write_half::peer_addr" : "aspen::tcp_read_half::peer_addr";
    return detail::peer_address(io_.require(what)->fd, what);
}

// Errors do not matter here: ENOTCONN only says the connection is already
// gone, which is what the peer is to learn.
void detail::stream_half::shut_write_quietly() noexcept {
    if (io_ && io_.write_side()) ::shutdown(io_.fd(), SHUT_WR);
}

detail::stream_half::~stream_half() { shut_write_quietly(); }

detail::stream_half& detail::stream_half::operator=(stream_half&& other) noexcept {
    if (this != &other) {
        shut_write_quietly();
        io_ = std::move(other.io_);
    }
    return *this;
}

void detail::stream_half::shutdown_write(const char* what) {
    if (::shutdown(io_.require(what)->fd, SHUT_WR) != 0) detail::throw_errno(errno, what);
}

void tcp_write_half::set_nodelay(bool on) {
    const char* what = "aspen::tcp_write_half::set_nodelay";
    set_nodelay_of(io_.require(what)->fd, on, what);
}

bool tcp_write_half::nodelay() const {
    const char* what = "aspen::tcp_write_half::nodelay";
    return nodelay_of(io_.require(what)->fd, what);
}

tcp_listener tcp_listener::bind(const socket_address& addr, int backlog) {
    const char* what = "aspen::tcp_listener::bind";
    if (backlog < 0) throw std::invalid_argument("aspen::tcp_listener::bind: the backlog must not be negative");
    detail::io_handle io = detail::make_io(detail::open_socket(addr.family(), SOCK_STREAM, what));
    int one = 1;
    // A restarted server can bind while old connections sit in TIME_WAIT.
    if (::setsockopt(io.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
        detail::throw_errno(errno, detail::describe(what, addr));
    detail::bind_socket(io.fd(), addr, what);
    if (::listen(io.fd(), backlog) != 0) detail::throw_errno(errno, detail::describe("aspen::tcp_listener::listen", addr));
    return tcp_listener(std::move(io));
}

socket_address tcp_listener::local_addr() const {
    const char* what = "aspen::tcp_listener::local_addr";
    return detail::local_address(io_.require(what)->fd, what);
}

}  // namespace aspen
