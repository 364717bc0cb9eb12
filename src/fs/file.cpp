// aspen::fs::file: each operation is a call on the blocking pool under the
// file's busy lock (blocking/pool_fd.hpp: run_exclusive), so an operation
// whose task was aborted while its call runs still holds the next one back
// until the call is done (see the header for why), and the descriptor is
// closed only after the last call on it returned.
#include <aspen/fs.hpp>
#include <aspen/fs/file.hpp>

#include "blocking/pool_fd.hpp"
#include "fs/fs_common.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace aspen::fs {

namespace detail {
struct file_state : aspen::detail::pool_fd {
    file_state(int f, std::filesystem::path p) noexcept : pool_fd(f, true), path(std::move(p)) {}

    const std::filesystem::path path;  // for error messages

    // What a failed call throws: errno, naming op and the path.
    auto failing(const char* op) const {
        return [this, op](int err) { fail(err, op, path); };
    }
};
}  // namespace detail

namespace {

using state_ptr = std::shared_ptr<detail::file_state>;
using aspen::detail::max_pool_chunk;
using aspen::detail::run_exclusive;

}  // namespace

// ---- open_options -------------------------------------------------------------
int open_options::flags() const {
    const char* what = "aspen::fs::open_options";
    bool writes = write_ || append_;
    if (!read_ && !writes) throw std::invalid_argument(std::string(what) + ": none of read, write or append is set");
    if ((create_ || create_new_ || truncate_) && !writes)
        throw std::invalid_argument(std::string(what) + ": create, create_new and truncate need write or append");
    if (truncate_ && append_) throw std::invalid_argument(std::string(what) + ": truncate and append exclude each other");
    int f = O_CLOEXEC | (read_ && writes ? O_RDWR : writes ? O_WRONLY : O_RDONLY);
    if (append_) f |= O_APPEND;
    if (truncate_) f |= O_TRUNC;
    if (create_new_) f |= O_CREAT | O_EXCL;
    else if (create_) f |= O_CREAT;
    return f;
}

// Not a coroutine: the options are read here, at the call, so a temporary
// open_options (open_options().read(true).open(p)) may be gone by the time
// the task runs.
task<file> open_options::open(std::filesystem::path path) const {
    return open_with(std::move(path), flags(), mode_);  // flags() throws here
}

task<file> open_options::open_with(std::filesystem::path path, int flags, unsigned mode) {
    // The path is copied into the call, and the descriptor comes back owned
    // by its state: if this task is aborted while the call runs, nothing
    // the call uses is gone, and a file it opened is closed with the result.
    task<state_ptr> opened = detail::on_pool([path, flags, mode] {
        for (;;) {
            int fd = ::open(path.c_str(), flags, mode);
            if (fd >= 0) return std::make_shared<detail::file_state>(fd, path);
            if (errno != EINTR) detail::fail(errno, "open", path);
        }
    });
    state_ptr st = co_await std::move(opened);
    co_return file(std::move(st));
}

// ---- file -------------------------------------------------------------------------
file::~file() = default;

task<file> file::open(std::filesystem::path path) { return open_options().read(true).open(std::move(path)); }

task<file> file::create(std::filesystem::path path) {
    return open_options().write(true).create(true).truncate(true).open(std::move(path));
}

std::shared_ptr<detail::file_state> file::require(const char* what) const {
    if (!s_) throw std::logic_error(std::string(what) + ": the file is empty (moved-from or default-constructed)");
    return s_;
}

int file::native_handle() const noexcept { return s_ ? s_->fd : -1; }

task<std::size_t> file::read(void* data, std::size_t size) {
    state_ptr s = require("aspen::fs::file::read");
    if (size == 0) co_return 0;
    std::size_t want = std::min(size, max_pool_chunk);
    task<std::string> op = run_exclusive(std::move(s), [want](detail::file_state& st) {
        return aspen::detail::read_some(st.fd, want, st.failing("read"));
    });
    std::string got = co_await std::move(op);
    std::memcpy(data, got.data(), got.size());  // here, in the task: the caller's memory is alive
    co_return got.size();
}

