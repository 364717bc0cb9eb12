// aspen::io::duplex: two connected in-memory byte streams, as Tokio's
// tokio::io::duplex(max_buf_size).
//
//   auto [client, server] = aspen::io::duplex(64 * 1024);
//   co_await client.write_all("ping\n");
//   aspen::io::buf_reader<aspen::io::duplex_stream&> rd(server);
//   std::optional<std::string> line = co_await rd.next_line(1024);   // "ping"
//
// Why: protocol code (parsers, buf_reader / buf_writer, read_frame /
// write_frame, copy, copy_bidirectional) is written against the stream
// operations, and a test of it should not need sockets, ports or
// descriptors. Bytes written to one end are read from the other, in order;
// each direction buffers at most max_buf_size bytes, so a writer that runs
// ahead of its reader waits, as on a socket whose buffers are full, and a
// small max_buf_size makes reads and writes split at odd places, which is
// what a parser has to survive.
//
// duplex(max_buf_size): the two ends; max_buf_size 0 throws
// std::invalid_argument (a direction that could never carry a byte). The
// buffer of a direction grows as it fills, up to max_buf_size.
//
// Operations (each an awaitable giving the byte count; as tcp_stream's):
//   read(buf, n)        waits until there are bytes, takes up to n; 0 at
//                       end of stream (the peer called shutdown(), or was
//                       destroyed, and its buffered bytes have been read),
//                       and 0 again on every later read; n == 0: 0 at once.
//   read_exact(buf, n)  n bytes, fewer only at end of stream.
//   write(buf, n)       waits while the direction's buffer is full, then
//                       writes as much as fits (at least one byte) and
//                       returns how many, as a socket write.
//   write_all(buf, n)   all n bytes, waiting for room as often as needed.
//   shutdown()          (synchronous) end of stream for the peer's reads
//                       once it has read what is buffered; this end can
//                       still read. Later writes on this end throw
//                       std::system_error(EPIPE), as a socket after
//                       shutdown(write) does. Calling it again does nothing.
// A write after the peer was destroyed throws std::system_error(EPIPE)
// (a socket whose peer closed; no signal is involved); what was still
// buffered for the dropped peer is discarded. Destroying an end while a task
// waits in one of its operations makes that operation throw
// std::system_error(ECANCELED), as for sockets. An operation on a
// moved-from (or default-constructed) end throws std::logic_error.
//
// Threads: the two ends may be used by tasks on different workers at the
// same time, one read-side and one write-side operation per end at a time
// (a second one of the same side while one waits throws std::logic_error,
// as on a socket). The state the ends share is behind a mutex; a waiting
// reader or writer stores its waker there under the same lock that the
// other side takes it under when it changes what the waiter waits for, so
// no wake-up is lost. The state is freed with the last end or operation.
//
// Coop budget: every operation spends one unit, as the socket operations
// do, so a task reading a duplex that always has data still yields to
// other tasks.
//
// Cancel safety (the awaiting task is aborted, loses a timeout race, or the
// awaitable is destroyed while pending; the operation then gives up its
// place and drops its stored waker, and the stream stays usable):
//   read        cancel-safe: bytes are taken only in the poll that
//               completes the read.
//   write       cancel-safe: bytes are put in only in the poll that
//               completes the write.
//   read_exact  NOT cancel-safe: bytes already copied into the buffer are
//               gone from the stream; the caller does not learn how many.
//   write_all   NOT cancel-safe: a prefix of the data may have been written.
// Each operation can be given to aspen::timeout as it is (it moves until
// first awaited):
//   std::size_t n = co_await aspen::timeout(1s, end.read(buf, sizeof buf));
#pragma once

#include <aspen/detail/io_handle.hpp>
#include <aspen/waker.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

namespace aspen::io {

namespace detail {
struct duplex_state;  // src/io/duplex.cpp
}

// What duplex_stream's read / read_exact / write / write_all return;
// `co_await` it for the byte count.
class [[nodiscard]] duplex_awaitable : public aspen::detail::io_awaitable<duplex_awaitable> {
public:
    enum class kind : std::uint8_t { read, read_exact, write, write_all };
    duplex_awaitable(std::shared_ptr<detail::duplex_state> state, int side, kind k, const char* what, void* data,
                     std::size_t size) noexcept
        : state_(std::move(state)), data_(static_cast<std::byte*>(data)), size_(size), kind_(k), side_(side),
          what_(what) {}
    // Only before it is first awaited (aspen::timeout moves it into a task).
    duplex_awaitable(duplex_awaitable&& other) noexcept;
    duplex_awaitable& operator=(duplex_awaitable&&) = delete;
    // A pending operation destroyed (abort, timeout): gives up its place.
    ~duplex_awaitable();

