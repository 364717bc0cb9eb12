// aspen::fs: each operation is a function run on the blocking pool (see the
// header for why). Reads and writes are POSIX calls, so their errors name
// the path and keep the errno; the rest is std::filesystem.
#include <aspen/fs.hpp>

#include "fs/fs_common.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

namespace aspen::fs {

namespace {

namespace stdfs = std::filesystem;
using detail::fail;
using detail::metadata_of;
using detail::on_pool;

// A descriptor closed on every path out; close_checked reports a failed
// close (a write that only then proves lost, e.g. on NFS).
class open_fd {
public:
    open_fd(const stdfs::path& p, int flags, const char* op) : path_(p), op_(op) {
        do fd_ = ::open(p.c_str(), flags | O_CLOEXEC, 0666);
        while (fd_ < 0 && errno == EINTR);
        if (fd_ < 0) fail(errno, op, p);
    }
    open_fd(const open_fd&) = delete;
    open_fd& operator=(const open_fd&) = delete;
    ~open_fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    int fd() const noexcept { return fd_; }
    void close_checked() {
        int r = ::close(std::exchange(fd_, -1));
        if (r != 0 && errno != EINTR) fail(errno, op_, path_);
    }

private:
    const stdfs::path& path_;
    const char* op_;
    int fd_ = -1;
};

std::string read_file(const stdfs::path& p) {
    open_fd f(p, O_RDONLY, "read");
    struct stat st {};
    detail::check_zero(::fstat(f.fd(), &st), "read", p);
    // One byte more than the size, so a file read whole ends with a read
    // of 0 at once; files that report no size (/proc) grow the buffer.
    std::string out(std::max<std::size_t>(static_cast<std::size_t>(st.st_size) + 1, 4096), '\0');
    std::size_t used = 0;
    for (;;) {
        if (used == out.size()) out.resize(out.size() * 2);
        std::size_t n = detail::retry_eintr([&] { return ::read(f.fd(), out.data() + used, out.size() - used); }, "read", p);
        if (n == 0) break;
        used += n;
    }
    out.resize(used);
    return out;
}

void write_file(const stdfs::path& p, const std::string& data, int flags, const char* op) {
    open_fd f(p, O_WRONLY | O_CREAT | flags, op);
    detail::write_fully(f.fd(), data, std::nullopt, op, p);
    f.close_checked();
}

}  // namespace

task<std::string> read(stdfs::path path) {
    return on_pool([path = std::move(path)] { return read_file(path); });
}

task<void> write(stdfs::path path, std::string data) {
    return on_pool([path = std::move(path), data = std::move(data)] { write_file(path, data, O_TRUNC, "write"); });
}

task<void> append(stdfs::path path, std::string data) {
    return on_pool([path = std::move(path), data = std::move(data)] { write_file(path, data, O_APPEND, "append"); });
}

task<std::uintmax_t> copy(stdfs::path from, stdfs::path to) {
    return on_pool([from = std::move(from), to = std::move(to)] {
        stdfs::copy_file(from, to, stdfs::copy_options::overwrite_existing);
        return stdfs::file_size(to);
    });
}

task<void> rename(stdfs::path from, stdfs::path to) {
    return on_pool([from = std::move(from), to = std::move(to)] { stdfs::rename(from, to); });
}

task<void> remove_file(stdfs::path path) {
    return on_pool([path = std::move(path)] { detail::check_zero(::unlink(path.c_str()), "remove_file", path); });
}

task<void> remove_dir(stdfs::path path) {
    return on_pool([path = std::move(path)] { detail::check_zero(::rmdir(path.c_str()), "remove_dir", path); });
}

task<std::uintmax_t> remove_dir_all(stdfs::path path) {
    return on_pool([path = std::move(path)] { return stdfs::remove_all(path); });
}

task<void> create_dir(stdfs::path path) {
    return on_pool([path = std::move(path)] { detail::check_zero(::mkdir(path.c_str(), 0777), "create_dir", path); });
}

task<void> create_dir_all(stdfs::path path) {
    return on_pool([path = std::move(path)] { stdfs::create_directories(path); });
}

task<std::vector<stdfs::path>> read_dir(stdfs::path path) {
    return on_pool([path = std::move(path)] {
        std::vector<stdfs::path> entries;
        for (const stdfs::directory_entry& e : stdfs::directory_iterator(path)) entries.push_back(e.path());
        std::sort(entries.begin(), entries.end());
        return entries;
    });
}

task<metadata_t> metadata(stdfs::path path) {
    // One stat(2) for all of it: one syscall, and a consistent snapshot.
    return on_pool([path = std::move(path)] {
        struct stat st {};
        detail::check_zero(::stat(path.c_str(), &st), "metadata", path);
        return metadata_of(st);
    });
}

task<bool> exists(stdfs::path path) {
    return on_pool([path = std::move(path)] { return stdfs::exists(path); });
}

task<stdfs::path> canonicalize(stdfs::path path) {
    return on_pool([path = std::move(path)] { return stdfs::canonical(path); });
}

}  // namespace aspen::fs
