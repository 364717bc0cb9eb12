// aspen::fs::file: an open file whose reads, writes and seeks run on the
// blocking pool, as tokio::fs::File (aspen/fs.hpp has the one-shot
// functions: read a whole file, write one, ...).
//
//   aspen::fs::file log = co_await aspen::fs::open_options().append(true).create(true).open("app.log");
//   co_await log.write_all("started\n");
//   co_await log.sync_data();
//
//   aspen::fs::file f = co_await aspen::fs::file::open("data.bin");
//   std::size_t n = co_await f.read(buf, sizeof buf);   // 0 at end of file
//   co_await f.seek(0, aspen::fs::seek_from::start);
//   std::size_t m = co_await f.read_at(buf, 16, 4096);  // pread: the position stays
//
// Why a pool: Linux has no readiness for regular files (epoll refuses
// them), so each operation is a call on a pool thread while the task waits.
// Bytes cross through a buffer of the operation's own (at most 2 MiB a
// call, as Tokio's): the pool thread never touches the caller's memory, so
// an aborted read cannot write into a buffer that is gone.
//
// One operation at a time per file: a second one waits until the first has
// finished on its pool thread, also when the task that started the first
// was aborted meanwhile. So operations keep their order, and the file
// position is never moved by two calls at once. The descriptor stays open
// until the file object is gone and no operation on it runs any more.
//
// Cancel safety: an operation aborted (or timed out) before its pool call
// started never runs; once it runs it finishes (as in Tokio): a write is
// then done and its result dropped, and a read's bytes are lost (they were
// read from the file and moved its position). The file stays usable.
//
// Errors: std::system_error with the errno, naming the operation and the
// path (a write to a FIFO nobody reads: EPIPE, never SIGPIPE); an empty (moved-from or default-constructed) file throws
// std::logic_error; a bad set of open_options std::invalid_argument.
#pragma once

#include <aspen/fs/metadata.hpp>
#include <aspen/task.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>

namespace aspen::fs {

class file;

namespace detail {
struct file_state;  // src/fs/file.cpp
}

enum class seek_from { start, current, end };

// How to open a file, as Rust's OpenOptions: nothing is set at first; set
// read, write or append, and how to create:
//   create      the file is created if missing (needs write or append)
//   create_new  it must not exist yet (EEXIST otherwise); wins over create
//   truncate    an existing file is cut to length 0 (needs write, not append)
class open_options {
public:
    open_options& read(bool on) noexcept { read_ = on; return *this; }
    open_options& write(bool on) noexcept { write_ = on; return *this; }
    open_options& append(bool on) noexcept { append_ = on; return *this; }
    open_options& truncate(bool on) noexcept { truncate_ = on; return *this; }
    open_options& create(bool on) noexcept { create_ = on; return *this; }
    open_options& create_new(bool on) noexcept { create_new_ = on; return *this; }
    // Permission bits of a created file, less the umask (default 0666).
    open_options& mode(unsigned bits) noexcept { mode_ = bits; return *this; }

    // std::invalid_argument for a combination that cannot open anything
    // (no access mode; create, create_new or truncate without write access;
    // truncate with append), thrown by this call itself. The options are
    // read at the call: the open_options object need not outlive the task.
    task<file> open(std::filesystem::path path) const;

    // open(2)'s flags for these options (std::invalid_argument as above).
    int flags() const;

private:
    static task<file> open_with(std::filesystem::path path, int flags, unsigned mode);
    bool read_ = false, write_ = false, append_ = false, truncate_ = false, create_ = false, create_new_ = false;
    unsigned mode_ = 0666;
};

class file {
public:
    file() noexcept = default;  // empty: every operation throws std::logic_error
    file(file&&) noexcept = default;
    file& operator=(file&&) noexcept = default;
    ~file();

    // Read-only (open_options().read(true)).
    static task<file> open(std::filesystem::path path);
    // Write-only, created if missing, truncated (write, create, truncate).
    static task<file> create(std::filesystem::path path);

    // Up to size bytes (at most 2 MiB a call) from the file position, which
    // moves past them; 0 at end of file (or for size 0).
    task<std::size_t> read(void* data, std::size_t size);
    // Some of data (at least one byte unless size is 0; at most 2 MiB) at
    // the file position (the end, in append mode); returns how many.
    task<std::size_t> write(const void* data, std::size_t size);
    // All of data, in one pool call (the bytes are copied once).
    task<void> write_all(const void* data, std::size_t size);
    task<void> write_all(std::string_view s);
    // pread / pwrite at offset: the file position does not move. write_at
    // writes all of data.
    task<std::size_t> read_at(void* data, std::size_t size, std::uint64_t offset);
    task<void> write_all_at(const void* data, std::size_t size, std::uint64_t offset);
    // Moves the position; returns it, from the start of the file.
    task<std::uint64_t> seek(std::int64_t offset, seek_from whence);
    // fsync / fdatasync: the data (and, for sync_all, the metadata) are on
    // the device when it returns.
    task<void> sync_all();
    task<void> sync_data();
    // Cuts or extends (with zeros) the file to size bytes.
    task<void> set_len(std::uint64_t size);
    task<metadata_t> metadata();

    bool is_open() const noexcept { return static_cast<bool>(s_); }
    // The descriptor (-1 if empty), for calls aspen has no operation for;
    // it stays owned by the file.
    int native_handle() const noexcept;

private:
    friend class open_options;
    explicit file(std::shared_ptr<detail::file_state> s) noexcept : s_(std::move(s)) {}
    // The state, or std::logic_error naming `what` if the file is empty.
    std::shared_ptr<detail::file_state> require(const char* what) const;
    std::shared_ptr<detail::file_state> s_;
};

}  // namespace aspen::fs