    std::size_t await_resume() {
        rethrow_if_error();
        return done_;
    }
    bool poll(context& cx);
    const char* what() const noexcept { return what_; }

private:
    void give_up_place() noexcept;
    std::shared_ptr<detail::duplex_state> state_;
    std::byte* data_;
    std::size_t size_;
    std::size_t done_ = 0;
    kind kind_;
    int side_;
    bool waiting_ = false;  // its waker is stored in the shared state
    const char* what_;
};

class duplex_stream;

// Two connected ends; each direction buffers at most max_buf_size bytes.
std::pair<duplex_stream, duplex_stream> duplex(std::size_t max_buf_size);

// One end of a duplex (see the top of this header). Move-only; destroying
// it ends the stream for the peer's reads (after what is buffered) and makes
// the peer's writes throw EPIPE.
class duplex_stream {
public:
    duplex_stream() noexcept = default;
    duplex_stream(duplex_stream&& other) noexcept = default;
    duplex_stream& operator=(duplex_stream&& other) noexcept {
        if (this != &other) {
            close();
            state_ = std::move(other.state_);
            side_ = other.side_;
        }
        return *this;
    }
    ~duplex_stream() { close(); }

    duplex_awaitable read(void* data, std::size_t size) {
        return make(duplex_awaitable::kind::read, "aspen::io::duplex_stream::read", data, size);
    }
    duplex_awaitable read(std::span<char> buf) { return read(buf.data(), buf.size()); }
    duplex_awaitable read(std::span<std::byte> buf) { return read(buf.data(), buf.size()); }
    duplex_awaitable read_exact(void* data, std::size_t size) {
        return make(duplex_awaitable::kind::read_exact, "aspen::io::duplex_stream::read_exact", data, size);
    }
    duplex_awaitable read_exact(std::span<char> buf) { return read_exact(buf.data(), buf.size()); }
    duplex_awaitable read_exact(std::span<std::byte> buf) { return read_exact(buf.data(), buf.size()); }
    duplex_awaitable write(const void* data, std::size_t size) {
        return make(duplex_awaitable::kind::write, "aspen::io::duplex_stream::write", const_cast<void*>(data), size);
    }
    duplex_awaitable write(std::string_view s) { return write(s.data(), s.size()); }
    duplex_awaitable write(std::span<const std::byte> buf) { return write(buf.data(), buf.size()); }
    duplex_awaitable write_all(const void* data, std::size_t size) {
        return make(duplex_awaitable::kind::write_all, "aspen::io::duplex_stream::write_all", const_cast<void*>(data),
                    size);
    }
    duplex_awaitable write_all(std::string_view s) { return write_all(s.data(), s.size()); }
    duplex_awaitable write_all(std::span<const std::byte> buf) { return write_all(buf.data(), buf.size()); }

    // End of stream for the peer after what is buffered; later writes on
    // this end throw std::system_error(EPIPE).
    void shutdown();

    explicit operator bool() const noexcept { return state_ != nullptr; }

private:
    friend std::pair<duplex_stream, duplex_stream> duplex(std::size_t max_buf_size);
    duplex_stream(std::shared_ptr<detail::duplex_state> state, int side) noexcept
        : state_(std::move(state)), side_(side) {}
    duplex_awaitable make(duplex_awaitable::kind k, const char* what, void* data, std::size_t size) {
        return duplex_awaitable(require(what), side_, k, what, data, size);
    }
    // The shared state, or std::logic_error naming `what` if there is none.
    const std::shared_ptr<detail::duplex_state>& require(const char* what) const;
    void close() noexcept;

    std::shared_ptr<detail::duplex_state> state_;
    int side_ = 0;  // writes go to state_->pipes[side_], reads come from the other
};

}  // namespace aspen::io
