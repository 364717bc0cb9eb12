// aspen::fs::file and open_options on every runtime kind: writes read back
// byte for byte, positions (seek, read_at, write_all_at), append mode,
// set_len and metadata, open errors naming the path, operations from many
// tasks kept in order, and an aborted read on a FIFO that still holds the
// next operation back and never touches the aborted task's buffer.
#include "net_util.hpp"  // open_fds
#include "runtime_kinds.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <atomic>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using aspen::task;
namespace fs = aspen::fs;
namespace stdfs = std::filesystem;

namespace {

using aspen_test::temp_dir;

std::string content(std::size_t size, unsigned seed) {
    std::string s(size, '\0');
    for (std::size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 53 + seed + (i >> 11)) & 0xFF);
    return s;
}

class FsFile : public ::testing::TestWithParam<int> {};

// 5 MiB written in pieces, then read back through reads that return at
// most 2 MiB each; the position after each; 0 at end of file.
TEST_P(FsFile, WritesReadBackByteForByte) {
    temp_dir dir;
    aspen_test::run_on(
        GetParam(),
        [](stdfs::path p) -> task<void> {
            const std::string data = content(5 << 20, 7);
            fs::file f = co_await fs::open_options().read(true).write(true).create(true).open(p);
            std::size_t at = 0, piece = 1;
            while (at < data.size()) {
                std::size_t n = std::min(piece, data.size() - at);
                co_await f.write_all(data.data() + at, n);
                at += n;
                piece = piece * 7 % 700001 + 1;
            }
            std::uint64_t start = co_await f.seek(0, fs::seek_from::start);
            EXPECT_EQ(start, 0u);
            std::string back(data.size() + 10, '\0');
            std::size_t got = 0;
            for (;;) {
                std::size_t n = co_await f.read(back.data() + got, back.size() - got);
                EXPECT_LE(n, std::size_t{2} << 20);
                if (n == 0) break;
                got += n;
            }
            back.resize(got);
            EXPECT_EQ(back.size(), data.size());
            EXPECT_TRUE(back == data);
            fs::metadata_t m = co_await f.metadata();
            EXPECT_TRUE(m.is_file());
            EXPECT_EQ(m.size, data.size());
            co_await f.sync_all();
        }(stdfs::path(dir.path) / "data"),
        "write and read back");
}

TEST_P(FsFile, PositionsSeekAndLength) {
    temp_dir dir;
    aspen_test::run_on(
        GetParam(),
        [](stdfs::path p) -> task<void> {
            fs::file f = co_await fs::file::create(p);
            co_await f.write_all("hello world");
            co_await f.write_all_at("WORLD", 5, 6);
            std::uint64_t end = co_await f.seek(0, fs::seek_from::current);
            EXPECT_EQ(end, 11u);  // write_all_at did not move the position
            fs::file r = co_await fs::file::open(p);
            char buf[16] = {};
            std::size_t n = co_await r.read_at(buf, 5, 6);
            EXPECT_EQ(std::string(buf, n), "WORLD");
            std::uint64_t pos = co_await r.seek(-5, fs::seek_from::end);
            EXPECT_EQ(pos, 6u);
            n = co_await r.read(buf, sizeof buf);
            EXPECT_EQ(std::string(buf, n), "WORLD");
            co_await f.set_len(5);
            fs::metadata_t m = co_await r.metadata();
            EXPECT_EQ(m.size, 5u);
            co_await f.set_len(8);  // extends with zeros
            n = co_await r.read_at(buf, sizeof buf, 0);
            EXPECT_EQ(std::string(buf, n), std::string("hello\0\0\0", 8));
            co_await f.sync_data();
        }(stdfs::path(dir.path) / "pos"),
        "positions");
}

TEST_P(FsFile, AppendWritesAtTheEnd) {
    temp_dir dir;
    aspen_test::run_on(
        GetParam(),
        [](stdfs::path p) -> task<void> {
            co_await fs::write(p, "one\n");
            fs::file f = co_await fs::open_options().append(true).open(p);
            co_await f.seek(0, fs::seek_from::start);  // append writes at the end all the same
            co_await f.write_all("two\n");
            std::string all = co_await fs::read(p);
            EXPECT_EQ(all, "one\ntwo\n");
        }(stdfs::path(dir.path) / "log"),
        "append");
}

// 16 tasks write 1000-byte blocks through one append-mode file at once:
// each write_all is one call under the file's lock, so every block lands
// whole, none interleaved with another.
TEST_P(FsFile, OperationsFromManyTasksStayWhole) {
    temp_dir dir;
    std::string all = aspen_test::run_on(
        GetParam(),
        [](stdfs::path p) -> task<std::string> {
            fs::file f = co_await fs::open_options().append(true).create(true).open(p);
            std::vector<aspen::join_handle<void>> hs;
            for (int t = 0; t < 16; ++t)
                hs.push_back(aspen::spawn([](fs::file& f, int t) -> task<void> {
                    std::string block(1000, static_cast<char>('a' + t));
                    for (int i = 0; i < 5; ++i) co_await f.write_all(block);
                }(f, t)));
            for (auto& h : hs) co_await h;
            std::string all = co_await fs::read(p);
            co_return all;
        }(stdfs::path(dir.path) / "blocks"),
        "many tasks");
    ASSERT_EQ(all.size(), 16u * 5 * 1000);
    std::vector<int> blocks(16, 0);
    for (std::size_t b = 0; b < all.size(); b += 1000) {
        EXPECT_EQ(all.substr(b, 1000), std::string(1000, all[b])) << "block at " << b;
        ++blocks[all[b] - 'a'];
    }
    for (int t = 0; t < 16; ++t) EXPECT_EQ(blocks[t], 5);
}

