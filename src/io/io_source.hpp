// A socket's internal state and the loop every socket operation runs.
//
// Operation protocol (the reactor's readiness protocol, reactor.hpp, plus
// the wait-slot claim of include/aspen/detail/io_handle.hpp):
//   first poll: claim the direction's slot (std::logic_error if another
//     operation holds it); register the fd with the calling task's driver
//     if it is not registered yet (a socket may be created outside a task).
//   each poll: loop { ev = poll_ready(d, waker) -> pending? return pending;
//     attempt the syscall; would block -> clear_readiness(ev), loop; retry
//     (EINTR, progress made) -> loop; done / error -> free the slot, return
//     ready }.
// The syscall happens only inside a poll that then returns ready (or goes on
// looping), so a completed syscall's result always reaches the task: an
// abort can only land between polls, when nothing has been taken from the
// kernel that the task has not seen. That is what makes read, accept and
// recv_from cancel-safe.
//
// Closing while an operation waits (lifetime)
// -------------------------------------------
// The state is reference-counted: one reference for the socket object, one
// per operation awaitable (io_claim, construction to destruction). The fd is closed and
// deregistered when the last reference goes, so no operation ever runs a
// syscall on a closed (and maybe reused) fd number. Destroying the socket
// while another task waits on it (e.g. the runtime's shutdown destroys the
// owner's frame first) sets `closed` and wakes the waiters; their next poll
// throws std::system_error(ECANCELED). No wake is lost: the closer sets
// `closed` before taking the wakers under the registration's mutex; an
// operation stores its waker under that mutex and re-checks `closed` after,
// so either the closer finds the waker or the operation sees the flag.
// A stream split into halves (tcp_stream::into_split) has one owner per
// direction: a half that goes sets only its direction's flag, so only that
// direction's operations throw; the wake reaches both waiters, and the other
// direction's operation, finding its flag clear, just waits again.
#pragma once

#include "io/driver.hpp"
#include "io/reactor.hpp"

#include <aspen/detail/io_handle.hpp>
#include <aspen/net/address.hpp>
#include <aspen/waker.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

namespace aspen {
enum class shutdown_mode : std::uint8_t;  // aspen/net/tcp.hpp
}  // namespace aspen

namespace aspen::detail {

struct io_source {
    explicit io_source(int f) noexcept : fd(f) {}
    ~io_source();  // deregisters (if registered), closes fd (unless -1): the last reference only

