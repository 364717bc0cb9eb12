// aspen::io::copy and copy_bidirectional: move bytes between streams until
// the end (as tokio::io::copy and copy_bidirectional).
//
//   std::uint64_t n = co_await aspen::io::copy(file_pipe, conn);   // to end of stream
//   auto [up, down] = co_await aspen::io::copy_bidirectional(client, upstream);  // a proxy
//
// copy(reader, writer) reads until the reader's end of stream and writes
// every byte to the writer; it returns the count. Any reader and writer
// with read(void*, size_t) / write_all(const void*, size_t) awaitables: the
// streams, their halves, pipes, buf_reader / buf_writer (then flush the
// writer afterwards). Not cancel-safe: bytes read but not yet written when
// it is aborted are gone from the reader.
//
// copy_bidirectional(a, b) copies a -> b and b -> a at the same time, in
// the calling task: no task is spawned, so nothing outlives the call or
// touches a or b after it ended (an abort included). When one side's reads
// end, everything read from it is written to the other side, whose write
// direction is then shut down (shutdown(write): its peer reads end of
// stream), and the other direction goes on alone. It returns once both
// directions ended: {bytes a -> b, bytes b -> a}. The first error of either
// direction (a reset, a refused write) is thrown at once and ends both
// directions. a and b are byte streams of this runtime whose operations it
// can poll by hand (bidirectional_stream): tcp_stream, unix_stream or
// io::duplex_stream (not split halves: each side is read and written). Each
// transfer spends coop budget, like the streams' own awaits, so two busy
// directions cannot hog a worker. Not cancel-safe, as copy (bytes between
// a read and its write are in a buffer of the call).
#pragma once

#include <aspen/coop.hpp>
#include <aspen/detail/stream_ops.hpp>
#include <aspen/poll.hpp>
#include <aspen/task.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

namespace aspen::io {

// 64 KiB moves a large transfer in few syscalls (Linux's default socket
// buffers hold about that much); Tokio uses 8 KiB.
inline constexpr std::size_t copy_buffer_size = 64 * 1024;

template <class R, class W>
task<std::uint64_t> copy(R& reader, W& writer) {
    std::unique_ptr<char[]> buf(new char[copy_buffer_size]);
    std::uint64_t total = 0;
    for (;;) {
        std::size_t n = co_await reader.read(buf.get(), copy_buffer_size);
        if (n == 0) co_return total;
        co_await writer.write_all(buf.get(), n);
        total += n;
    }
}

// A transfer copy_bidirectional can poll by hand: poll(context&) true once
// done (the waker stored otherwise), then await_resume() gives the count or
// throws the error (transfer_awaitable, duplex_awaitable).
template <class Op>
concept pollable_transfer = std::move_constructible<Op> && requires(Op& op, context& cx) {
    { op.poll(cx) } -> std::same_as<bool>;
    { op.await_resume() } -> std::same_as<std::size_t>;
};

// A stream copy_bidirectional can drive: its reads and writes are leaf
// awaitables it can poll by hand, and it can shut down its write side.
template <class S>
concept bidirectional_stream = requires(S& s, void* p, const void* cp, std::size_t n) {
    { s.read(p, n) } -> pollable_transfer;
    { s.write(cp, n) } -> pollable_transfer;
    s.shutdown();
};

struct copy_totals {
    std::uint64_t a_to_b = 0;
    std::uint64_t b_to_a = 0;
};

namespace detail {

// One direction of copy_bidirectional, from a From to a To: a buffer that
// is filled by one read and emptied by writes, then filled again; at most
// one of the two operations exists at a time (read_op_ or write_op_).
template <class From, class To>
class copy_direction {
    using read_op = decltype(std::declval<From&>().read(std::declval<void*>(), std::size_t{}));
    using write_op = decltype(std::declval<To&>().write(std::declval<const void*>(), std::size_t{}));

public:
    copy_direction() : buf_(new char[copy_buffer_size]) {}

    bool done() const noexcept { return done_; }
    std::uint64_t total() const noexcept { return total_; }

    // One step: at most one completed read and one completed write. True
    // if anything moved (or the direction just ended); false if both wait,
    // their wakers stored in cx.
    bool step(From& from, To& to, context& cx) {
        if (done_) return false;
        bool moved = false;
        if (start_ == end_ && !eof_) {
            if (!read_op_) read_op_.emplace(from.read(buf_.get(), copy_buffer_size));
            if (!read_op_->poll(cx)) return false;
            std::size_t n = finish(read_op_);
            if (n == 0) eof_ = true;
            start_ = 0;
            end_ = n;
            moved = true;
        }
        if (start_ < end_) {
            if (!write_op_) write_op_.emplace(to.write(buf_.get() + start_, end_ - start_));
            if (!write_op_->poll(cx)) return moved;
            std::size_t n = finish(write_op_);
            start_ += n;
            total_ += n;
            moved = true;
        }
        if (eof_ && start_ == end_) {
            to.shutdown();  // the peer of `to` reads end of stream
            done_ = true;
            moved = true;
        }
        return moved;
    }

private:
    template <class Op>
    static std::size_t finish(std::optional<Op>& op) {
        std::size_t n = op->await_resume();
        op.reset();
        return n;
    }
    std::unique_ptr<char[]> buf_;
    std::optional<read_op> read_op_;
    std::optional<write_op> write_op_;
    std::size_t start_ = 0;  // first byte not yet written
    std::size_t end_ = 0;    // one past the last byte read
    std::uint64_t total_ = 0;
    bool eof_ = false;
    bool done_ = false;
};

}  // namespace detail

template <bidirectional_stream A, bidirectional_stream B>
task<copy_totals> copy_bidirectional(A& a, B& b) {
    detail::copy_direction<A, B> ab;
    detail::copy_direction<B, A> ba;
    for (;;) {
        // Both directions in one leaf: a wake of either re-polls both.
        auto both = poll_fn([&](context& cx) -> poll<bool> {
            bool moved = ab.step(a, b, cx);
            moved = ba.step(b, a, cx) || moved;
            if (ab.done() && ba.done()) return ready(true);
            if (moved) return ready(false);
            return pending;
        });
        bool finished = co_await both;
        if (finished) break;
        // Progress without waiting spends budget: yields once it is spent.
        co_await consume_budget();
    }
    co_return copy_totals{ab.total(), ba.total()};
}

}  // namespace aspen::io
