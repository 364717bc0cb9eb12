// aspen::fs::metadata_t: what fs::metadata(path) and fs::file::metadata()
// report.
#pragma once

#include <cstdint>
#include <filesystem>

namespace aspen::fs {

// What metadata() reports (fs::metadata follows symlinks).
struct metadata_t {
    std::filesystem::file_type type = std::filesystem::file_type::none;
    std::uintmax_t size = 0;  // bytes, for a regular file; 0 for others
    std::filesystem::perms permissions = std::filesystem::perms::none;
    std::filesystem::file_time_type modified{};
    bool is_file() const noexcept { return type == std::filesystem::file_type::regular; }
    bool is_directory() const noexcept { return type == std::filesystem::file_type::directory; }
};

}  // namespace aspen::fs
