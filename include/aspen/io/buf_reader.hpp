// aspen::io::buf_reader: a read buffer in front of a byte stream, for
// line- and delimiter-based protocols (as tokio::io::BufReader).
//
//   aspen::io::buf_reader rd(std::move(conn));          // owns the stream
//   aspen::io::buf_reader<aspen::tcp_stream&> rd(conn);  // or borrows it
//   std::string line;
//   while (co_await rd.read_line(line, 8192) != 0) { ...; line.clear(); }
//   while (auto l = co_await rd.next_line(8192)) use(*l);  // without "\n" / "\r\n"
//
// Why: a stream read returns whatever the kernel has, so finding the end
// of a line byte by byte would cost a syscall a byte; the buffer reads up to
// `capacity` bytes at once and serves the small reads from memory. A read
// at least as large as the buffer, with the buffer empty, goes straight to
// the stream (no copy).
//
// S: any byte stream whose read(void*, size_t) gives an awaitable of the
// bytes read, 0 at end of stream (tcp_stream, unix_stream, their read
// halves, pipe_reader), or a reference to one (then it is borrowed and must
// outlive the reader). Writes are not buffered here: get_ref() reaches the
// stream (see buf_writer.hpp for buffered writes).
//
// Cancel safety: fill_buf, read, read_until, read_line and next_line take
// bytes out of the buffer only in the step that hands them over, so an
// aborted or timed-out call loses nothing: read_until and read_line leave
// what they consumed appended to `out` (call again to go on, as Tokio's
// read_line); read and read_exact copy into the caller's memory as they go
// (read_exact: the count is lost, as for the stream's read_exact); next_line
// keeps an unfinished line in an internal string and hands it over with
// the next call's line. The reader must not be moved while an operation on
// it runs (each task holds `this`), and one operation at a time (the
// stream's rule).
#pragma once

#include <aspen/task.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

namespace aspen::io {

// "No limit" for read_until, read_line and next_line.
inline constexpr std::size_t no_limit = std::numeric_limits<std::size_t>::max();

namespace detail {
// What buf_reader and buf_writer share: the stream (owned, or borrowed when
// S is a reference) and a buffer of fixed capacity.
template <class S>
class buffered_stream {
public:
    static constexpr std::size_t default_capacity = 8 * 1024;  // as Tokio's

    S& get_ref() noexcept { return inner_; }
    const S& get_ref() const noexcept { return inner_; }
    // The stream back; bytes still buffered are dropped (a reader's: read
    // them first, buffer(); a writer's: flush first).
    S into_inner() && { return std::forward<S>(inner_); }
    std::size_t capacity() const noexcept { return cap_; }

protected:
    // std::invalid_argument naming `what` if capacity is 0 (a buffer that
    // could never hold a byte).
    buffered_stream(S inner, std::size_t capacity, const char* what)
        : inner_(std::forward<S>(inner)), buf_(new char[checked(capacity, what)]), cap_(capacity) {}

    S inner_;
    std::unique_ptr<char[]> buf_;
    std::size_t cap_;

private:
    static std::size_t checked(std::size_t capacity, const char* what) {
        if (capacity == 0) throw std::invalid_argument(std::string(what) + ": capacity must be at least 1, got 0");
        return capacity;
    }
};
}  // namespace detail

template <class S>
class buf_reader : public detail::buffered_stream<S> {
    using base = detail::buffered_stream<S>;
    using base::buf_;
    using base::cap_;
    using base::inner_;

public:
    // std::invalid_argument if capacity is 0.
    explicit buf_reader(S inner, std::size_t capacity = base::default_capacity)
        : base(std::forward<S>(inner), capacity, "aspen::io::buf_reader") {}

    // get_ref(), into_inner() && (buffered bytes are dropped), capacity().
    // The bytes read from the stream and not consumed yet.
    std::span<const char> buffer() const noexcept { return {buf_.get() + pos_, end_ - pos_}; }

    // The buffered bytes, reading once from the stream if there are none:
    // empty only at end of stream. consume(n) then marks n of them used.
    task<std::span<const char>> fill_buf() {
        if (pos_ == end_) co_await refill();
        co_return buffer();
    }
    // std::out_of_range if n exceeds what is buffered.
    void consume(std::size_t n) {
        if (n > end_ - pos_)
            throw std::out_of_range("aspen::io::buf_reader::consume: " + std::to_string(n) + " bytes, only " +
                                    std::to_string(end_ - pos_) + " buffered");
        pos_ += n;
    }

