// The operations every byte stream shares (TCP and Unix streams, their
// split halves, pipes): read, read_exact, peek, read_to_end, read_with,
// readable / try_read, write, write_all, write_with, writable / try_write,
// and the awaitables they return. The socket headers (aspen/net/tcp.hpp)
// document their semantics and cancel safety; the loop they run is drive()
// in src/io/io_source.hpp.
#pragma once

#include <aspen/detail/fd_op.hpp>
#include <aspen/detail/io_handle.hpp>
#include <aspen/task.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace aspen {

// What tcp_stream's read / read_exact / write / write_all (and udp_socket's
// connected send / recv) return; `co_await` it for the byte count.
class [[nodiscard]] transfer_awaitable : public detail::io_awaitable<transfer_awaitable> {
public:
    enum class kind : std::uint8_t { read, read_exact, write, write_all, peek };
    // `stream`: a byte stream (TCP), where a short read or write shows the
    // kernel buffer drained or full; false for datagrams.
    transfer_awaitable(detail::io_source* s, kind k, bool stream, const char* what, void* data, std::size_t size) noexcept
        : claim_(s, k == kind::write || k == kind::write_all),
          data_(static_cast<std::byte*>(data)),
          size_(size),
          kind_(k),
          stream_(stream),
          what_(what) {}

    std::size_t await_resume() {
        rethrow_if_error();
        return done_;
    }
    bool poll(context& cx);
    const char* what() const noexcept { return what_; }

private:
    detail::io_claim claim_;
    std::byte* data_;
    std::size_t size_;
    std::size_t done_ = 0;
    kind kind_;
    bool stream_;
    const char* what_;
};

// co_await s.readable() / s.writable(): done once the reactor reports the
// direction ready, reading and writing nothing (as Tokio's readable() /
// writable()). The report can be stale: try_read / try_write then give
// nullopt, which clears it, so the next readable() / writable() waits for
// new readiness. It occupies the direction's slot while it waits (a
// concurrent read or write throws std::logic_error).
class [[nodiscard]] readiness_awaitable : public detail::io_awaitable<readiness_awaitable> {
public:
    readiness_awaitable(detail::io_source* s, bool write, const char* what) noexcept
        : claim_(s, write), what_(what) {}
    void await_resume() { rethrow_if_error(); }
    bool poll(context& cx);
    const char* what() const noexcept { return what_; }

private:
    detail::io_claim claim_;
    const char* what_;
};

