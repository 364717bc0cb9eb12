// aspen::io standard streams: fs::file's pool machinery
// (blocking/pool_fd.hpp) over a borrowed descriptor, plus, for reads, the
// bytes a read took from the fd after its task was gone: they stay in the
// state and the next read hands them over (see the header's cancel
// safety). Reads therefore never hand bytes over from the pool thread:
// the pool call only fills the held bytes, and the task takes them under
// the busy lock.
#include <aspen/io/stdio.hpp>

#include "blocking/pool_fd.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace aspen::io {

namespace detail {
// A failure on fd: errno, naming op and the fd.
[[noreturn]] void fail_fd(int err, const char* op, int fd) {
    throw std::system_error(err, std::generic_category(), std::string(op) + " (fd " + std::to_string(fd) + ")");
}

struct stdio_state : aspen::detail::pool_fd {
    explicit stdio_state(int f) noexcept : pool_fd(f, false) {}

    // What a failed call throws (fail_fd).
    auto failing(const char* op) const {
        return [fd = fd, op](int err) -> void { fail_fd(err, op, fd); };
    }

    // Read side, touched only under the busy lock: bytes read from the fd
    // and not handed over yet (from held_pos on), and an end of stream read
    // and not reported yet.
    std::string held;
    std::size_t held_pos = 0;
    bool held_end = false;

    bool holds_something() const noexcept { return held_pos < held.size() || held_end; }
    // Hands over up to size held bytes (or the held end of stream, as 0).
    std::size_t take_held(void* data, std::size_t size) noexcept {
        if (held_pos == held.size()) {
            held_end = false;
            return 0;
        }
        std::size_t n = std::min(size, held.size() - held_pos);
        std::memcpy(data, held.data() + held_pos, n);
        held_pos += n;
        if (held_pos == held.size()) {
            held.clear();
            held_pos = 0;
        }
        return n;
    }
};
}  // namespace detail

namespace {

using state_ptr = std::shared_ptr<detail::stdio_state>;
using aspen::detail::max_pool_chunk;

// The stream's state, or std::logic_error naming `what` if it is empty.
state_ptr require(const state_ptr& s, const char* what) {
    if (!s) throw std::logic_error(std::string(what) + ": the stream is empty (moved-from or default-constructed)");
    return s;
}

// A borrowed fd's state; EBADF (naming `what`) if fd is not open.
state_ptr borrowed(int fd, const char* what) {
    if (::fcntl(fd, F_GETFD) < 0) detail::fail_fd(errno, what, fd);
    return std::make_shared<detail::stdio_state>(fd);
}

// One process-wide state per standard fd, made at the first call (a
// function-local static: thread-safe) and never checked: a closed fd shows
// at the first operation, as the header says.
const state_ptr& standard(int fd) {
    static const state_ptr in = std::make_shared<detail::stdio_state>(0);
    static const state_ptr out = std::make_shared<detail::stdio_state>(1);
    static const state_ptr err = std::make_shared<detail::stdio_state>(2);
    return fd == 0 ? in : fd == 1 ? out : err;
}

task<std::size_t> read_from(state_ptr s, void* data, std::size_t size) {
    if (size == 0) co_return 0;
    for (;;) {
        mutex_guard busy = co_await s->busy.lock();
        if (s->holds_something()) co_return s->take_held(data, size);
        // The call fills the held bytes under the lock it was given; this
        // task takes them on its next turn, under the lock again. If the
        // task is aborted meanwhile, they wait there for the next read.
        std::size_t want = std::min(size, max_pool_chunk);
        task<void> fill = aspen::detail::run_locked(s, std::move(busy), [want](detail::stdio_state& st) {
            st.held = aspen::detail::read_some(st.fd, want, st.failing("aspen::io::stdio_reader::read"));
            st.held_pos = 0;
            st.held_end = st.held.empty();
        });
        co_await std::move(fill);
    }
}

task<std::size_t> read_exact_from(state_ptr s, void* data, std::size_t size) {
    auto* out = static_cast<char*>(data);
    std::size_t done = 0;
    while (done < size) {
        task<std::size_t> one = read_from(s, out + done, size - done);
        std::size_t n = co_await std::move(one);
        if (n == 0) break;
        done += n;
    }
    co_return done;
}

// The lock is free once every earlier call returned (each holds it until
// then): taking it and letting it go is the whole wait.
task<void> wait_idle(state_ptr s) {
    mutex_guard busy = co_await s->busy.lock();
}

}  // namespace

stdio_reader stdin() { return stdio_reader(standard(0)); }
stdio_writer stdout() { return stdio_writer(standard(1)); }
stdio_writer stderr() { return stdio_writer(standard(2)); }

// ---- stdio_reader -------------------------------------------------------------
stdio_reader::~stdio_reader() = default;

stdio_reader stdio_reader::borrow(int fd) { return stdio_reader(borrowed(fd, "aspen::io::stdio_reader::borrow")); }

int stdio_reader::native_handle() const noexcept { return s_ ? s_->fd : -1; }

// The members are not coroutines: they check and copy the state at the
// call, so the task does not need the stream object (a temporary, say) to
// live until it runs, and misuse throws at the call.
task<std::size_t> stdio_reader::read(void* data, std::size_t size) {
    return read_from(require(s_, "aspen::io::stdio_reader::read"), data, size);
}

task<std::size_t> stdio_reader::read_exact(void* data, std::size_t size) {
    return read_exact_from(require(s_, "aspen::io::stdio_reader::read_exact"), data, size);
}

// ---- stdio_writer -------------------------------------------------------------
stdio_writer::~stdio_writer() = default;

stdio_writer stdio_writer::borrow(int fd) { return stdio_writer(borrowed(fd, "aspen::io::stdio_writer::borrow")); }

int stdio_writer::native_handle() const noexcept { return s_ ? s_->fd : -1; }

// The writes copy the caller's bytes into the call at once (not
// coroutines), so the caller's buffer is free as soon as the call returns.
task<std::size_t> stdio_writer::write(const void* data, std::size_t size) {
    state_ptr s = require(s_, "aspen::io::stdio_writer::write");
    std::string bytes(static_cast<const char*>(data), std::min(size, max_pool_chunk));
    return aspen::detail::run_exclusive(std::move(s), [bytes = std::move(bytes)](detail::stdio_state& st) {
        if (bytes.empty()) return std::size_t{0};
        return aspen::detail::write_some(st.fd, bytes.data(), bytes.size(),
                                         st.failing("aspen::io::stdio_writer::write"));
    });
}

task<void> stdio_writer::write_all(const void* data, std::size_t size) {
    state_ptr s = require(s_, "aspen::io::stdio_writer::write_all");
    std::string bytes(static_cast<const char*>(data), size);
    return aspen::detail::run_exclusive(std::move(s), [bytes = std::move(bytes)](detail::stdio_state& st) {
        aspen::detail::write_fully(st.fd, bytes, std::nullopt, st.failing("aspen::io::stdio_writer::write_all"));
    });
}

task<void> stdio_writer::write_all(std::string_view s) { return write_all(s.data(), s.size()); }

task<void> stdio_writer::flush() { return wait_idle(require(s_, "aspen::io::stdio_writer::flush")); }

void stdio_writer::shutdown() const { (void)require(s_, "aspen::io::stdio_writer::shutdown"); }

}  // namespace aspen::io