    int fd;
    // The driver the fd is registered with; null until the first operation
    // (a socket may be created outside a task). Written once, under
    // reg_mutex, with release; read with acquire by first polls.
    std::atomic<driver*> drv{nullptr};
    std::mutex reg_mutex;
    registration reg;
    // busy[0]: the read slot is claimed; busy[1]: the write slot.
    std::atomic<bool> busy[2] = {false, false};
    std::atomic<std::uint32_t> refs{1};  // the socket + each operation awaitable
    // closed[0]: the owner of the read side is gone; closed[1]: of the write
    // side. The socket object owns both; a split half owns one.
    std::atomic<bool> closed[2] = {false, false};
    // A stream whose peer has a loopback address (set by connect / accept
    // before the socket is shared): its sends may make a task of this very
    // runtime ready, which poll_after_send then harvests on this worker.
    bool loopback_peer = false;
    // A TCP stream whose reads report the bytes left in the receive queue
    // (TCP_INQ, Linux 4.18+; set by enable_inq before the socket is shared).
    // A read that fills the caller's buffer then still learns whether it
    // drained the queue, as a short read does.
    bool reports_inq = false;
    // A signal_listener's deliveries seen so far (src/io/signal.cpp): here,
    // so that it lives as long as a recv that updates it. Written only by
    // the one read-side operation in progress.
    std::uint64_t signals_seen = 0;
    // A pipe end (src/io/pipe.cpp; set before the pipe is shared): reads
    // and writes are read(2) / write(2) instead of recv / send, and a write
    // keeps SIGPIPE from the process (pipe_write).
    bool is_pipe = false;
    // A child process's pidfd (src/io/process.cpp): how the child ended,
    // once its status was collected (encoded there), else -1. Here, so that
    // it lives as long as a wait that sets it. Written (release) by
    // whichever collected the status: a wait, a try_wait or the child's
    // drop, each under the read slot; read with acquire.
    std::atomic<int> exit_info{-1};
};

// write(2) to a pipe, without SIGPIPE: -1 with errno EPIPE if the reading
// end is closed (src/io/pipe.cpp).
ssize_t pipe_write(int fd, const void* data, std::size_t size) noexcept;

// try_read / try_write of any socket (detail::try_transfer is this with
// `stream`), and a connected datagram socket's try_recv / try_send:
// without `stream`, size 0 is a real (empty) datagram, not "done at once",
// as in transfer_awaitable (tcp.cpp).
std::optional<std::size_t> try_transfer_of(io_source& s, bool write, void* data, std::size_t size, bool stream,
                                           const char* what);

// Throws the ECANCELED error of an operation whose socket was closed.
[[noreturn]] void throw_closed(const char* what);
inline bool is_closed(const io_source& s, bool write) noexcept {
    // acquire: pairs with io_close's / io_close_side's release store (see
    // "lifetime" above).
    return s.closed[write].load(std::memory_order_acquire);
}

// Takes ownership of fd (closes it if the allocation throws).
io_handle make_io(int fd);
// The same for both fds of a pair (a socketpair, a pipe): both closed if
// either allocation throws.
std::pair<io_handle, io_handle> make_io_pair(const int (&fds)[2]);

// What a syscall attempt reports to drive().
enum class attempt_result {
    done,         // finished (result or error stored by the attempt)
    done_drained, // finished, and the syscall showed the kernel buffer is now
                  // empty (a short stream read) or full (a short stream
                  // write): clear readiness too, sparing the next operation
                  // a syscall that would only say EAGAIN
    would_block,  // EAGAIN: clear readiness, wait for the next edge
    progress_drained,  // partial progress, and drained as above: the same
                       // as would_block without a syscall that found nothing
    again,        // EINTR or partial progress: try again now
};

// into_split's share-out: the stream's reference becomes the read half's,
// the write half takes one more, and `io` is left empty. Operations
// already in progress keep their own. std::logic_error if io is empty.
io_source* split_source(io_handle& io, const char* what);

// Claims c's slot and registers the source if needed (first poll only).
void begin_op(io_claim& c, const char* what);
void end_op(io_claim& c) noexcept;

[[noreturn]] inline void throw_errno(int err, const std::string& what) {
    throw std::system_error(err, std::generic_category(), what);
}

// attempt(ev) for an attempt that wants the readiness it runs on (a
// readiness-only wait keeps it, so that its caller can clear exactly that
// readiness later: detail::fd_ready_wait), else attempt().
template <class Attempt>
attempt_result run_attempt(Attempt& attempt, const ready_event& ev) {
    if constexpr (std::is_invocable_v<Attempt&, const ready_event&>) return attempt(ev);
    else return attempt();
}

// The loop above. `attempt` returns an attempt_result and throws
// std::system_error on a failed syscall. Returns true when done.
template <class Attempt>
bool drive(io_claim& c, context& cx, const char* what, Attempt&& attempt) {
    if (!c.held) begin_op(c, what);
    io_source& s = *c.src;
    // relaxed: begin_op (first poll) loaded it with acquire; later polls of
    // this operation are ordered after the first by the task's hand-offs.
    reactor& r = s.drv.load(std::memory_order_relaxed)->io();
    direction d = c.write ? direction::write : direction::read;
    try {
        for (;;) {
            if (is_closed(s, c.write)) throw_closed(what);
            ready_event ev = r.poll_ready(s.reg, d, cx.waker());
            if (!ev) {
                // After the waker store: see "lifetime" above.
                if (is_closed(s, c.write)) throw_closed(what);
                return false;
            }
            switch (run_attempt(attempt, ev)) {
                case attempt_result::done:
                    end_op(c);
                    return true;
                case attempt_result::done_drained:
                    r.clear_readiness(s.reg, ev);
                    end_op(c);
                    return true;
                case attempt_result::would_block:
                    r.count_would_block();
                    [[fallthrough]];
                case attempt_result::progress_drained:
                    r.clear_readiness(s.reg, ev);
                    break;
                case attempt_result::again:
                    break;
            }
        }
    } catch (...) {
        end_op(c);
        throw;
    }
}

// The never-waiting counterpart of drive(), for try_read / try_write and
// the datagram sockets' try_recv_from / try_send_to / try_recv / try_send:
// `attempt` (the same syscall attempt the operation runs in drive()) once,
// unless the cached readiness already says the direction is not ready.
// Returns false when nothing could be done now; then the readiness the
// attempt found stale is cleared, so that readable() / writable() wait for
// the next edge. Claims no slot and stores no waker (it may run beside a
// waiting operation, from any thread, also outside a runtime), and spends
// no coop budget. A socket no operation has registered yet (or whose
// runtime is gone) has no cache: then only the syscall can tell. done and
// done_drained both count as done: nothing waits here that a cleared
// readiness would spare a syscall.
template <class Attempt>
bool try_once(io_source& s, bool write, Attempt&& attempt) {
    // acquire: pairs with begin_op's release store; a driver seen comes
    // with its finished registration. A runtime that is gone unregistered
    // it (its driver is not touched then).
    driver* d = s.drv.load(std::memory_order_acquire);
    bool cached = d && s.reg.is_registered();
    direction dir = write ? direction::write : direction::read;
    ready_event ev{};
    if (cached) {
        ev = reactor::peek_ready(s.reg, dir);
        if (!ev) return false;  // known not ready: no syscall
    }
    for (;;) {
        switch (attempt()) {
            case attempt_result::done:
            case attempt_result::done_drained:
                return true;
            case attempt_result::again:
                continue;
            // (progress_drained comes only from multi-syscall attempts,
            // which do not run here.)
            case attempt_result::would_block:
            case attempt_result::progress_drained:
                if (cached) d->io().clear_readiness(s.reg, ev);
                return false;
        }
    }
}

// Helpers shared by the socket types (each throws std::system_error naming
// `what` on failure).
int open_socket(int family, int type, const char* what);  // NONBLOCK|CLOEXEC
void bind_socket(int fd, const socket_address& addr, const char* what);
socket_address local_address(int fd, const char* what);
socket_address peer_address(int fd, const char* what);
// e.g. "aspen::tcp_stream::connect to 127.0.0.1:80"
std::string describe(const char* what, const socket_address& addr);
// Sets O_NONBLOCK (no syscall if it is set already); throws
// std::system_error naming `what` on failure.
void make_nonblocking(int fd, const std::string& what);
// shutdown(2) of a stream socket in aspen's terms (tcp.cpp).
void shutdown_socket(int fd, shutdown_mode how, const char* what);
// A boolean socket option (TCP_NODELAY, SO_BROADCAST, ...).
void set_flag_option(int fd, int level, int name, bool on, const char* what);
bool flag_option(int fd, int level, int name, const char* what);
// IP_TTL, or IPV6_UNICAST_HOPS on an IPv6 socket.
void set_ttl_of(int fd, std::uint32_t ttl, const char* what);
std::uint32_t ttl_of(int fd, const char* what);

// errno after a failed syscall: would_block, again, or throws.
inline attempt_result classify_errno(const char* what) {
    int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK) return attempt_result::would_block;
    if (err == EINTR) return attempt_result::again;
    throw_errno(err, what);
}

// One recvfrom of a datagram socket (recv_from, peek_from and try_recv_from
// of udp_socket and unix_datagram): MSG_TRUNC makes it return the
// datagram's real length, so a datagram longer than the buffer shows as
// truncated. The sender's address goes to from / from_len; on done, size
// and truncated say what was stored.
inline attempt_result recvfrom_once(int fd, void* data, std::size_t size, bool peek, sockaddr* from,
                                    socklen_t& from_len, std::size_t& stored, bool& truncated, const char* what) {
    int flags = MSG_TRUNC | (peek ? MSG_PEEK : 0);
    ssize_t n = ::recvfrom(fd, data, size, flags, from, &from_len);
    if (n < 0) return classify_errno(what);
    stored = std::min(static_cast<std::size_t>(n), size);
    truncated = static_cast<std::size_t>(n) > size;
    return attempt_result::done;
}

}  // namespace aspen::detail
