// What the aspen::fs functions (fs.cpp) and fs::file (file.cpp) share:
// errors that name the operation and the path, and metadata from a struct
// stat. Running a function on the blocking pool is blocking/pool_fd.hpp's.
#pragma once

#include <aspen/fs.hpp>
#include <aspen/spawn_blocking.hpp>

#include "blocking/pool_fd.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

namespace aspen::fs::detail {

namespace stdfs = std::filesystem;

using aspen::detail::on_pool;

[[noreturn]] inline void fail(int err, const char* op, const stdfs::path& p) {
    std::string what = "aspen::fs::";
    what.append(op).append("(\"").append(p.string()).append("\")");
    throw std::system_error(err, std::generic_category(), what);
}

// A syscall that returns 0 on success; else throws naming op and the path.
inline void check_zero(int r, const char* op, const stdfs::path& p) {
    if (r != 0) fail(errno, op, p);
}

// A syscall's result, retried on EINTR; other failures throw naming op
// and the path.
template <class Call>
std::size_t retry_eintr(Call call, const char* op, const stdfs::path& p) {
    return aspen::detail::retry_eintr(call, [&](int err) { fail(err, op, p); });
}

// aspen::detail::write_fully, its failures naming op and the path.
inline void write_fully(int fd, const std::string& data, std::optional<std::uint64_t> at, const char* op,
                        const stdfs::path& p) {
    aspen::detail::write_fully(fd, data, at, [&](int err) { fail(err, op, p); });
}

// stat(2)'s mode as std::filesystem's file type.
inline stdfs::file_type type_of(mode_t mode) noexcept {
    switch (mode & S_IFMT) {
        case S_IFREG:
            return stdfs::file_type::regular;
        case S_IFDIR:
            return stdfs::file_type::directory;
        case S_IFLNK:
            return stdfs::file_type::symlink;
        case S_IFBLK:
            return stdfs::file_type::block;
        case S_IFCHR:
            return stdfs::file_type::character;
        case S_IFIFO:
            return stdfs::file_type::fifo;
        case S_IFSOCK:
            return stdfs::file_type::socket;
        default:
            return stdfs::file_type::unknown;
    }
}

inline metadata_t metadata_of(const struct stat& st) {
    metadata_t m;
    m.type = type_of(st.st_mode);
    m.permissions = static_cast<stdfs::perms>(st.st_mode & 07777);
    if (m.is_file()) m.size = static_cast<std::uintmax_t>(st.st_size);
    auto since_epoch = std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec);
    m.modified = std::chrono::file_clock::from_sys(std::chrono::sys_time<std::chrono::nanoseconds>(since_epoch));
    return m;
}

}  // namespace aspen::fs::detail
