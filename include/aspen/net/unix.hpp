// Unix domain stream sockets: aspen::unix_listener and aspen::unix_stream,
// for local IPC (as Tokio's UnixListener and UnixStream).
//
//   auto listener = aspen::unix_listener::bind("/run/app/app.sock");
//   aspen::unix_stream conn = co_await listener.accept();
//   aspen::unix_stream c = co_await aspen::unix_stream::connect("/run/app/app.sock");
//   auto [a, b] = aspen::unix_stream::pair();   // connected to each other, unnamed
//
// read, read_exact, peek, write, write_all and shutdown behave as
// tcp_stream's, with the same rules (one read-side and one write-side
// operation at a time, closing under a waiting operation makes it throw
// ECANCELED, coop budget) and the same cancel safety (aspen/net/tcp.hpp).
// into_split gives a unix_read_half and a unix_write_half, as for TCP.
//
// Paths: at most 107 bytes and no NUL byte, else std::invalid_argument. A
// path that starts with '@' names a socket in Linux's abstract namespace
// (no file; the name goes with its last socket); write "./@name" for a file
// of that name. bind fails with EADDRINUSE when the path exists, and the
// socket file stays after the listener is closed: remove it first
// (std::filesystem::remove), as with Tokio.
//
// connect completes at once on Linux, or, while the listener's backlog is
// full, tries again every millisecond until there is room (cancel-safe: an
// aborted connect closes its socket). Nobody listening: std::system_error
// with ENOENT (no such path) or ECONNREFUSED (a stale socket file).
#pragma once

#include <aspen/detail/io_handle.hpp>
#include <aspen/net/tcp.hpp>
#include <aspen/time.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <utility>

namespace aspen {

class unix_stream;
class unix_read_half;
class unix_write_half;

// co_await listener.accept() -> unix_stream.
class [[nodiscard]] unix_accept_awaitable : public detail::io_awaitable<unix_accept_awaitable> {
public:
    explicit unix_accept_awaitable(detail::io_source* s) noexcept : claim_(s, false) {}
    unix_stream await_resume();
    bool poll(context& cx);
    static const char* what() noexcept { return "aspen::unix_listener::accept"; }

private:
    detail::io_claim claim_;
    detail::io_handle accepted_;
};

// co_await unix_stream::connect(path) -> unix_stream.
class [[nodiscard]] unix_connect_awaitable : public detail::io_awaitable<unix_connect_awaitable> {
public:
    explicit unix_connect_awaitable(std::string path);
    unix_stream await_resume();
    bool poll(context& cx);
    static const char* what() noexcept { return "aspen::unix_stream::connect"; }

private:
    std::string path_;
    detail::io_handle io_;
    std::optional<timer> retry_;  // armed while the listener's backlog is full
};

// The peer process of a connected socket, as the kernel saw it at connect
// (SO_PEERCRED).
struct unix_credentials {
    pid_t pid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
};

class unix_stream : public detail::stream_reads<unix_stream>, public detail::stream_writes<unix_stream> {
public:
    unix_stream() noexcept = default;  // empty: every operation throws std::logic_error
    unix_stream(unix_stream&&) noexcept = default;
    unix_stream& operator=(unix_stream&&) noexcept = default;

    static unix_connect_awaitable connect(std::string path) { return unix_connect_awaitable(std::move(path)); }
    // Two connected, unnamed sockets (socketpair), e.g. for a parent and a
    // child process or two tasks. Synchronous.
    static std::pair<unix_stream, unix_stream> pair();
    // Takes ownership of a connected Unix stream socket (made non-blocking).
    static unix_stream from_native(int fd);

    // read, read_exact, peek, read_to_end, read_with (stream_reads), write, write_all,
    // write_with (stream_writes): read_with / write_with with sendmsg and
    // recvmsg pass descriptors (SCM_RIGHTS).

    // The read half and the write half of this stream, which is left empty
    // (see "Split" in aspen/net/tcp.hpp). std::logic_error if it is empty.
    std::pair<unix_read_half, unix_write_half> into_split() &&;