namespace detail {
// try_read / try_write: one non-blocking read or write, unless the cached
// readiness already says the direction is not ready; nullopt when nothing
// could be done now (src/io/tcp.cpp).
std::optional<std::size_t> try_transfer(io_source* s, bool write, void* data, std::size_t size, const char* what);

// The read operations of a byte stream (tcp_stream, unix_stream, their read
// halves, pipe_reader):
// D::source(what) gives its state (std::logic_error if empty), and
// D::read_what / D::read_exact_what name the operations in errors.
template <class D>
class stream_reads {
public:
    // Up to size bytes; 0 means end of stream (or size == 0: then at once,
    // without waiting for data).
    transfer_awaitable read(void* data, std::size_t size) {
        return make(transfer_awaitable::kind::read, D::read_what, data, size);
    }
    transfer_awaitable read(std::span<char> buf) { return read(buf.data(), buf.size()); }
    transfer_awaitable read(std::span<std::byte> buf) { return read(buf.data(), buf.size()); }
    // Exactly size bytes, unless the stream ends first: returns the count
    // read, which is less than size only at end of stream (not an error).
    transfer_awaitable read_exact(void* data, std::size_t size) {
        return make(transfer_awaitable::kind::read_exact, D::read_exact_what, data, size);
    }
    transfer_awaitable read_exact(std::span<char> buf) { return read_exact(buf.data(), buf.size()); }
    transfer_awaitable read_exact(std::span<std::byte> buf) { return read_exact(buf.data(), buf.size()); }
    // As read, but the bytes stay in the socket for the next read (e.g. to
    // sniff a protocol): waits until at least one byte or the end of stream
    // is there, copies up to size of them, consumes none.
    // (Sockets only: a pipe cannot peek.)
    transfer_awaitable peek(void* data, std::size_t size)
        requires requires { D::peek_what; }
    {
        return make(transfer_awaitable::kind::peek, D::peek_what, data, size);
    }
    transfer_awaitable peek(std::span<char> buf)
        requires requires { D::peek_what; }
    {
        return peek(buf.data(), buf.size());
    }
    transfer_awaitable peek(std::span<std::byte> buf)
        requires requires { D::peek_what; }
    {
        return peek(buf.data(), buf.size());
    }
    // The readiness API, for code that drives its own reads (as Tokio's):
    //   for (;;) {
    //       co_await s.readable();
    //       std::optional<std::size_t> n = s.try_read(buf, sizeof buf);
    //       if (!n) continue;          // not ready after all: wait again
    //       if (*n == 0) break;        // end of stream
    //       ...
    //   }
    // try_read never waits and spends no coop budget: it gives the bytes
    // read (0: end of stream, or size == 0), or nullopt if none are there
    // now; errors throw std::system_error. It may be called from any
    // thread, also outside a runtime.
    readiness_awaitable readable() {
        return readiness_awaitable(static_cast<D*>(this)->source(D::readable_what), false, D::readable_what);
    }
    std::optional<std::size_t> try_read(void* data, std::size_t size) {
        return detail::try_transfer(static_cast<D*>(this)->source(D::try_read_what), false, data, size,
                                    D::try_read_what);
    }
    std::optional<std::size_t> try_read(std::span<char> buf) { return try_read(buf.data(), buf.size()); }
    // Reads until end of stream, appending to out; returns how many bytes
    // it appended. The stream must stay where it is until the task ends.
    // Not cancel-safe in the sense of read_exact: what was appended before
    // a cancellation stays in out, and is gone from the stream.
    task<std::size_t> read_to_end(std::string& out) {
        std::size_t total = 0;
        for (;;) {
            std::size_t start = out.size();
            // Doubles the room as the string grows: few reads for a large
            // output, 4 KiB for a small one.
            std::size_t room = start < 4096 ? 4096 : start;
            out.resize(start + room);
            std::size_t n = 0;
            try {
                n = co_await read(out.data() + start, room);
            } catch (...) {
                out.resize(start);
                throw;
            }
            out.resize(start + n);
            if (n == 0) co_return total;
            total += n;
        }
    }
    // Runs f(fd) once the socket is readable: a receive aspen has no
    // operation for (recvmsg with ancillary data, e.g. SCM_RIGHTS on a Unix
    // socket). f's result and errors are read as async_fd reads them
    // (aspen/async_fd.hpp); it occupies the read slot as read does, and is
    // cancel-safe when f is one syscall.
    template <fd_operation F>
    fd_op_awaitable<F> read_with(F f) {
        return fd_op_awaitable<F>(static_cast<D*>(this)->source(D::read_with_what), false, D::read_with_what,
                                  std::move(f));
    }

private:
    transfer_awaitable make(transfer_awaitable::kind k, const char* what, void* data, std::size_t size) {
        return transfer_awaitable(static_cast<D*>(this)->source(what), k, true, what, data, size);
    }
};

// The write operations of a byte stream (tcp_stream, unix_stream, their
// write halves, pipe_writer)
// (D::write_what / D::write_all_what name them).
template <class D>
class stream_writes {
public:
    // Some bytes (at least one unless size == 0: then 0 at once); returns how many.
    transfer_awaitable write(const void* data, std::size_t size) {
        return make(transfer_awaitable::kind::write, D::write_what, data, size);
    }
    transfer_awaitable write(std::string_view s) { return write(s.data(), s.size()); }
    transfer_awaitable write(std::span<const std::byte> buf) { return write(buf.data(), buf.size()); }
    // All size bytes (returns size).
    transfer_awaitable write_all(const void* data, std::size_t size) {
        return make(transfer_awaitable::kind::write_all, D::write_all_what, data, size);
    }
    transfer_awaitable write_all(std::string_view s) { return write_all(s.data(), s.size()); }
    transfer_awaitable write_all(std::span<const std::byte> buf) { return write_all(buf.data(), buf.size()); }
    // writable() / try_write: as readable() / try_read (try_write gives the
    // bytes written, nullopt if the buffer is full now).
    readiness_awaitable writable() {
        return readiness_awaitable(static_cast<D*>(this)->source(D::writable_what), true, D::writable_what);
    }
    std::optional<std::size_t> try_write(const void* data, std::size_t size) {
        return detail::try_transfer(static_cast<D*>(this)->source(D::try_write_what), true, const_cast<void*>(data),
                                    size, D::try_write_what);
    }
    std::optional<std::size_t> try_write(std::string_view s) { return try_write(s.data(), s.size()); }
    // As read_with, once the socket is writable (sendmsg of several buffers
    // or with ancillary data); occupies the write slot.
    template <fd_operation F>
    fd_op_awaitable<F> write_with(F f) {
        return fd_op_awaitable<F>(static_cast<D*>(this)->source(D::write_with_what), true, D::write_with_what,
                                  std::move(f));
    }

private:
    transfer_awaitable make(transfer_awaitable::kind k, const char* what, const void* data, std::size_t size) {
        return transfer_awaitable(static_cast<D*>(this)->source(what), k, true, what, const_cast<void*>(data), size);
    }
};
}  // namespace detail

}  // namespace aspen