TEST_P(FsFile, OpenErrorsNameThePathAndBadOptionsAreRefused) {
    temp_dir dir;
    aspen_test::run_on(
        GetParam(),
        [](stdfs::path d) -> task<void> {
            int code = 0;
            std::string what;
            try {
                (void)co_await fs::file::open(d / "missing");
            } catch (const std::system_error& e) {
                code = e.code().value();
                what = e.what();
            }
            EXPECT_EQ(code, ENOENT);
            EXPECT_NE(what.find("missing"), std::string::npos) << what;
            co_await fs::write(d / "there", "x");
            code = 0;
            try {
                (void)co_await fs::open_options().write(true).create_new(true).open(d / "there");
            } catch (const std::system_error& e) {
                code = e.code().value();
            }
            EXPECT_EQ(code, EEXIST);
            EXPECT_THROW((void)fs::open_options().flags(), std::invalid_argument);                     // no access
            EXPECT_THROW((void)fs::open_options().read(true).create(true).flags(), std::invalid_argument);  // create read-only
            EXPECT_THROW((void)fs::open_options().append(true).truncate(true).flags(), std::invalid_argument);
            fs::file empty;
            EXPECT_FALSE(empty.is_open());
            EXPECT_EQ(empty.native_handle(), -1);
            char c;
            bool refused = false;
            try {
                (void)co_await empty.read(&c, 1);
            } catch (const std::logic_error& e) {
                refused = std::string(e.what()).find("the file is empty") != std::string::npos;
            }
            EXPECT_TRUE(refused);
        }(stdfs::path(dir.path)),
        "open errors");
}

// A read on a FIFO blocks its pool thread until a writer sends. The task
// that awaits it is aborted: it ends at once, its buffer goes with it, and
// the read goes on in a buffer of its own (ASan would report a write into
// the freed frame). The file's next read waits until that read finished,
// then gets the bytes after the ones the aborted read consumed. The file
// is dropped while nothing runs; no descriptor is left.
TEST_P(FsFile, AnAbortedReadHoldsTheNextOneBackAndLosesNoMemory) {
    temp_dir dir;
    stdfs::path fifo = stdfs::path(dir.path) / "fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    int before = net_test::open_fds();
    // The writer end, opened by a plain thread (open blocks until both ends
    // are there), writes six bytes when told to.
    std::atomic<bool> go{false};
    std::thread writer([&] {
        int fd = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
        while (!go.load()) std::this_thread::sleep_for(1ms);
        EXPECT_EQ(::write(fd, "abcdef", 6), 6);
        ::close(fd);
    });
    std::string second = aspen_test::run_on(
        GetParam(),
        [](stdfs::path p, std::atomic<bool>& go) -> task<std::string> {
            fs::file f = co_await fs::file::open(p);
            auto stuck = aspen::spawn([](fs::file& f) -> task<std::size_t> {
                char buf[3];
                std::size_t n = co_await f.read(buf, sizeof buf);
                co_return n;
            }(f));
            co_await aspen::sleep(20ms);  // most likely blocked in read(2) by now; passes either way
            co_await aspen_test::abort_and_join(stuck);
            { auto gone = std::move(stuck); }  // the handle held the frame's memory: free it now
            go.store(true);  // "abc" goes to the aborted read, if it runs, else to the next
            char buf[3] = {};
            std::size_t n = co_await f.read(buf, 3);
            std::string got(buf, n);
            if (got == "abc") {  // the aborted read had not started
                n = co_await f.read(buf, 3);
                got.assign(buf, n);
            }
            co_return got;
        }(fifo, go),
        "aborted read");
    writer.join();
    EXPECT_EQ(second, "def");
    EXPECT_EQ(net_test::open_fds(), before);
}

// A write to a FIFO whose reader has gone throws EPIPE; SIGPIPE stays at
// its default action, so a raised one would end the test binary.
TEST_P(FsFile, AWriteToAFifoNobodyReadsThrowsEpipeWithoutSigpipe) {
    ASSERT_NE(::signal(SIGPIPE, SIG_DFL), SIG_ERR);
    temp_dir dir;
    stdfs::path fifo = stdfs::path(dir.path) / "fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    // The reader: open blocks until the writer is there too; then it goes.
    // release: pairs with the task's acquire load, so the close is done.
    std::atomic<bool> gone{false};
    std::thread reader([&] {
        ::close(::open(fifo.c_str(), O_RDONLY | O_CLOEXEC));
        gone.store(true, std::memory_order_release);
    });
    int err = aspen_test::run_on(
        GetParam(),
        [](stdfs::path p, std::atomic<bool>& gone) -> task<int> {
            fs::file f = co_await fs::open_options().write(true).open(p);
            while (!gone.load(std::memory_order_acquire)) co_await aspen::sleep(1ms);
            try {
                co_await f.write_all("nobody reads this");
            } catch (const std::system_error& e) {
                co_return e.code().value();
            }
            co_return 0;
        }(fifo, gone),
        "fifo epipe");
    reader.join();
    EXPECT_EQ(err, EPIPE);
}

INSTANTIATE_TEST_SUITE_P(Kinds, FsFile, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
