// aspen::io::read_frame / write_frame on every runtime kind: frames of many
// sizes (0 to 1 MiB) round-trip in order through a Unix stream pair, raw and
// through buf_reader / buf_writer; the wire format is a 4-byte big-endian
// length; a clean end gives nullopt, a cut one an error saying how much came,
// and a length over the limit is refused before the body is read.
#include "runtime_kinds.hpp"

#include <aspen/io/all.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

using aspen::task;
using aspen::unix_stream;

namespace {

class IoFrame : public ::testing::TestWithParam<int> {};

std::string payload(std::size_t size, std::size_t seed) {
    std::string s(size, '\0');
    for (std::size_t i = 0; i < size; ++i) s[i] = static_cast<char>((seed * 97 + i * 31 + (i >> 8)) & 0xFF);
    return s;
}

const std::vector<std::size_t> sizes = {0, 1, 3, 4, 5, 100, 4095, 4096, 65537, std::size_t{1} << 20};

// A writer task sends every size as a frame, then ends the stream; the
// reader gets each back, whole and in order, then nullopt.
TEST_P(IoFrame, FramesOfEverySizeRoundTripInOrder) {
    for (bool buffered : {false, true}) {
        std::size_t matched = aspen_test::run_on(
            GetParam(),
            [](bool buffered) -> task<std::size_t> {
                auto [a, b] = unix_stream::pair();
                auto writer = aspen::spawn([](unix_stream a, bool buffered) -> task<void> {
                    if (buffered) {
                        aspen::io::buf_writer wr(std::move(a), 1000);
                        for (std::size_t k = 0; k < sizes.size(); ++k) {
                            std::string p = payload(sizes[k], k);  // named: README, "Compiler caveats"
                            co_await aspen::io::write_frame(wr, p);
                        }
                        co_await wr.shutdown();
                    } else {
                        for (std::size_t k = 0; k < sizes.size(); ++k) {
                            std::string p = payload(sizes[k], k);
                            co_await aspen::io::write_frame(a, p);
                        }
                        a.shutdown();
                    }
                }(std::move(a), buffered));
                std::size_t matched = 0;
                aspen::io::buf_reader<unix_stream&> rd(b, 777);
                for (std::size_t k = 0;; ++k) {
                    std::optional<std::string> f;
                    if (buffered) f = co_await aspen::io::read_frame(rd);
                    else f = co_await aspen::io::read_frame(b);
                    if (!f) break;
                    matched += k < sizes.size() && *f == payload(sizes[k], k);
                }
                co_await writer;
                co_return matched;
            }(buffered),
            "frames");
        EXPECT_EQ(matched, sizes.size()) << (buffered ? "buffered" : "raw");
    }
}

TEST_P(IoFrame, TheWireFormatIsABigEndianLengthThenTheBytes) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            auto [a, b] = unix_stream::pair();
            co_await aspen::io::write_frame(a, "hey");
            char wire[7] = {};
            EXPECT_EQ(co_await b.read_exact(wire, sizeof wire), sizeof wire);
            EXPECT_EQ(std::string(wire, sizeof wire), std::string("\0\0\0\3hey", 7));
            // And a hand-made frame of 258 bytes reads back.
            std::string big(258, 'x');
            std::string hand = std::string("\0\0\1\2", 4) + big;
            co_await a.write_all(hand.data(), hand.size());
            std::optional<std::string> f = co_await aspen::io::read_frame(b);
            EXPECT_EQ(f, std::optional<std::string>(big));
        }(),
        "wire format");
}

// What read_frame throws when the stream carries `wire`, then ends.
task<std::string> cut_stream_error(std::string wire) {
    auto [a, b] = unix_stream::pair();
    co_await a.write_all(wire.data(), wire.size());
    a.shutdown();
    try {
        (void)co_await aspen::io::read_frame(b);
    } catch (const std::runtime_error& e) {
        co_return e.what();
    }
    co_return "(nothing thrown)";
}

// A length over the limit is refused from the header alone; a stream cut
// inside the header or inside the body says how much came.
TEST_P(IoFrame, OversizedAndTruncatedFramesAreErrors) {
    aspen_test::run_on(
        GetParam(),
        []() -> task<void> {
            {
                auto [a, b] = unix_stream::pair();
                std::string p = payload(2000, 1);
                co_await aspen::io::write_frame(a, p);
                std::string what;
                try {
                    (void)co_await aspen::io::read_frame(b, 1000);
                } catch (const std::length_error& e) {
                    what = e.what();
                }
                EXPECT_NE(what.find("a frame of 2000 bytes, over the limit of 1000"), std::string::npos) << what;
                char next;  // the body was not read: it is all still there
                EXPECT_EQ(co_await b.read_exact(&next, 1), 1u);
                EXPECT_EQ(next, payload(2000, 1)[0]);
            }
            // The tasks named first: their string arguments stay out of the
            // co_await's full-expression (README, "Compiler caveats").
            task<std::string> in_header = cut_stream_error(std::string("\0\0", 2));
            std::string header_cut = co_await std::move(in_header);
            EXPECT_NE(header_cut.find("(2 of 4 bytes)"), std::string::npos) << header_cut;
            task<std::string> in_body = cut_stream_error(std::string("\0\0\0\x0a", 4) + "abc");
            std::string body_cut = co_await std::move(in_body);
            EXPECT_NE(body_cut.find("(7 of 14 bytes)"), std::string::npos) << body_cut;
        }(),
        "bad frames");
}

INSTANTIATE_TEST_SUITE_P(Kinds, IoFrame, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
