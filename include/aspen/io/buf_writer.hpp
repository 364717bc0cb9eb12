// aspen::io::buf_writer: a write buffer in front of a byte stream (as
// tokio::io::BufWriter), so that many small writes (a header field at a
// time, one record at a time) become few syscalls.
//
//   aspen::io::buf_writer<aspen::tcp_stream&> wr(conn);
//   for (const auto& r : records) co_await wr.write_all(format(r));
//   co_await wr.flush();          // nothing reaches the peer before this
//
// Bytes sit in the buffer until it is full, flush() or shutdown(). The
// destructor cannot wait for a write, so bytes still buffered when the
// writer is destroyed are dropped, as with Tokio's BufWriter: end with
// flush() (or shutdown()). A piece at least as large as the buffer goes
// straight to the stream (after what is buffered), without a copy.
//
// S: any byte stream whose write(const void*, size_t) gives an awaitable
// of the bytes written (tcp_stream, unix_stream, their write halves,
// pipe_writer), or a reference to one (borrowed: it must outlive the
// writer). shutdown() needs S::shutdown() (the sockets and write halves).
//
// Cancel safety: flush writes from the buffer's front and drops each piece
// only once the stream took it, so an aborted flush loses nothing: the
// next flush goes on from there. write and write_all copy into the buffer
// once there is room; aborted while waiting for room, they have taken
// nothing of their data (write_all: nothing of the piece that did not fit;
// what it returned for earlier pieces of a loop is the caller's count). A
// piece written straight to the stream follows the stream's write. The
// writer must not be moved while an operation on it runs, and one
// operation at a time.
#pragma once

#include <aspen/io/buf_reader.hpp>  // detail::buffered_stream
#include <aspen/task.hpp>

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

namespace aspen::io {

template <class S>
class buf_writer : public detail::buffered_stream<S> {
    using base = detail::buffered_stream<S>;
    using base::buf_;
    using base::cap_;
    using base::inner_;

public:
    // std::invalid_argument if capacity is 0.
    explicit buf_writer(S inner, std::size_t capacity = base::default_capacity)
        : base(std::forward<S>(inner), capacity, "aspen::io::buf_writer") {}

    // get_ref(), into_inner() && (buffered bytes are dropped), capacity().
    // The bytes written to the writer and not yet to the stream.
    std::span<const char> buffer() const noexcept { return {buf_.get() + start_, end_ - start_}; }

    // Takes some of data (all of it unless it goes straight to the stream,
    // where the stream's write may take less): returns how many bytes; 0
    // only for size == 0.
    task<std::size_t> write(const void* data, std::size_t size) {
        if (size == 0) co_return 0;
        if (size > cap_ - end_) co_await flush();  // (no overflow for any size)
        if (size >= cap_) {
            std::size_t direct = co_await inner_.write(data, size);
            co_return direct;
        }
        std::memcpy(buf_.get() + end_, data, size);
        end_ += size;
        co_return size;
    }
    task<std::size_t> write(std::string_view s) { return write(s.data(), s.size()); }
    // All of data (buffered, or written straight to the stream if it is at
    // least as large as the buffer).
    task<void> write_all(const void* data, std::size_t size) {
        auto* p = static_cast<const char*>(data);
        while (size > 0) {
            std::size_t n = co_await write(p, size);
            p += n;
            size -= n;
        }
    }
    task<void> write_all(std::string_view s) { return write_all(s.data(), s.size()); }
    // Writes everything buffered to the stream.
    task<void> flush() {
        while (start_ < end_) {
            std::size_t n = co_await inner_.write(buf_.get() + start_, end_ - start_);
            start_ += n;
        }
        start_ = end_ = 0;
    }
    // flush(), then the stream's shutdown(): the peer reads end of stream.
    task<void> shutdown()
        requires requires(S& s) { s.shutdown(); }
    {
        co_await flush();
        inner_.shutdown();
    }

private:
    std::size_t start_ = 0;  // first byte not yet written to the stream
    std::size_t end_ = 0;    // one past the last buffered byte
};

}  // namespace aspen::io
