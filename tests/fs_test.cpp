// aspen::fs: writes read back byte for byte, appends, copies, renames,
// directories, metadata, errors naming the path, 64 reads at once, and a
// worker that keeps running tasks while the pool does the file work; on
// every runtime kind.
#include "runtime_kinds.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

using namespace std::chrono_literals;
using aspen::task;
namespace fs = aspen::fs;
namespace stdfs = std::filesystem;

namespace {

using aspen_test::temp_dir;

std::string content(std::size_t size, unsigned seed) {
    std::string s(size, '\0');
    for (std::size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + seed + (i >> 12)) & 0xFF);
    return s;
}

class Fs : public ::testing::TestWithParam<int> {};

TEST_P(Fs, FilesRoundTripAndChange) {
    temp_dir dir;
    struct outcome {
        bool big_same = false, appended_same = false, copy_same = false, renamed = false, empty_same = false;
        std::uintmax_t copied = 0;
        fs::metadata_t meta;
        bool gone = false;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        [](stdfs::path d) -> task<outcome> {
            outcome o;
            const std::string big = content(3 << 20, 1);
            co_await fs::write(d / "big", big);
            std::string back = co_await fs::read(d / "big");
            o.big_same = back == big;
            co_await fs::write(d / "log", "one\n");
            co_await fs::append(d / "log", "two\n");
            co_await fs::append(d / "new-by-append", "x");
            std::string log = co_await fs::read(d / "log");
            std::string created = co_await fs::read(d / "new-by-append");
            o.appended_same = log == "one\ntwo\n" && created == "x";
            o.copied = co_await fs::copy(d / "big", d / "big-copy");
            std::string copy = co_await fs::read(d / "big-copy");
            o.copy_same = copy == big;
            co_await fs::rename(d / "big-copy", d / "moved");
            bool old_there = co_await fs::exists(d / "big-copy");
            bool new_there = co_await fs::exists(d / "moved");
            o.renamed = !old_there && new_there;
            co_await fs::write(d / "empty", "");
            std::string empty = co_await fs::read(d / "empty");
            o.empty_same = empty.empty();
            o.meta = co_await fs::metadata(d / "big");
            co_await fs::remove_file(d / "moved");
            o.gone = !co_await fs::exists(d / "moved");
            co_return o;
        }(dir.path),
        "fs files");
    EXPECT_TRUE(o.big_same);
    EXPECT_TRUE(o.appended_same);
    EXPECT_TRUE(o.copy_same);
    EXPECT_EQ(o.copied, 3u << 20);
    EXPECT_TRUE(o.renamed);
    EXPECT_TRUE(o.empty_same);
    EXPECT_TRUE(o.meta.is_file());
    EXPECT_EQ(o.meta.size, 3u << 20);
    EXPECT_EQ(o.meta.modified, stdfs::last_write_time(stdfs::path(dir.path) / "big"));
    EXPECT_EQ(o.meta.permissions, stdfs::status(stdfs::path(dir.path) / "big").permissions());
    EXPECT_TRUE(o.gone);
}

TEST_P(Fs, Directories) {
    temp_dir dir;
    struct outcome {
        std::vector<stdfs::path> listed;
        bool is_dir = false;
        std::uintmax_t removed = 0;
        bool gone = false;
        stdfs::path canonical;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        [](stdfs::path d) -> task<outcome> {
            outcome o;
            co_await fs::create_dir_all(d / "a" / "b" / "c");
            co_await fs::create_dir_all(d / "a" / "b");  // exists: fine
            co_await fs::create_dir(d / "a" / "z");
            co_await fs::write(d / "a" / "file", "f");
            o.listed = co_await fs::read_dir(d / "a");
            fs::metadata_t m = co_await fs::metadata(d / "a" / "b");
            o.is_dir = m.is_directory();
            co_await fs::remove_dir(d / "a" / "z");
            o.canonical = co_await fs::canonicalize(d / "a" / "b" / ".." / "file");
            o.removed = co_await fs::remove_dir_all(d / "a");
            o.gone = !co_await fs::exists(d / "a");
            co_return o;
        }(dir.path),
        "fs directories");
    const stdfs::path a = stdfs::path(dir.path) / "a";
    std::vector<stdfs::path> want = {a / "b", a / "file", a / "z"};
    EXPECT_EQ(o.listed, want);
    EXPECT_TRUE(o.is_dir);
    EXPECT_EQ(o.canonical, stdfs::canonical(dir.path) / "a" / "file");
    EXPECT_EQ(o.removed, 4u);  // a, a/b, a/b/c, a/file
    EXPECT_TRUE(o.gone);
}

