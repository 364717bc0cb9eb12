// Files and directories without blocking a worker, as tokio::fs: each
// function runs its filesystem calls on the blocking pool
// (aspen/spawn_blocking.hpp) while the awaiting task is suspended.
//
//   std::string config = co_await aspen::fs::read("/etc/app.conf");
//   co_await aspen::fs::write("/tmp/app/out.txt", text);
//   for (const auto& entry : co_await aspen::fs::read_dir("/tmp/app")) ...
//
// Linux has no readiness for regular files (epoll refuses them), so file
// I/O cannot go through the reactor; a pool thread per operation in flight
// is what Tokio does too. Each function is a lazy task: nothing happens
// until it is awaited, and it must be awaited inside a runtime.
//
// Errors are std::system_error (std::filesystem::filesystem_error, which
// is one, for the std::filesystem based calls) with the errno and the
// path(s) in the message.
//
// Cancellation: aborting the awaiting task (or losing a timeout race)
// before the pool thread has started the call means it never runs; once it
// runs it cannot be interrupted and finishes on its thread (a write then
// completes, its result is dropped), as in Tokio.
#pragma once

#include <aspen/fs/file.hpp>  // fs::file, open_options: an open file
#include <aspen/fs/metadata.hpp>
#include <aspen/task.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace aspen::fs {

// The whole file.
task<std::string> read(std::filesystem::path path);
// Creates or truncates the file and writes data (mode 0666 less the umask).
task<void> write(std::filesystem::path path, std::string data);
// Adds data at the end of the file, creating it if needed.
task<void> append(std::filesystem::path path, std::string data);
// Copies a file; returns the bytes copied. An existing `to` is replaced.
task<std::uintmax_t> copy(std::filesystem::path from, std::filesystem::path to);
task<void> rename(std::filesystem::path from, std::filesystem::path to);
task<void> remove_file(std::filesystem::path path);
// An empty directory.
task<void> remove_dir(std::filesystem::path path);
// A directory and everything in it; returns how many files and directories
// were removed (0 if it did not exist).
task<std::uintmax_t> remove_dir_all(std::filesystem::path path);
task<void> create_dir(std::filesystem::path path);
// With every missing parent; an existing directory is fine.
task<void> create_dir_all(std::filesystem::path path);
// The entries of a directory (not "." and ".."), sorted by name.
task<std::vector<std::filesystem::path>> read_dir(std::filesystem::path path);
task<metadata_t> metadata(std::filesystem::path path);
// Whether something is at path (false for a broken symlink); an error other
// than "not there" (EACCES on a parent, ...) throws.
task<bool> exists(std::filesystem::path path);
// The absolute path with every symlink, "." and ".." resolved; it must exist.
task<std::filesystem::path> canonicalize(std::filesystem::path path);

}  // namespace aspen::fs
