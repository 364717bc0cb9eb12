// Signals: the process-wide handler and the listeners' wait.
//
// Protocol. For each caught signal s, delivered[s] counts its deliveries.
// The handler (on whichever thread the kernel picks; async-signal-safe:
// lock-free atomics and write(2) only) adds one to delivered[s], then
// writes 1 to the shared eventfd. Nobody reads the eventfd: each write
// wakes its poll waiters, so every epoll registration of it (each listener
// registers a dup of its own) gets an edge per write, and the reactor
// caches it as readiness (reactor.hpp). A recv's attempt, run by drive()
// (io_source.hpp) whenever the registration is ready: if delivered[s]
// differs from the count the listener saw last, take the new count and
// complete; else clear the readiness and wait for the next edge.
//
// No delivery is missed: the count goes up before the write. An attempt
// that read the old count is followed by the write's edge; if that edge
// was dispatched before the attempt's clear_readiness, the clear fails (the
// tick moved) and the loop attempts again; if after, it sets the readiness
// and wakes the waker stored by the next poll_ready. Either way the
// listener reads the count again after the increment.
#include <aspen/signal.hpp>

#include "io/io_source.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>

namespace aspen {

namespace {
constexpr int max_signal = 65;  // Linux signal numbers run from 1 to 64
static_assert(NSIG <= max_signal, "a signal number would index past delivered[]");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "the signal handler may use only lock-free atomics");

std::atomic<std::uint64_t> delivered[max_signal];
// Set once, before the first handler is installed; never closed.
std::atomic<int> shared_event_fd{-1};
std::mutex install_mutex;
bool installed[max_signal];  // under install_mutex

extern "C" void on_signal(int s) {
    int saved = errno;  // the interrupted code may be about to read it
    // release: a listener that loads the new count (acquire) after the
    // wake below sees everything this thread did before (nothing else is
    // published; the order that matters is count, then write).
    delivered[s].fetch_add(1, std::memory_order_release);
    std::uint64_t one = 1;
    // relaxed: the fd was stored before sigaction installed this handler,
    // and sigaction (a syscall) orders the two.
    [[maybe_unused]] ssize_t n = ::write(shared_event_fd.load(std::memory_order_relaxed), &one, sizeof one);
    errno = saved;
}

void check_signal(int signum) {
    const std::string what = "aspen::signal_listener(" + std::to_string(signum) + ")";
    if (signum <= 0 || signum >= NSIG) throw std::invalid_argument(what + ": not a signal number");
    switch (signum) {
        case SIGKILL:
        case SIGSTOP:
            throw std::invalid_argument(what + ": SIGKILL and SIGSTOP cannot be caught");
        case SIGSEGV:
        case SIGBUS:
        case SIGFPE:
        case SIGILL:
            throw std::invalid_argument(what + ": a fault signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL) cannot be "
                                               "waited for: the program cannot go on after one");
        default:
            break;
    }
}

// Installs the handler for signum if it is not yet; returns the eventfd.
int install(int signum) {
    std::lock_guard lock(install_mutex);
    // relaxed: under install_mutex, which orders it with the store below.
    int efd = shared_event_fd.load(std::memory_order_relaxed);
    if (efd < 0) {
        efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (efd < 0) detail::throw_errno(errno, "aspen::signal_listener: eventfd");
        // relaxed: see on_signal; readers outside the mutex are handlers,
        // installed by a sigaction after this store.
        shared_event_fd.store(efd, std::memory_order_relaxed);
    }
    if (!installed[signum]) {
        struct sigaction sa {};
        sa.sa_handler = &on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (::sigaction(signum, &sa, nullptr) != 0)
            detail::throw_errno(errno, "aspen::signal_listener(" + std::to_string(signum) + "): sigaction");
        installed[signum] = true;
    }
    return efd;
}
}  // namespace

signal_listener::signal_listener(int signum) : signum_(signum) {
    check_signal(signum);
    int efd = install(signum);
    int mine = ::fcntl(efd, F_DUPFD_CLOEXEC, 0);
    if (mine < 0) detail::throw_errno(errno, "aspen::signal_listener: dup of the eventfd");
    io_ = detail::make_io(mine);
    // acquire: pairs with on_signal's release. Read after the handler is
    // installed, so every later delivery is counted past this value.
    io_.get()->signals_seen = delivered[signum].load(std::memory_order_acquire);
}

bool signal_recv_awaitable::poll(context& cx) {
    return detail::drive(claim_, cx, what(), [&] {
        // acquire: pairs with on_signal's release.
        std::uint64_t now = delivered[signum_].load(std::memory_order_acquire);
        std::uint64_t& seen = claim_.src->signals_seen;
        // Nothing new: clear the readiness and wait for the next edge (no
        // syscall was made, so it is not counted as an EAGAIN).
        if (now == seen) return detail::attempt_result::progress_drained;
        seen = now;
        return detail::attempt_result::done;
    });
}

namespace {
task<void> wait_for(signal_listener l) { co_await l.recv(); }
}  // namespace

// Not a coroutine itself: the listener exists from the call on, so a
// SIGINT between the call and the first await is not missed.
task<void> ctrl_c() { return wait_for(signal_listener(SIGINT)); }

}  // namespace aspen