    // Up to size bytes: from the buffer, else one read of the stream (into
    // the buffer, or straight into data if size >= capacity). 0 only at end
    // of stream or for size == 0 (at once).
    task<std::size_t> read(void* data, std::size_t size) {
        if (size == 0) co_return 0;
        if (pos_ == end_ && size >= cap_) {
            std::size_t direct = co_await inner_.read(data, size);
            co_return direct;
        }
        if (pos_ == end_) co_await refill();
        co_return take(static_cast<char*>(data), size);
    }
    // Exactly size bytes unless the stream ends first: returns the count,
    // which is less than size only at end of stream.
    task<std::size_t> read_exact(void* data, std::size_t size) {
        auto* out = static_cast<char*>(data);
        std::size_t done = 0;
        while (done < size) {
            std::size_t n = co_await read(out + done, size - done);
            if (n == 0) break;
            done += n;
        }
        co_return done;
    }

    // Appends bytes to out up to and including the first `delim`, or until
    // end of stream, or until `limit` bytes were appended (then the rest of
    // the line stays for the next call: out does not end with delim).
    // Returns how many bytes it appended: 0 means end of stream. limit must
    // be at least 1 (std::invalid_argument).
    task<std::size_t> read_until(char delim, std::string& out, std::size_t limit = no_limit) {
        check_limit(limit, "aspen::io::buf_reader::read_until");
        std::size_t total = 0;
        while (total < limit) {
            if (pos_ == end_) {
                co_await refill();
                if (pos_ == end_) break;  // end of stream
            }
            bool found = append_until(delim, out, limit - total, total);
            if (found) break;
        }
        co_return total;
    }
    // read_until('\n', out, limit): the line with its "\n" (or "\r\n").
    task<std::size_t> read_line(std::string& out, std::size_t limit = no_limit) {
        return read_until('\n', out, limit);
    }
    // The next line without its "\n" or "\r\n"; the last line of a stream
    // that does not end with "\n" as it is; nullopt at end of stream. A line
    // longer than `limit` bytes (terminator included) throws
    // std::length_error, with the bytes up to the limit consumed: a peer
    // that sends endless lines cannot make the reader hold more than limit
    // bytes.
    task<std::optional<std::string>> next_line(std::size_t limit = no_limit) {
        check_limit(limit, "aspen::io::buf_reader::next_line");
        std::size_t room = limit - std::min(limit, partial_.size());
        std::size_t n = 0;
        if (room != 0) n = co_await read_until('\n', partial_, room);
        bool ended = !partial_.empty() && partial_.back() == '\n';
        if (!ended && partial_.size() >= limit) {
            partial_.clear();
            throw std::length_error("aspen::io::buf_reader::next_line: a line longer than " + std::to_string(limit) +
                                    " bytes");
        }
        if (n == 0 && partial_.empty()) co_return std::nullopt;
        std::string line = std::exchange(partial_, std::string());
        if (ended) {
            line.pop_back();
            if (!line.empty() && line.back() == '\r') line.pop_back();
        }
        co_return line;
    }

private:
    static void check_limit(std::size_t limit, const char* what) {
        if (limit == 0) throw std::invalid_argument(std::string(what) + ": limit must be at least 1, got 0");
    }
    // One read of the stream into the empty buffer (nothing changes until
    // it completes: cancel-safe).
    task<void> refill() {
        std::size_t n = co_await inner_.read(buf_.get(), cap_);
        pos_ = 0;
        end_ = n;
    }
    std::size_t take(char* out, std::size_t size) noexcept {
        std::size_t n = std::min(size, end_ - pos_);
        std::memcpy(out, buf_.get() + pos_, n);
        pos_ += n;
        return n;
    }
    // Moves buffered bytes up to and including delim (at most `room`) to
    // out, adding their count to total; true if delim was among them.
    bool append_until(char delim, std::string& out, std::size_t room, std::size_t& total) {
        const char* start = buf_.get() + pos_;
        std::size_t avail = std::min(end_ - pos_, room);
        const void* hit = std::memchr(start, delim, avail);
        std::size_t n = hit ? static_cast<std::size_t>(static_cast<const char*>(hit) - start) + 1 : avail;
        out.append(start, n);
        pos_ += n;
        total += n;
        return hit != nullptr;
    }

    std::size_t pos_ = 0;  // buffer()'s first byte
    std::size_t end_ = 0;  // one past buffer()'s last byte
    std::string partial_;  // next_line: an unfinished line (see cancel safety)
};

}  // namespace aspen::io
