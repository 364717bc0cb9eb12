// aspen::io::duplex: the state two duplex_stream ends share and the one
// poll every operation runs (aspen/io/duplex.hpp).
//
// Locking: one std::mutex per duplex guards both directions. Not the sync
// primitives' spin_mutex: a critical section here copies up to
// max_buf_size bytes (and may grow a buffer), long enough that a waiter is
// better off asleep than spinning. Wakers are moved out under the lock and
// woken (or dropped) after it, so no task code runs under it.
//
// No lost wake-up: a waiter checks the state and stores its waker in one
// critical section; whoever changes that state (bytes in, bytes out,
// shutdown, an end destroyed) takes the stored waker in the critical
// section that changes it. Either the waiter saw the change, or its waker
// was there to be taken.
#include <aspen/io/duplex.hpp>

#include <algorithm>
#include <array>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>

namespace aspen::io {

namespace detail {

// One direction: the bytes one end wrote and the other has not read yet, in
// a ring buffer that grows up to max_buf_size, and the one reader and one
// writer waiting on it. `reader` / `writer` name the operation holding the
// side's place (from its first pending poll until it completes or is
// destroyed); its waker is empty once taken by a wake.
struct duplex_pipe {
    std::unique_ptr<std::byte[]> buf;
    std::size_t cap = 0;
    std::size_t head = 0;  // first unread byte
    std::size_t len = 0;   // unread bytes
    bool write_shut = false;   // no more bytes will come (shutdown or writing end gone)
    bool reader_gone = false;  // the reading end was destroyed: writes are refused
    const void* reader = nullptr;
    const void* writer = nullptr;
    waker reader_waker;
    waker writer_waker;

    // Copies out up to n bytes; how many.
    std::size_t take(std::byte* out, std::size_t n) noexcept {
        n = std::min(n, len);
        if (n == 0) return 0;
        std::size_t first = std::min(n, cap - head);
        std::memcpy(out, buf.get() + head, first);
        std::memcpy(out + first, buf.get(), n - first);
        head = (head + n) % cap;
        len -= n;
        if (len == 0) head = 0;
        return n;
    }

    // Copies in as much of n bytes as max allows; how many.
    std::size_t put(const std::byte* in, std::size_t n, std::size_t max) {
        n = std::min(n, max - len);
        if (n == 0) return 0;
        if (len + n > cap) grow(len + n, max);
        std::size_t tail = (head + len) % cap;
        std::size_t first = std::min(n, cap - tail);
        std::memcpy(buf.get() + tail, in, first);
        std::memcpy(buf.get(), in + first, n - first);
        len += n;
        return n;
    }