    void shutdown(shutdown_mode how = shutdown_mode::write);
    // The socket's own path and the peer's: "@name" in the abstract
    // namespace, "" for an unnamed socket (a connecting side, a pair).
    std::string local_path() const;
    std::string peer_path() const;
    unix_credentials peer_credentials() const;
    int native_handle() const noexcept { return io_.fd(); }
    bool is_open() const noexcept { return static_cast<bool>(io_); }

private:
    friend class unix_accept_awaitable;
    friend class unix_connect_awaitable;
    friend class detail::stream_reads<unix_stream>;
    friend class detail::stream_writes<unix_stream>;
    static constexpr const char* read_what = "aspen::unix_stream::read";
    static constexpr const char* read_exact_what = "aspen::unix_stream::read_exact";
    static constexpr const char* peek_what = "aspen::unix_stream::peek";
    static constexpr const char* read_with_what = "aspen::unix_stream::read_with";
    static constexpr const char* readable_what = "aspen::unix_stream::readable";
    static constexpr const char* try_read_what = "aspen::unix_stream::try_read";
    static constexpr const char* write_with_what = "aspen::unix_stream::write_with";
    static constexpr const char* writable_what = "aspen::unix_stream::writable";
    static constexpr const char* try_write_what = "aspen::unix_stream::try_write";
    static constexpr const char* write_what = "aspen::unix_stream::write";
    static constexpr const char* write_all_what = "aspen::unix_stream::write_all";
    explicit unix_stream(detail::io_handle io) noexcept : io_(std::move(io)) {}
    detail::io_source* source(const char* what) const { return io_.require(what); }
    detail::io_handle io_;
};

namespace detail {
// A Unix half's paths.
class unix_half : public stream_half {
public:
    std::string local_path() const;
    std::string peer_path() const;

protected:
    using stream_half::stream_half;
};
}  // namespace detail

// The read side of a split stream: read, read_exact, peek, the paths.
class unix_read_half : public detail::unix_half, public detail::stream_reads<unix_read_half> {
public:
    unix_read_half() noexcept = default;
    unix_read_half(unix_read_half&&) noexcept = default;
    unix_read_half& operator=(unix_read_half&&) noexcept = default;

private:
    friend class unix_stream;
    friend class detail::stream_reads<unix_read_half>;
    static constexpr const char* read_what = "aspen::unix_read_half::read";
    static constexpr const char* read_exact_what = "aspen::unix_read_half::read_exact";
    static constexpr const char* peek_what = "aspen::unix_read_half::peek";
    static constexpr const char* read_with_what = "aspen::unix_read_half::read_with";
    static constexpr const char* readable_what = "aspen::unix_read_half::readable";
    static constexpr const char* try_read_what = "aspen::unix_read_half::try_read";
    explicit unix_read_half(detail::io_source* s) noexcept : unix_half(s, false) {}
};

// The write side: write, write_all, shutdown; destroying it (or assigning
// to it) shuts the write direction down, so the peer reads end of stream.
class unix_write_half : public detail::unix_half, public detail::stream_writes<unix_write_half> {
public:
    unix_write_half() noexcept = default;
    unix_write_half(unix_write_half&&) noexcept = default;
    unix_write_half& operator=(unix_write_half&&) noexcept = default;

    // shutdown(write) now (synchronous). std::system_error on failure.
    void shutdown() { shutdown_write("aspen::unix_write_half::shutdown"); }

private:
    friend class unix_stream;
    friend class detail::stream_writes<unix_write_half>;
    static constexpr const char* write_what = "aspen::unix_write_half::write";
    static constexpr const char* write_all_what = "aspen::unix_write_half::write_all";
    static constexpr const char* write_with_what = "aspen::unix_write_half::write_with";
    static constexpr const char* writable_what = "aspen::unix_write_half::writable";
    static constexpr const char* try_write_what = "aspen::unix_write_half::try_write";
    explicit unix_write_half(detail::io_source* s) noexcept : unix_half(s, true) {}
};

class unix_listener {
public:
    unix_listener() noexcept = default;  // empty
    unix_listener(unix_listener&&) noexcept = default;
    unix_listener& operator=(unix_listener&&) noexcept = default;

    // A listening socket at path (see "Paths" above). Synchronous.
    static unix_listener bind(std::string_view path, int backlog = 1024);
    unix_accept_awaitable accept() { return unix_accept_awaitable(io_.require("aspen::unix_listener::accept")); }
    std::string local_path() const;
    int native_handle() const noexcept { return io_.fd(); }
    bool is_open() const noexcept { return static_cast<bool>(io_); }

private:
    explicit unix_listener(detail::io_handle io) noexcept : io_(std::move(io)) {}
    detail::io_handle io_;
};

inline unix_stream unix_accept_awaitable::await_resume() {
    rethrow_if_error();
    return unix_stream(std::move(accepted_));
}

inline unix_stream unix_connect_awaitable::await_resume() {
    rethrow_if_error();
    return unix_stream(std::move(io_));
}

}  // namespace aspen