task<std::size_t> file::read_at(void* data, std::size_t size, std::uint64_t offset) {
    state_ptr s = require("aspen::fs::file::read_at");
    if (size == 0) co_return 0;
    std::size_t want = std::min(size, max_pool_chunk);
    task<std::string> op = run_exclusive(std::move(s), [want, offset](detail::file_state& st) {
        std::string buf(want, '\0');
        buf.resize(detail::retry_eintr([&] { return ::pread(st.fd, buf.data(), want, static_cast<off_t>(offset)); },
                                       "read_at", st.path));
        return buf;
    });
    std::string got = co_await std::move(op);
    std::memcpy(data, got.data(), got.size());
    co_return got.size();
}

// The writes copy the caller's bytes into the call at once (see the header),
// so the caller's buffer is free as soon as the call returns.
task<std::size_t> file::write(const void* data, std::size_t size) {
    state_ptr s = require("aspen::fs::file::write");
    std::string bytes(static_cast<const char*>(data), std::min(size, max_pool_chunk));
    return run_exclusive(std::move(s), [bytes = std::move(bytes)](detail::file_state& st) -> std::size_t {
        if (bytes.empty()) return 0;
        return aspen::detail::write_some(st.fd, bytes.data(), bytes.size(), st.failing("write"));
    });
}

task<void> file::write_all(const void* data, std::size_t size) {
    state_ptr s = require("aspen::fs::file::write_all");
    std::string bytes(static_cast<const char*>(data), size);
    return run_exclusive(std::move(s), [bytes = std::move(bytes)](detail::file_state& st) {
        detail::write_fully(st.fd, bytes, std::nullopt, "write_all", st.path);
    });
}

task<void> file::write_all(std::string_view text) { return write_all(text.data(), text.size()); }

task<void> file::write_all_at(const void* data, std::size_t size, std::uint64_t offset) {
    state_ptr s = require("aspen::fs::file::write_all_at");
    std::string bytes(static_cast<const char*>(data), size);
    return run_exclusive(std::move(s), [bytes = std::move(bytes), offset](detail::file_state& st) {
        detail::write_fully(st.fd, bytes, offset, "write_all_at", st.path);
    });
}

task<std::uint64_t> file::seek(std::int64_t offset, seek_from whence) {
    int w = whence == seek_from::start ? SEEK_SET : whence == seek_from::current ? SEEK_CUR : SEEK_END;
    return run_exclusive(require("aspen::fs::file::seek"), [offset, w](detail::file_state& st) {
        off_t r = ::lseek(st.fd, static_cast<off_t>(offset), w);
        if (r < 0) detail::fail(errno, "seek", st.path);
        return static_cast<std::uint64_t>(r);
    });
}

task<void> file::sync_all() {
    return run_exclusive(require("aspen::fs::file::sync_all"),
               [](detail::file_state& st) { detail::check_zero(::fsync(st.fd), "sync_all", st.path); });
}

task<void> file::sync_data() {
    return run_exclusive(require("aspen::fs::file::sync_data"),
               [](detail::file_state& st) { detail::check_zero(::fdatasync(st.fd), "sync_data", st.path); });
}

task<void> file::set_len(std::uint64_t size) {
    return run_exclusive(require("aspen::fs::file::set_len"), [size](detail::file_state& st) {
        detail::check_zero(::ftruncate(st.fd, static_cast<off_t>(size)), "set_len", st.path);
    });
}

task<metadata_t> file::metadata() {
    return run_exclusive(require("aspen::fs::file::metadata"), [](detail::file_state& st) {
        struct stat sb {};
        detail::check_zero(::fstat(st.fd, &sb), "metadata", st.path);
        return detail::metadata_of(sb);
    });
}

}  // namespace aspen::fs
