// Unix domain socket addresses, for the stream (unix.cpp) and datagram
// (unix_datagram.cpp) sockets: a path ("@name": the abstract namespace) to
// a sockaddr_un and back.
#pragma once

#include "io/io_source.hpp"

#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

namespace aspen::detail {

struct unix_address {
    sockaddr_un sa{};
    socklen_t len = 0;
};

inline constexpr std::size_t path_offset = offsetof(sockaddr_un, sun_path);

// The address of path ("@name": abstract); std::invalid_argument naming
// `what` and the path if it cannot be one.
inline unix_address make_address(std::string_view path, const char* what) {
    unix_address a;
    const std::string quoted = std::string(what) + ": the path \"" + std::string(path) + "\"";
    if (path.empty()) throw std::invalid_argument(std::string(what) + ": the path is empty");
    if (path.find('\0') != std::string_view::npos) throw std::invalid_argument(quoted + " contains a NUL byte");
    if (path.size() >= sizeof a.sa.sun_path)
        throw std::invalid_argument(quoted + " is " + std::to_string(path.size()) + " bytes; at most " +
                                    std::to_string(sizeof a.sa.sun_path - 1) + " fit in a sockaddr_un");
    a.sa.sun_family = AF_UNIX;
    std::memcpy(a.sa.sun_path, path.data(), path.size());
    bool abstract = path.front() == '@';
    if (abstract) a.sa.sun_path[0] = '\0';
    // An abstract name is exactly its bytes; a file path ends with its NUL.
    a.len = static_cast<socklen_t>(path_offset + path.size() + (abstract ? 0 : 1));
    return a;
}

inline std::string path_of(const sockaddr_un& sa, socklen_t len) {
    if (len <= path_offset) return {};  // unnamed
    std::size_t n = len - path_offset;
    if (sa.sun_path[0] == '\0') {
        std::string name(1, '@');  // append, not operator+: g++ 12 -O3 warns falsely (-Wrestrict)
        name.append(sa.sun_path + 1, n - 1);
        return name;
    }
    return std::string(sa.sun_path, ::strnlen(sa.sun_path, n));
}

template <class Query>
std::string query_path(int fd, Query query, const char* what) {
    sockaddr_un sa{};
    socklen_t len = sizeof sa;
    if (query(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) throw_errno(errno, what);
    return path_of(sa, len);
}

inline std::string describe(const char* what, std::string_view path) {
    return std::string(what) + " " + std::string(path);
}

}  // namespace aspen::detail
