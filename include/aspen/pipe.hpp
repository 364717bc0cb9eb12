// Pipes on the reactor: aspen::pipe_reader and aspen::pipe_writer, as
// Tokio's unix::pipe. A child process's piped stdin, stdout and stderr
// (aspen/process.hpp) are these; aspen::pipe() makes a pair.
//
//   auto [rd, wr] = aspen::pipe();
//   co_await wr.write_all("hello");
//   wr = {};                                  // the reader sees end of file
//   std::string text;
//   co_await rd.read_to_end(text);
//
// The operations are the stream operations of aspen/net/tcp.hpp (read,
// read_exact, read_to_end, read_with; write, write_all, write_with), with
// its rules (one read and one write in progress at a time per end,
// destroying an end under a waiting operation makes it throw
// std::system_error(ECANCELED), one unit of coop budget per operation) and
// its cancel safety: read and write are cancel-safe, read_exact, write_all
// and read_to_end are not. A pipe cannot peek.
//
// A write to a pipe whose reading end is closed everywhere throws
// std::system_error(EPIPE); it never raises SIGPIPE (the signal is blocked
// on the writing thread for the write and a SIGPIPE it raised is taken
// back), so the process lives on with SIGPIPE's default action in place.
#pragma once

#include <aspen/detail/io_handle.hpp>
#include <aspen/detail/stream_ops.hpp>

#include <utility>

namespace aspen {

class pipe_reader;
class pipe_writer;

// A new pipe (pipe2 with O_NONBLOCK | O_CLOEXEC): its reading and writing
// ends. std::system_error (EMFILE, ENFILE) on failure.
std::pair<pipe_reader, pipe_writer> pipe();

class pipe_reader : public detail::stream_reads<pipe_reader> {
public:
    pipe_reader() noexcept = default;  // empty: every operation throws std::logic_error
    pipe_reader(pipe_reader&&) noexcept = default;
    pipe_reader& operator=(pipe_reader&&) noexcept = default;

    // Takes ownership of the reading end of a pipe or FIFO (made
    // non-blocking). std::invalid_argument if fd is not one (the fd then
    // stays the caller's), std::system_error(EBADF) if it is not open.
    static pipe_reader from_native(int fd);

    int native_handle() const noexcept { return io_.fd(); }
    bool is_open() const noexcept { return static_cast<bool>(io_); }

private:
    friend class detail::stream_reads<pipe_reader>;
    friend std::pair<pipe_reader, pipe_writer> pipe();
    static constexpr const char* read_what = "aspen::pipe_reader::read";
    static constexpr const char* read_exact_what = "aspen::pipe_reader::read_exact";
    static constexpr const char* read_with_what = "aspen::pipe_reader::read_with";
    static constexpr const char* readable_what = "aspen::pipe_reader::readable";
    static constexpr const char* try_read_what = "aspen::pipe_reader::try_read";
    explicit pipe_reader(detail::io_handle io) noexcept : io_(std::move(io)) {}
    detail::io_source* source(const char* what) const { return io_.require(what); }
    detail::io_handle io_;
};

class pipe_writer : public detail::stream_writes<pipe_writer> {
public:
    pipe_writer() noexcept = default;  // empty
    pipe_writer(pipe_writer&&) noexcept = default;
    pipe_writer& operator=(pipe_writer&&) noexcept = default;

    // Takes ownership of the writing end of a pipe or FIFO, as
    // pipe_reader::from_native.
    static pipe_writer from_native(int fd);

    int native_handle() const noexcept { return io_.fd(); }
    bool is_open() const noexcept { return static_cast<bool>(io_); }

private:
    friend class detail::stream_writes<pipe_writer>;
    friend std::pair<pipe_reader, pipe_writer> pipe();
    static constexpr const char* write_what = "aspen::pipe_writer::write";
    static constexpr const char* write_all_what = "aspen::pipe_writer::write_all";
    static constexpr const char* write_with_what = "aspen::pipe_writer::write_with";
    static constexpr const char* writable_what = "aspen::pipe_writer::writable";
    static constexpr const char* try_write_what = "aspen::pipe_writer::try_write";
    explicit pipe_writer(detail::io_handle io) noexcept : io_(std::move(io)) {}
    detail::io_source* source(const char* what) const { return io_.require(what); }
    detail::io_handle io_;
};

}  // namespace aspen
