// aspen::io::stdin(), stdout(), stderr(): the process's standard streams
// for tasks, as tokio::io::stdin() / stdout() / stderr().
//
//   aspen::io::buf_reader rd(aspen::io::stdin());
//   while (auto line = co_await rd.next_line(1 << 16)) handle(*line);
//
//   aspen::io::stdio_writer out = aspen::io::stdout();
//   co_await out.write_all("done\n");
//
//   auto in = aspen::io::stdin();
//   auto out = aspen::io::stdout();
//   co_await aspen::io::copy(in, out);            // cat
//
// Why the blocking pool (as Tokio): fds 0, 1 and 2 may be regular files,
// which epoll refuses, and making a shared tty or pipe non-blocking would
// change it for every process sharing its open file description (a shell,
// the parent). So each operation is one read(2) or write(2) on a pool
// thread while the task waits, through a buffer of the operation's own (at
// most 2 MiB a call): the pool thread never touches the caller's memory.
// The machinery is fs::file's (aspen/fs/file.hpp): one operation at a time
// per stream, in the order they were made, also when the task that made
// one was aborted while its call runs (the next waits for that call).
//
// stdin(), stdout() and stderr() are each one process-wide stream: every
// handle they return shares its order and (stdin) its held bytes, see
// below. aspen never closes fds 0, 1 and 2. borrow(fd) makes a stream of
// its own over any descriptor the caller keeps open for as long as an
// operation on it may run (a pipe in a test, a terminal opened by the
// program); it is never closed by aspen either. Named borrow, not
// from_native as pipe_reader's, because from_native takes ownership.
//
// Reading blocks a pool thread until input comes: a runtime shut down
// while a read of an idle terminal runs waits for that read (as Tokio's;
// use shutdown_timeout, or do not leave a read running). A stream works
// with io::buf_reader / buf_writer, io::copy and read_frame / write_frame;
// not with copy_bidirectional (no one object both reads and writes).
//
// Cancel safety:
//   read        cancel-safe. Aborted (or timed out) before its pool call
//               started, it never runs. Aborted while its call runs (the
//               common case: waiting for input), the call goes on, and
//               the bytes it reads are held by the stream: the next read
//               returns them first (an end of stream read then, once as
//               0, likewise). Nothing read from the fd is lost.
//   read_exact  not cancel-safe: the bytes it handed over before the abort
//               are in the caller's buffer, but their count is lost.
//   write       aborted before its call started, nothing is written; once
//               the call runs it finishes, and the count is dropped.
//   write_all   all of the bytes or none, in one pool call: aborted before
//               the call started, none; else all (or an error, dropped).
//   flush       cancel-safe (it waits, and writes nothing).
//
// Errors: std::system_error with the errno, naming the operation and the
// fd: EBADF for a closed fd (borrow checks at the call) or one not open for
// that direction; EPIPE for a write to a pipe nobody reads, never SIGPIPE
// (the signal is blocked on the pool thread for the write and taken back,
// as aspen/pipe.hpp's writes do), so the process lives on. An empty
// (moved-from or default-constructed) stream throws std::logic_error.
//
// Portability: glibc defines the macros stdin, stdout and stderr as
// themselves, so aspen::io::stdin() is a plain call there; a C library that
// defines them otherwise (musl: `(stdin)`) breaks the qualified name, so
// use stdio_reader::borrow(0) and stdio_writer::borrow(1) / (2) there.
#pragma once

#include <aspen/task.hpp>

#include <cstddef>
#include <memory>
#include <string_view>

namespace aspen::io {

namespace detail {
struct stdio_state;  // src/io/stdio.cpp
}

class stdio_reader {
public:
    stdio_reader() noexcept = default;  // empty: every operation throws std::logic_error
    stdio_reader(stdio_reader&&) noexcept = default;
    stdio_reader& operator=(stdio_reader&&) noexcept = default;
    ~stdio_reader();

    // A stream of its own over fd, which stays the caller's: open it for
    // reading and keep it open while an operation may run (a read that was
    // aborted included: it runs until input or end of stream). Throws
    // std::system_error(EBADF) if fd is not open.
    static stdio_reader borrow(int fd);

    // Up to size bytes (at most 2 MiB a call): bytes an aborted read left
    // held, else one read(2). 0 at end of stream (or for size 0, at once);
    // on a terminal, reads go on after an end of input (Ctrl-D).
    task<std::size_t> read(void* data, std::size_t size);
    // Exactly size bytes unless the stream ends first: returns the count,
    // less than size only at end of stream.
    task<std::size_t> read_exact(void* data, std::size_t size);

    bool is_open() const noexcept { return static_cast<bool>(s_); }
    // The descriptor (-1 if empty); it is not aspen's to close.
    int native_handle() const noexcept;

private:
    friend stdio_reader stdin();
    explicit stdio_reader(std::shared_ptr<detail::stdio_state> s) noexcept : s_(std::move(s)) {}
    std::shared_ptr<detail::stdio_state> s_;
};

class stdio_writer {
public:
    stdio_writer() noexcept = default;  // empty: every operation throws std::logic_error
    stdio_writer(stdio_writer&&) noexcept = default;
    stdio_writer& operator=(stdio_writer&&) noexcept = default;
    ~stdio_writer();

    // A stream of its own over fd, which stays the caller's (as
    // stdio_reader::borrow), open for writing.
    static stdio_writer borrow(int fd);

    // Some of data (at least one byte unless size is 0; at most 2 MiB), in
    // one write(2); returns how many.
    task<std::size_t> write(const void* data, std::size_t size);
    // All of data, in one pool call (the bytes are copied once, at the call).
    task<void> write_all(const void* data, std::size_t size);
    task<void> write_all(std::string_view s);
    // Nothing is buffered in aspen (each write is a write(2)): flush waits
    // until the calls made before it, an aborted write's included, have
    // returned, and syncs nothing to a device.
    task<void> flush();
    // Does nothing but check the stream is not empty: the descriptor is not
    // closed (Tokio's stdout shutdown is a flush; closing fd 1 would let a
    // later open reuse the number as standard output) and nothing is
    // buffered. There so that buf_writer::shutdown works over a stream.
    void shutdown() const;

    bool is_open() const noexcept { return static_cast<bool>(s_); }
    // The descriptor (-1 if empty); it is not aspen's to close.
    int native_handle() const noexcept;

private:
    friend stdio_writer stdout();
    friend stdio_writer stderr();
    explicit stdio_writer(std::shared_ptr<detail::stdio_state> s) noexcept : s_(std::move(s)) {}
    std::shared_ptr<detail::stdio_state> s_;
};

// The process's standard input (fd 0), output (fd 1) and error (fd 2):
// each a handle to one stream shared by all of that function's handles.
// They throw nothing: a closed fd shows at the first operation (EBADF).
stdio_reader stdin();
stdio_writer stdout();
stdio_writer stderr();

}  // namespace aspen::io
