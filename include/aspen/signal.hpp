// Unix signals as awaitables, as Tokio's tokio::signal:
//
//   co_await aspen::ctrl_c();                   // SIGINT: start a graceful shutdown
//
//   aspen::signal_listener term(SIGTERM);
//   for (;;) { co_await term.recv(); reload(); }
//
// A listener counts the deliveries of its signal from its construction on.
// recv() completes once the signal was delivered since the previous recv
// (or since the construction); several deliveries in between complete one
// recv (they coalesce, as in Tokio). Any number of listeners, on any
// runtimes, may listen to the same signal; each sees every delivery.
//
// The first listener of a signal installs aspen's handler for it, for the
// rest of the process (SA_RESTART; the previous disposition is not called
// and not restored): a SIGINT or SIGTERM then no longer ends the process by
// itself, so a program that listens must act on what it receives. The
// handler only counts and writes to an eventfd (async-signal-safe); the
// tasks run as usual on the workers. SIGKILL and SIGSTOP cannot be caught,
// and SIGSEGV, SIGBUS, SIGFPE and SIGILL are refused (the program cannot
// continue after them): std::invalid_argument, as for a number that is no
// signal.
//
// recv is cancel-safe: an aborted recv takes nothing, and a delivery it did
// not report is reported by the next one. One recv at a time per listener
// (a second one throws std::logic_error); each spends one unit of the
// task's coop budget. A listener registers with the runtime of the first
// task that awaits it and stays with it, as a socket does
// (aspen/net/tcp.hpp); destroying it while a task waits in recv makes that
// recv throw std::system_error(ECANCELED).
//
// Under ThreadSanitizer a handler runs only when the thread the kernel
// picked reaches an intercepted call or an atomic access, and a thread
// asleep in a raw futex wait (a parked worker, a thread in block_on) may
// not wake for it: a signal sent to the whole process can then be late or
// lost. A program run under TSan should block its signals on such threads
// (pthread_sigmask) or send them to a thread that runs; tests/signal_test.cpp
// does so. Without TSan the handler runs at once on whichever thread.
#pragma once

#include <aspen/detail/io_handle.hpp>
#include <aspen/task.hpp>

namespace aspen {

// What signal_listener::recv returns; `co_await` it.
class [[nodiscard]] signal_recv_awaitable : public detail::io_awaitable<signal_recv_awaitable> {
public:
    signal_recv_awaitable(detail::io_source* s, int signum) noexcept : claim_(s, false), signum_(signum) {}
    void await_resume() { rethrow_if_error(); }
    bool poll(context& cx);
    static const char* what() noexcept { return "aspen::signal_listener::recv"; }

private:
    detail::io_claim claim_;
    int signum_;
};

class signal_listener {
public:
    // Starts counting deliveries of signum (installs the handler on the
    // first listener of it). std::invalid_argument for a number that is not
    // a signal or a signal that cannot or must not be caught.
    explicit signal_listener(int signum);
    signal_listener(signal_listener&&) noexcept = default;
    signal_listener& operator=(signal_listener&&) noexcept = default;

    // std::logic_error on a moved-from listener.
    signal_recv_awaitable recv() { return signal_recv_awaitable(io_.require("aspen::signal_listener::recv"), signum_); }
    int signum() const noexcept { return signum_; }

private:
    // This listener's own descriptor of the shared eventfd; its state also
    // keeps the count of deliveries seen, which a pending recv may update
    // while the listener moves or goes away.
    detail::io_handle io_;
    int signum_ = 0;
};

// Waits for the next SIGINT (Ctrl+C), from the moment it is called.
task<void> ctrl_c();

}  // namespace aspen
