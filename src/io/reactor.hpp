// The reactor: one edge-triggered epoll instance, an eventfd to interrupt it,
// and per-fd `registration`s that cache readiness and hold the wakers of the
// (at most one) reader and (at most one) writer waiting on the fd.
//
// Readiness protocol (why no wake is lost with EPOLLET)
// ----------------------------------------------------
// Edge-triggered epoll reports a change once. The registration therefore
// remembers it: `state_` packs the readiness bits (low 32 bits) and a tick
// (high 32 bits) that the dispatcher bumps on every event it delivers.
//
//   I/O operation (leaf future), for direction d:
//     1. ev = poll_ready(reg, d, waker)   -> pending? return pending
//     2. do the syscall (read/write/accept...)
//     3. EAGAIN? clear_readiness(reg, ev), go to 1. Otherwise done.
//   poll_ready: if d's bits are set, return them (with the tick). Otherwise
//     store the waker under reg.mutex_, then load the bits AGAIN and return
//     them if set (else pending).
//   dispatcher (wait()): for an event on reg: RMW state_ (bits |= new, tick
//     += 1), then under reg.mutex_ take the waker(s) of the direction(s) the
//     event concerns, and wake them after dropping every lock.
//
// * An edge arriving after the syscall's EAGAIN but before clear_readiness is
//   not erased: it bumped the tick, so clear_readiness (a CAS that only
//   succeeds while the tick still equals ev.tick) leaves the bits set, and
//   step 1 sees them.
// * An edge arriving around step 1's waker store is not lost: either the
//   dispatcher's locked section follows the poller's (it finds the waker and
//   wakes it), or it precedes it; then its RMW happens-before the poller's
//   mutex acquisition, so the re-check load sees the bits (coherence).
// Readiness only ever clears on an observed EAGAIN, so bits left over from a
// consumed edge just cost one extra EAGAIN. Closed/error bits are sticky.
//
// Registration tokens (stale events and fd reuse)
// -----------------------------------------------
// epoll_event.data carries a token, never a pointer: slot index (low 32 bits)
// and that slot's generation (high 32 bits) in a table of registration
// pointers guarded by table_mutex_. deregister() removes the fd from epoll,
// then under table_mutex_ clears the slot and bumps its generation. The
// dispatcher looks a token up and delivers it while holding table_mutex_.
// Hence:
// * after deregister() returns no event reaches the registration (a dispatch
//   in progress finished before deregister got the mutex; later ones see the
//   new generation), so its memory may be freed at once;
// * an event harvested by epoll_wait before the deregister (possibly on
//   another thread), for an fd number that has since been closed, reopened
//   and registered again (maybe even in the same slot), carries the old
//   generation and is dropped: no stale readiness, no stale wake (ABA).
// Generations are 32 bits: a stale token could only match after 2^32
// re-registrations of one slot while it sits in a harvested, undispatched
// batch, which cannot happen.
//
// Threads: wait() (and dispatch()) by one thread at a time (the driver's
// parker); wake(), register_fd(), deregister(), poll_ready() and
// clear_readiness() from any thread. Lock order: table_mutex_ before a
// registration's mutex_. No waker is woken or dropped under either lock
// (waking or dropping the last reference may run arbitrary code, e.g. a
// task's destructor that deregisters its socket).
#pragma once

#include <aspen/waker.hpp>

#include <sys/epoll.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace aspen::detail {

class reactor;

enum class direction : std::uint8_t { read, write };

// Readiness bits (registration::readiness(), ready_event::ready).
namespace ready {
inline constexpr std::uint32_t readable = 1u << 0;
inline constexpr std::uint32_t writable = 1u << 1;
inline constexpr std::uint32_t read_closed = 1u << 2;   // EPOLLRDHUP / EPOLLHUP
inline constexpr std::uint32_t write_closed = 1u << 3;  // EPOLLHUP
inline constexpr std::uint32_t error = 1u << 4;         // EPOLLERR
// What makes a read / a write worth attempting.
inline constexpr std::uint32_t read_mask = readable | read_closed | error;
inline constexpr std::uint32_t write_mask = writable | write_closed | error;
// Never cleared by clear_readiness: the condition does not go away.
inline constexpr std::uint32_t sticky = read_closed | write_closed | error;
}  // namespace ready

// What poll_ready saw: the direction's readiness bits and the tick they were
// read at. Contextually true when the direction is ready.
struct ready_event {
    std::uint32_t ready = 0;
    std::uint32_t tick = 0;
    explicit operator bool() const noexcept { return ready != 0; }
};

// Per-fd state, embedded in the object that owns the fd (a socket). Not
// copyable or movable (the reactor's table points at it). Deregister before
// closing the fd; the destructor deregisters if that was forgotten.
class registration {
public:
    registration() noexcept = default;
    registration(const registration&) = delete;
    registration& operator=(const registration&) = delete;
    ~registration();