// Each failure is a std::system_error with the errno and the path.
TEST_P(Fs, ErrorsNameThePathAndKeepTheErrno) {
    temp_dir dir;
    struct failure {
        int err = 0;
        std::string what;
    };
    std::vector<failure> fails = aspen_test::run_on(
        GetParam(),
        [](stdfs::path d) -> task<std::vector<failure>> {
            std::vector<failure> out;
            auto record = [&out](auto&& t) -> task<void> {
                try {
                    co_await std::move(t);
                    out.push_back({0, "(no error)"});
                } catch (const std::system_error& e) {
                    out.push_back({e.code().value(), e.what()});
                }
            };
            co_await fs::create_dir(d / "dir");
            co_await record(fs::read(d / "missing"));
            co_await record(fs::write(d / "no" / "such" / "dir", "x"));
            co_await record(fs::remove_file(d / "dir"));
            co_await record(fs::create_dir(d / "dir"));
            co_await record(fs::remove_dir(d / "missing"));
            co_await record(fs::read(d / "dir"));
            co_await record(fs::metadata(d / "missing"));
            co_await record(fs::read_dir(d / "missing"));
            co_return out;
        }(dir.path),
        "fs errors");
    ASSERT_EQ(fails.size(), 8u);
    const int want[] = {ENOENT, ENOENT, EISDIR, EEXIST, ENOENT, EISDIR, ENOENT, ENOENT};
    for (std::size_t i = 0; i < fails.size(); ++i) {
        EXPECT_EQ(fails[i].err, want[i]) << i << ": " << fails[i].what;
        EXPECT_NE(fails[i].what.find(dir.path), std::string::npos) << i << ": " << fails[i].what;
    }
}

// 64 files written and read back by 64 tasks at once, each checked. Then
// an fs::read of a FIFO, whose open blocks until a writer comes: this task
// opens the writing end only after the read has started, so if the read
// blocked a worker, a one-worker or current-thread runtime could never get
// here (the watchdog would fail the test).
TEST_P(Fs, ManyAtOnceAndTheWorkersStayFree) {
    temp_dir dir;
    ASSERT_EQ(::mkfifo((dir.path + "/fifo").c_str(), 0600), 0);
    struct outcome {
        int same = 0;
        std::string from_fifo;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        [](stdfs::path d) -> task<outcome> {
            outcome o;
            std::vector<aspen::join_handle<bool>> hs;
            for (unsigned i = 0; i < 64; ++i)
                hs.push_back(aspen::spawn([](stdfs::path p, unsigned i) -> task<bool> {
                    const std::string c = content(100000 + i * 1000, i);
                    co_await fs::write(p, c);
                    std::string back = co_await fs::read(p);
                    co_return back == c;
                }(d / std::string("f").append(std::to_string(i)), i)));
            for (auto& h : hs) {
                bool same = co_await h;
                if (same) ++o.same;
            }
            auto reader = aspen::spawn(fs::read(d / "fifo"));
            // A non-blocking open for writing succeeds once a reader has the
            // FIFO open (ENXIO before).
            int fd = -1;
            for (int i = 0; i < 60000 && fd < 0; ++i) {
                fd = ::open((d / "fifo").c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
                if (fd < 0) co_await aspen::sleep(1ms);
            }
            if (fd >= 0) {
                EXPECT_EQ(::write(fd, "through the fifo", 16), 16);
                ::close(fd);
            }
            o.from_fifo = co_await reader;
            co_return o;
        }(dir.path),
        "fs many");
    EXPECT_EQ(o.same, 64);
    EXPECT_EQ(o.from_fifo, "through the fifo");
}

// A write whose task is aborted while the write waits for a pool thread
// never happens: with one pool thread, held by a blocking function until
// the abort is done, the file is never created.
TEST(FsCancel, AnAbortedWriteThatHasNotStartedNeverRuns) {
    temp_dir dir;
    aspen::config cfg = aspen_test::workers(2);
    cfg.max_blocking_threads = 1;
    aspen::runtime rt(cfg);
    bool created = rt.block_on([](stdfs::path p) -> task<bool> {
        std::atomic<bool> release{false};
        auto blocker = aspen::spawn_blocking([&release] {
            while (!release.load(std::memory_order_acquire)) ::usleep(1000);
        });
        auto writer = aspen::spawn(fs::write(p, "should not be written"));
        co_await aspen::sleep(10ms);
        co_await aspen_test::abort_and_join(writer);
        // release / acquire: a flag between this task and the pool thread;
        // nothing else is published through it.
        release.store(true, std::memory_order_release);
        co_await blocker;
        // The pool is free now; one more call through it, so that a write
        // that wrongly stayed queued would have run before the check.
        co_await fs::write(p.parent_path() / "after", "x");
        co_return co_await fs::exists(p);
    }(stdfs::path(dir.path) / "never"));
    EXPECT_FALSE(created);
}

INSTANTIATE_TEST_SUITE_P(Kinds, Fs, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