    void discard() noexcept {
        buf.reset();
        cap = head = len = 0;
    }

private:
    // At least `need` (<= max) bytes of room, doubling from 4 KiB so a small
    // exchange does not allocate a large max_buf_size at once.
    void grow(std::size_t need, std::size_t max) {
        std::size_t c = std::max(need, std::min(max, std::max<std::size_t>(cap * 2, 4096)));
        std::unique_ptr<std::byte[]> next(new std::byte[c]);
        std::size_t first = std::min(len, cap - head);
        if (len != 0) {
            std::memcpy(next.get(), buf.get() + head, first);
            std::memcpy(next.get() + first, buf.get(), len - first);
        }
        buf = std::move(next);
        cap = c;
        head = 0;
    }
};

struct duplex_state {
    explicit duplex_state(std::size_t max) : max_buf(max) {}
    std::mutex mu;
    const std::size_t max_buf;
    std::array<duplex_pipe, 2> pipes;  // pipes[i]: written by end i, read by end 1 - i
    std::array<bool, 2> end_gone{};    // end i was destroyed
};

}  // namespace detail

namespace {
[[noreturn]] void throw_errno(int err, const char* what) {
    throw std::system_error(err, std::generic_category(), what);
}
}  // namespace

std::pair<duplex_stream, duplex_stream> duplex(std::size_t max_buf_size) {
    if (max_buf_size == 0)
        throw std::invalid_argument("aspen::io::duplex: max_buf_size must be at least 1, got 0");
    auto state = std::make_shared<detail::duplex_state>(max_buf_size);
    return {duplex_stream(state, 0), duplex_stream(state, 1)};
}

const std::shared_ptr<detail::duplex_state>& duplex_stream::require(const char* what) const {
    if (!state_) throw std::logic_error(std::string(what) + ": the stream is empty (moved from or default-constructed)");
    return state_;
}

void duplex_stream::shutdown() {
    detail::duplex_state& st = *require("aspen::io::duplex_stream::shutdown");
    waker peer_reader, own_writer;
    {
        std::lock_guard lock(st.mu);
        detail::duplex_pipe& p = st.pipes[side_];
        p.write_shut = true;
        peer_reader = std::move(p.reader_waker);  // reads end of stream after the buffered bytes
        own_writer = std::move(p.writer_waker);   // a write in progress now throws EPIPE
    }
    peer_reader.wake();
    own_writer.wake();
}

void duplex_stream::close() noexcept {
    if (!state_) return;
    detail::duplex_state& st = *state_;
    std::array<waker, 4> wake;
    std::unique_ptr<std::byte[]> unread;  // freed after the lock
    {
        std::lock_guard lock(st.mu);
        detail::duplex_pipe& out = st.pipes[side_];
        detail::duplex_pipe& in = st.pipes[1 - side_];
        st.end_gone[side_] = true;
        out.write_shut = true;  // the peer reads what is buffered, then end of stream
        in.reader_gone = true;  // the peer's writes throw EPIPE
        unread = std::move(in.buf);
        in.discard();
        // The peer's waiting read and write, and this end's own (ECANCELED).
        wake = {std::move(out.reader_waker), std::move(out.writer_waker), std::move(in.reader_waker),
                std::move(in.writer_waker)};
    }
    for (waker& w : wake) w.wake();
    state_.reset();
}

duplex_awaitable::duplex_awaitable(duplex_awaitable&& other) noexcept
    : io_awaitable(std::move(other)),
      state_(std::move(other.state_)),
      data_(other.data_),
      size_(other.size_),
      done_(other.done_),
      kind_(other.kind_),
      side_(other.side_),
      what_(other.what_) {
    assert(!other.waiting_ && "aspen: a duplex operation moved after it started");
}

duplex_awaitable::~duplex_awaitable() {
    if (waiting_) give_up_place();
}

void duplex_awaitable::give_up_place() noexcept {
    bool reading = kind_ == kind::read || kind_ == kind::read_exact;
    waker stale;  // dropped after the lock
    {
        std::lock_guard lock(state_->mu);
        detail::duplex_pipe& p = state_->pipes[reading ? 1 - side_ : side_];
        const void*& holder = reading ? p.reader : p.writer;
        if (holder == this) {
            holder = nullptr;
            stale = std::move(reading ? p.reader_waker : p.writer_waker);
        }
    }
    waiting_ = false;
}

bool duplex_awaitable::poll(context& cx) {
    bool reading = kind_ == kind::read || kind_ == kind::read_exact;
    bool exact = kind_ == kind::read_exact || kind_ == kind::write_all;
    // Nothing (left) to do: a read or write of 0 bytes completes at once.
    if (done_ == size_) return true;
    detail::duplex_state& st = *state_;
    waker other;  // the other side's waiter, woken after the lock
    waker stale;  // this operation's own, dropped after the lock
    bool finished = false;
    int error = 0;
    {
        std::lock_guard lock(st.mu);
        detail::duplex_pipe& p = st.pipes[reading ? 1 - side_ : side_];
        const void*& holder = reading ? p.reader : p.writer;
        waker& mine = reading ? p.reader_waker : p.writer_waker;
        if (holder != nullptr && holder != this)
            throw std::logic_error(std::string(what_) + ": another " + (reading ? "read" : "write") +
                                   " is in progress on this end (one at a time)");
        if (st.end_gone[side_]) {
            error = ECANCELED;  // this end was destroyed under the operation
        } else if (reading) {
            std::size_t n = p.take(data_ + done_, size_ - done_);
            done_ += n;
            if (n != 0) other = std::move(p.writer_waker);  // room for a waiting writer
            finished = done_ == size_ || (!exact && n != 0) || p.write_shut;
        } else if (p.write_shut || p.reader_gone) {
            error = EPIPE;  // after our shutdown, or the reading end is gone
        } else {
            std::size_t n = p.put(data_ + done_, size_ - done_, st.max_buf);
            done_ += n;
            if (n != 0) other = std::move(p.reader_waker);  // bytes for a waiting reader
            finished = done_ == size_ || (!exact && n != 0);
        }
        if (finished || error != 0) {
            if (holder == this) {
                holder = nullptr;
                stale = std::move(mine);
            }
            waiting_ = false;
        } else {
            if (!mine.will_wake(cx.waker())) stale = std::exchange(mine, cx.waker());
            holder = this;
            waiting_ = true;
        }
    }
    other.wake();
    if (error != 0) throw_errno(error, what_);
    return finished;
}

}  // namespace aspen::io
