// Socket state: ownership, the wait-slot claim and lazy registration (the
// protocol is at the top of io_source.hpp).
#include "io/io_source.hpp"

#include <aspen/time.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace aspen::detail {

io_source::~io_source() {
    // Deregister before close: the fd number may be reused at once. A
    // registration whose reactor is gone (the runtime ended first) was
    // already unlinked by the reactor's destructor.
    // relaxed: the last release (acq_rel) ordered every use before this.
    driver* d = drv.load(std::memory_order_relaxed);
    if (d && reg.is_registered()) d->io().deregister(reg);
    if (fd >= 0) ::close(fd);  // -1: async_fd::release gave it back
}

void io_retain(io_source* s) noexcept {
    // relaxed: the caller already holds a reference (the socket object the
    // operation was made from), so the count cannot reach zero meanwhile.
    s->refs.fetch_add(1, std::memory_order_relaxed);
}

void io_release(io_source* s) noexcept {
    // acq_rel: the last owner sees every other owner's use of the state
    // before it closes the fd and frees it.
    if (s->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete s;
}

void throw_closed(const char* what) {
    throw std::system_error(ECANCELED, std::generic_category(),
                            std::string(what) +
                                ": the socket, pipe or descriptor was closed while this operation waited on it");
}

io_handle make_io(int fd) {
    try {
        return io_handle(new io_source(fd));
    } catch (...) {
        ::close(fd);
        throw;
    }
}

std::pair<io_handle, io_handle> make_io_pair(const int (&fds)[2]) {
    io_handle first;
    try {
        first = make_io(fds[0]);
    } catch (...) {
        ::close(fds[1]);
        throw;
    }
    return {std::move(first), make_io(fds[1])};
}

namespace {
// Marks the closed directions, wakes the waiters, drops the owner's
// reference. release: an operation that reads `closed` with acquire sees
// the socket's last writes. The waiters woken throw ECANCELED if their
// direction is closed, else wait again; see "lifetime" in io_source.hpp
// for why none is missed.
void close_directions(io_source* s, bool read, bool write) noexcept {
    if (!s) return;
    if (read) s->closed[0].store(true, std::memory_order_release);
    if (write) s->closed[1].store(true, std::memory_order_release);
    reactor::wake_waiters(s->reg);
    io_release(s);
}
}  // namespace

void io_close(io_source* s) noexcept { close_directions(s, true, true); }

void io_close_side(io_source* s, bool write) noexcept { close_directions(s, !write, write); }

int io_fd(const io_source* s) noexcept { return s ? s->fd : -1; }

io_source* split_source(io_handle& io, const char* what) {
    io_source* s = io.require(what);
    io_retain(s);
    io.release();
    return s;
}

io_source* io_require(io_source* s, const char* what) {
    if (!s)
        throw std::logic_error(std::string(what) +
                               ": the object is empty (moved from, split, released or default-constructed)");
    return s;
}

void begin_op(io_claim& c, const char* what) {
    io_source& s = *c.src;
    // acquire: pairs with end_op's / abandon's release, so the previous
    // holder's last touch of the waker slot happened before ours.
    if (s.busy[c.write].exchange(true, std::memory_order_acquire))
        throw std::logic_error(std::string(what) + ": another " + (c.write ? "write" : "read") +
                               "-side operation is already in progress on this descriptor (one at a time)");
    c.held = true;
    // acquire: pairs with the release below; the registration it published
    // is complete before we poll it.
    if (s.drv.load(std::memory_order_acquire)) {
        if (s.reg.is_registered()) return;
        end_op(c);
        throw std::logic_error(std::string(what) + ": the runtime this socket was used on has been destroyed");
    }
    try {
        std::lock_guard lock(s.reg_mutex);
        // relaxed: under reg_mutex, which orders it with the store below.
        if (s.drv.load(std::memory_order_relaxed)) return;
        driver& d = current_driver(what);
        d.io().register_fd(s.fd, s.reg);
        // release: pairs with begin_op's acquire; a poll that sees the driver
        // sees the finished registration.
        s.drv.store(&d, std::memory_order_release);
    } catch (...) {
        end_op(c);
        throw;
    }
}

void end_op(io_claim& c) noexcept {
    c.held = false;
    // release: see begin_op.
    c.src->busy[c.write].store(false, std::memory_order_release);
}

void io_claim::abandon() noexcept {
    io_source& s = *src;
    // relaxed: this operation's first poll saw the driver (see drive()).
    // The driver outlives every task (and so every awaitable) of its
    // runtime; drop_waker touches only the registration's own fields.
    if (driver* d = s.drv.load(std::memory_order_relaxed)) d->io().drop_waker(s.reg, write ? direction::write : direction::read);
    end_op(*this);
}

int open_socket(int family, int type, const char* what) {
    int fd = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) throw_errno(errno, std::string(what) + ": socket");
    return fd;
}

void bind_socket(int fd, const socket_address& addr, const char* what) {
    if (::bind(fd, addr.native(), addr.native_size()) != 0) throw_errno(errno, describe(what, addr));
}

socket_address local_address(int fd, const char* what) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) throw_errno(errno, what);
    return socket_address::from_native(reinterpret_cast<sockaddr*>(&ss), len);
}

socket_address peer_address(int fd, const char* what) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) throw_errno(errno, what);
    return socket_address::from_native(reinterpret_cast<sockaddr*>(&ss), len);
}

std::string describe(const char* what, const socket_address& addr) {
    return std::string(what) + " " + addr.to_string();
}

void make_nonblocking(int fd, const std::string& what) {
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || (!(flags & O_NONBLOCK) && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0))
        throw_errno(errno, what + ": fcntl(O_NONBLOCK)");
}

void set_flag_option(int fd, int level, int name, bool on, const char* what) {
    int v = on ? 1 : 0;
    if (::setsockopt(fd, level, name, &v, sizeof v) != 0) throw_errno(errno, what);
}

bool flag_option(int fd, int level, int name, const char* what) {
    int v = 0;
    socklen_t len = sizeof v;
    if (::getsockopt(fd, level, name, &v, &len) != 0) throw_errno(errno, what);
    return v != 0;
}

namespace {
// The level and option of a socket's unicast TTL: by its address family.
std::pair<int, int> ttl_option(int fd, const char* what) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) throw_errno(errno, what);
    if (ss.ss_family == AF_INET6) return {IPPROTO_IPV6, IPV6_UNICAST_HOPS};
    return {IPPROTO_IP, IP_TTL};
}
}  // namespace

void set_ttl_of(int fd, std::uint32_t ttl, const char* what) {
    // The kernel takes 1 to 255 (IPv6: also -1, "the route's default",
    // which an unsigned value cannot ask for); larger values would wrap.
    if (ttl == 0 || ttl > 255)
        throw_errno(EINVAL, std::string(what) + ": the TTL must be 1 to 255, not " + std::to_string(ttl));
    auto [level, name] = ttl_option(fd, what);
    int v = static_cast<int>(ttl);
    if (::setsockopt(fd, level, name, &v, sizeof v) != 0) throw_errno(errno, what);
}

std::uint32_t ttl_of(int fd, const char* what) {
    auto [level, name] = ttl_option(fd, what);
    int v = 0;
    socklen_t len = sizeof v;
    if (::getsockopt(fd, level, name, &v, &len) != 0) throw_errno(errno, what);
    return static_cast<std::uint32_t>(v);
}

}  // namespace aspen::detail