    int fd() const noexcept { return fd_; }
    bool is_registered() const noexcept { return owner_ != nullptr; }
    // Snapshot of the readiness bits (any thread; may be stale at once).
    std::uint32_t readiness() const noexcept {
        // relaxed: a snapshot of kernel-state flags; no memory is published
        // through them (wakers are exchanged under mutex_).
        return static_cast<std::uint32_t>(state_.load(std::memory_order_relaxed));
    }
    // The epoll token of the current registration (tests use it to forge a
    // stale event).
    std::uint64_t token() const noexcept { return token_; }

private:
    friend class reactor;
    reactor* owner_ = nullptr;  // set/cleared by register_fd/deregister
    int fd_ = -1;
    std::uint64_t token_ = 0;
    // low 32 bits: ready::* bits; high 32 bits: tick (see the protocol).
    std::atomic<std::uint64_t> state_{0};
    std::mutex mutex_;  // guards reader_ and writer_
    waker reader_;
    waker writer_;
};

class reactor {
public:
    // Creates the epoll instance and the eventfd; throws std::system_error.
    reactor();
    ~reactor();
    reactor(const reactor&) = delete;
    reactor& operator=(const reactor&) = delete;

    // Starts watching `fd` (must be non-blocking; stays owned by the caller)
    // for `interest` (ready::readable and/or ready::writable; hangup and
    // errors are always reported). Throws std::system_error (and leaves `reg`
    // unregistered) if epoll refuses the fd, std::logic_error if `reg` is
    // already registered.
    void register_fd(int fd, registration& reg, std::uint32_t interest = ready::readable | ready::writable);
    // Stops watching; after it returns no event is delivered to `reg` and its
    // wakers are dropped. Call it before closing the fd. Idempotent.
    void deregister(registration& reg) noexcept;

    // Leaf-future helper, see the protocol above: the direction's readiness
    // (true) or pending (false) with `w` stored to be woken on the next edge.
    ready_event poll_ready(registration& reg, direction d, const waker& w);
    // The direction's readiness as cached, storing no waker (try_read /
    // try_write, which do not wait): clear_readiness takes it as well.
    static ready_event peek_ready(const registration& reg, direction d) noexcept;
    // After the syscall said EAGAIN: forget the readiness `ev` reported,
    // unless an event arrived since (then keep it).
    void clear_readiness(registration& reg, ready_event ev) noexcept;
    // Drops the waker stored for direction d (an operation waiting there
    // was abandoned), so the registration keeps no reference to its task.
    void drop_waker(registration& reg, direction d) noexcept;
    // Wakes the stored reader and writer (their socket is being closed).
    // Touches only reg's own fields (under its mutex): any thread, also
    // for a registration that was never registered.
    static void wake_waiters(registration& reg) noexcept;

    // epoll_wait for up to timeout_ms (-1: no limit, 0: just look), then
    // deliver what it returned. Returns how many registration events were
    // delivered (eventfd wake-ups not counted). EINTR counts as 0 events.
    std::size_t wait(int timeout_ms);
    // Makes a concurrent or the next wait() return. Any thread.
    void wake() noexcept;
    // Registrations alive now (a snapshot; any thread).
    std::size_t registered() const noexcept { return registered_.load(std::memory_order_relaxed); }
    // A socket syscall on one of our registrations said EAGAIN (drive()):
    // counted for runtime_metrics::io_would_block. Any thread.
    void count_would_block() noexcept {
        // relaxed: a statistic; nothing is published through it.
        would_blocks_.fetch_add(1, std::memory_order_relaxed);
    }
    std::uint64_t would_blocks() const noexcept { return would_blocks_.load(std::memory_order_relaxed); }
    // Readiness events dispatch() delivered to live registrations (not the
    // eventfd's, not stale ones): runtime_metrics::io_ready_events.
    // relaxed: a statistic, as would_blocks.
    std::uint64_t ready_events() const noexcept { return ready_events_.load(std::memory_order_relaxed); }

    // wait()'s second half, exposed so tests can replay a stale event. Same
    // thread rule as wait().
    std::size_t dispatch(const epoll_event* events, int count);

private:
    struct slot {
        registration* reg = nullptr;
        std::uint32_t generation = 0;
    };
    static constexpr std::uint64_t wake_token = ~std::uint64_t{0};

    void drain_eventfd() noexcept;

    int epoll_fd_ = -1;
    int event_fd_ = -1;

    std::mutex table_mutex_;  // guards slots_ and free_
    std::vector<slot> slots_;
    std::vector<std::uint32_t> free_;
    // Registrations alive. relaxed everywhere: only a hint for busy workers,
    // which skip their non-blocking poll while it is 0 (a registration they
    // miss is polled on a later tick or by the next parker).
    std::atomic<std::size_t> registered_{0};
    std::atomic<std::uint64_t> would_blocks_{0};  // see count_would_block
    std::atomic<std::uint64_t> ready_events_{0};  // see ready_events

    // Buffers of the single wait()ing thread, reused (no allocation per event).
    std::vector<epoll_event> events_;
    std::vector<waker> to_wake_;
};

}  // namespace aspen::detail
