// aspen::io::read_frame / write_frame: length-delimited messages on a byte
// stream, as tokio_util's LengthDelimitedCodec with its defaults: each frame
// is a 4-byte big-endian length, then that many bytes.
//
//   co_await aspen::io::write_frame(conn, "hello");
//   while (std::optional<std::string> f = co_await aspen::io::read_frame(rd, 1 << 20)) handle(*f);
//
// A stream carries bytes, not messages: one read may return half a message
// or two of them. A length prefix gives the message boundaries back, and a
// bound on it keeps a peer from making the reader allocate what it likes.
//
// read_frame(reader, max_frame): the next frame's bytes; nullopt when the
// stream ends cleanly between frames. A length above max_frame throws
// std::length_error before anything of the frame's body is read or
// allocated (the connection is then out of step: drop it); a stream that
// ends inside a frame throws std::runtime_error saying how much came.
// reader: anything with read_exact(void*, size_t) giving the count read
// (the streams, their read halves, pipes, io::buf_reader: use one to read
// many small frames with few syscalls).
//
// write_frame(writer, payload): the header and the payload in one
// write_all (one syscall on a socket, so TCP_NODELAY sends one segment).
// A payload over 4 GiB - 1 throws std::length_error (at the call). The
// payload is copied at the call. writer: anything with
// write_all(const void*, size_t) (the streams, their write halves, pipes,
// io::buf_writer: flush it).
//
// Cancel safety: neither is cancel-safe. A read_frame aborted in the middle
// leaves the stream inside a frame; a write_frame aborted in the middle may
// have sent part of one. Read and write frames in tasks that are not
// aborted, or drop the connection when they are.
#pragma once

#include <aspen/task.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace aspen::io {

// tokio_util's default maximum frame length.
inline constexpr std::size_t default_max_frame = std::size_t{8} << 20;

namespace detail {
inline std::uint32_t frame_length(const unsigned char* h) noexcept {
    return std::uint32_t{h[0]} << 24 | std::uint32_t{h[1]} << 16 | std::uint32_t{h[2]} << 8 | std::uint32_t{h[3]};
}
[[noreturn]] inline void truncated_frame(std::size_t got, std::size_t want) {
    throw std::runtime_error("aspen::io::read_frame: the stream ended inside a frame (" + std::to_string(got) +
                             " of " + std::to_string(want) + " bytes)");
}
}  // namespace detail

template <class R>
task<std::optional<std::string>> read_frame(R& reader, std::size_t max_frame = default_max_frame) {
    unsigned char header[4];
    std::size_t got = co_await reader.read_exact(header, sizeof header);
    if (got == 0) co_return std::nullopt;  // a clean end, between frames
    if (got < sizeof header) detail::truncated_frame(got, sizeof header);
    const std::uint32_t length = detail::frame_length(header);
    if (length > max_frame)
        throw std::length_error("aspen::io::read_frame: a frame of " + std::to_string(length) +
                                " bytes, over the limit of " + std::to_string(max_frame));
    std::string body(length, '\0');
    std::size_t read = co_await reader.read_exact(body.data(), length);
    if (read < length) detail::truncated_frame(sizeof header + read, sizeof header + length);
    co_return body;
}

namespace detail {
template <class W>
task<void> write_bytes(W& writer, std::string bytes) {
    co_await writer.write_all(bytes.data(), bytes.size());
}
}  // namespace detail

// Not a coroutine: the frame is built (the payload copied) at the call, so
// the payload need not outlive the task.
template <class W>
task<void> write_frame(W& writer, std::string_view payload) {
    if (payload.size() > UINT32_MAX)
        throw std::length_error("aspen::io::write_frame: a payload of " + std::to_string(payload.size()) +
                                " bytes does not fit a 4-byte length");
    const auto n = static_cast<std::uint32_t>(payload.size());
    std::string frame;
    frame.reserve(4 + payload.size());
    frame.push_back(static_cast<char>(n >> 24));
    frame.push_back(static_cast<char>(n >> 16));
    frame.push_back(static_cast<char>(n >> 8));
    frame.push_back(static_cast<char>(n));
    frame.append(payload);
    return detail::write_bytes(writer, std::move(frame));
}

}  // namespace aspen::io
