// aspen::command / aspen::child: exit codes and signals, output() of both
// streams, a piped round trip of 1 MiB through `cat`, the environment and
// the working directory, try_wait, kill, cancelled and concurrent waits, a
// child destroyed under a waiter, orphans collected, bad input, many
// children at once, and descriptor counts.
#include "net_util.hpp"
#include "runtime_kinds.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

using namespace std::chrono_literals;
using aspen::child;
using aspen::command;
using aspen::exit_status;
using aspen::stdio;
using aspen::wait_awaitable;
using aspen::task;

namespace {

class Process : public ::testing::TestWithParam<int> {};

// The open descriptors once the orphans of earlier tests in this process
// are collected: each spawn collects those that have ended (and closes the
// duplicate pidfd aspen keeps for each), so spawn and wait `true` until two
// counts in a row agree.
int settled_fds() {
    int last = -1;
    for (int i = 0; i < 100; ++i) {
        {
            aspen::current_thread_runtime rt;
            rt.block_on([]() -> task<void> { (void)co_await command("true").status(); }());
        }
        int now = net_test::open_fds();
        if (now == last) return now;
        last = now;
    }
    return last;
}

TEST_P(Process, ExitCodesAndSignalsAreReported) {
    struct outcome {
        exit_status ok = exit_status::exited(-1), three = ok, term = ok, killed = ok;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            outcome o;
            o.ok = co_await command("true").status();
            o.three = co_await command("/bin/sh").arg("-c").arg("exit 3").status();
            o.term = co_await command("sh").arg("-c").arg("kill -TERM $$").status();
            child c = command("sleep").arg("100").spawn();
            EXPECT_TRUE(c.id().has_value());
            EXPECT_TRUE(c.start_kill());
            o.killed = co_await c.wait();
            EXPECT_FALSE(c.id().has_value());
            EXPECT_FALSE(c.start_kill());  // collected: nothing to signal
            co_return o;
        }(),
        "exit codes");
    EXPECT_TRUE(o.ok.success());
    EXPECT_EQ(o.ok.code(), 0);
    EXPECT_FALSE(o.three.success());
    EXPECT_EQ(o.three.code(), 3);
    EXPECT_EQ(o.three.signal(), std::nullopt);
    EXPECT_EQ(o.term.signal(), SIGTERM);
    EXPECT_EQ(o.term.code(), std::nullopt);
    EXPECT_EQ(o.killed, exit_status::killed(SIGKILL));
    EXPECT_EQ(o.three.to_string(), "exit code 3");
    EXPECT_EQ(o.killed.to_string().rfind("signal 9", 0), 0u) << o.killed.to_string();
}

// output() reads stdout and stderr to the end at once: 300 KB to each,
// interleaved, more than either pipe holds, so reading one after the
// other would stall the child.
TEST_P(Process, OutputCollectsBothStreamsConcurrently) {
    const std::string line = "a line of some length, to fill the pipe sooner ...................................";
    aspen::process_output out = aspen_test::run_on(
        GetParam(),
        [](std::string script) -> task<aspen::process_output> {
            co_return co_await command("sh").arg("-c").arg(script).output();
        }("i=0; while [ $i -lt 3000 ]; do echo 'out " + line + "'; echo 'err " + line + "' >&2; "
          "i=$((i+1)); done; exit 7"),
        "output");
    const std::size_t each = 3000 * (4 + line.size() + 1);
    EXPECT_EQ(out.status.code(), 7);
    EXPECT_EQ(out.stdout_text.size(), each);
    EXPECT_EQ(out.stderr_text.size(), each);
    EXPECT_EQ(out.stdout_text.substr(0, 4), "out ");
    EXPECT_EQ(out.stderr_text.substr(0, 4), "err ");
    EXPECT_EQ(out.stdout_text.find("err "), std::string::npos);
    EXPECT_EQ(out.stderr_text.find("out "), std::string::npos);
}

// 1 MiB into cat's stdin from one task while another reads its stdout:
// every byte comes back in order; cat ends when stdin closes.
TEST_P(Process, PipedStdinAndStdoutRoundTrip) {
    constexpr std::size_t total = 1 << 20;
    struct outcome {
        std::string back;
        exit_status status = exit_status::exited(-1);
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            child c = command("cat").set_stdin(stdio::piped).set_stdout(stdio::piped).spawn();
            std::optional<aspen::pipe_writer> in = c.take_stdin();
            std::optional<aspen::pipe_reader> out = c.take_stdout();
            EXPECT_TRUE(in && out);
            EXPECT_FALSE(c.take_stdin().has_value());  // once only
            EXPECT_FALSE(c.take_stderr().has_value());  // inherited, not piped
            auto writer = aspen::spawn([](aspen::pipe_writer in) -> task<void> {
                std::string data(total, '\0');
                for (std::size_t i = 0; i < total; ++i) data[i] = static_cast<char>(i * 31 % 251);
                co_await in.write_all(data);
            }(std::move(*in)));
            outcome o;
            co_await out->read_to_end(o.back);
            co_await writer;
            o.status = co_await c.wait();
            co_return o;
        }(),
        "cat round trip");
    ASSERT_EQ(o.back.size(), total);
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < total; ++i)
        if (o.back[i] != static_cast<char>(i * 31 % 251)) ++mismatches;
    EXPECT_EQ(mismatches, 0u);
    EXPECT_TRUE(o.status.success()) << o.status.to_string();
}

// wait() closes a piped stdin nobody took, so `cat` sees end of input and
// ends; without that it would wait for input forever.
TEST_P(Process, WaitClosesAnUntakenStdin) {
    exit_status st = aspen_test::run_on(
        GetParam(),
        []() -> task<exit_status> {
            child c = command("cat").set_stdin(stdio::piped).set_stdout(stdio::null).spawn();
            co_return co_await c.wait();
        }(),
        "wait closes stdin");
    EXPECT_TRUE(st.success());
}

TEST_P(Process, EnvironmentAndWorkingDirectory) {
    ASSERT_EQ(::setenv("ASPEN_PROCESS_TEST_INHERITED", "inherited", 1), 0);
    struct outcome {
        std::string changed, cleared, dir;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            outcome o;
            auto a = co_await command("sh")
                         .arg("-c")
                         .arg("echo \"$ASPEN_PROCESS_TEST_INHERITED|$A|$B|${HOME:+home}\"")
                         .env("A", "1")
                         .env("B", "2")
                         .env_remove("B")
                         .env("A", "one")
                         .env_remove("HOME")
                         .output();
            o.changed = a.stdout_text;
            auto b = co_await command("/bin/sh")
                         .arg("-c")
                         .arg("echo \"$ASPEN_PROCESS_TEST_INHERITED|$C\"")
                         .env("C", "before clear")
                         .env_clear()
                         .env("C", "3")
                         .output();
            o.cleared = b.stdout_text;
            auto d = co_await command("pwd").current_dir("/tmp").output();
            o.dir = d.stdout_text;
            co_return o;
        }(),
        "environment");
    ::unsetenv("ASPEN_PROCESS_TEST_INHERITED");
    EXPECT_EQ(o.changed, "inherited|one||\n");
    EXPECT_EQ(o.cleared, "|3\n");
    EXPECT_EQ(o.dir, "/tmp\n");
}

// A program that does not exist, and a working directory that does not:
// std::system_error(ENOENT) naming the program, no descriptor left open
// (the pipes made for the child are closed again).
TEST(ProcessErrors, SpawnFailuresThrowAndLeakNothing) {
    const int before = settled_fds();
    try {
        (void)command("aspen-no-such-program")
            .set_stdin(stdio::piped)
            .set_stdout(stdio::piped)
            .set_stderr(stdio::piped)
            .spawn();
        ADD_FAILURE() << "spawned a program that does not exist";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), ENOENT);
        EXPECT_NE(std::string(e.what()).find("aspen-no-such-program"), std::string::npos) << e.what();
    }
    try {
        (void)command("true").current_dir("/aspen/no/such/dir").set_stdout(stdio::piped).spawn();
        ADD_FAILURE() << "spawned in a directory that does not exist";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code().value(), ENOENT);
    }
    EXPECT_EQ(net_test::open_fds(), before);
}

// What spawn() says when it refuses a command with std::invalid_argument.
std::string refusal_of(const command& c) {
    try {
        (void)c.spawn();
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "(nothing thrown)";
}

TEST(ProcessErrors, BadInputIsRefusedAtSpawnSayingWhy) {
    EXPECT_NE(refusal_of(command("")).find("program name is empty"), std::string::npos);
    EXPECT_NE(refusal_of(command("echo").arg(std::string("a\0b", 3))).find("argument 1 contains a NUL"),
              std::string::npos);
    EXPECT_NE(refusal_of(command("echo").env("A=B", "x")).find("\"A=B\""), std::string::npos);
    EXPECT_NE(refusal_of(command("echo").env("", "x")).find("name \"\""), std::string::npos);
    EXPECT_NE(refusal_of(command("echo").env("A", std::string("\0", 1))).find("value of environment variable A"),
              std::string::npos);
    EXPECT_NE(refusal_of(command("echo").current_dir("")).find("working directory"), std::string::npos);
    // An empty child refuses everything.
    child empty;
    EXPECT_THROW((void)empty.wait(), std::logic_error);
    EXPECT_THROW((void)empty.try_wait(), std::logic_error);
    EXPECT_THROW((void)empty.start_kill(), std::logic_error);
    EXPECT_THROW((void)empty.take_stdout(), std::logic_error);
    EXPECT_EQ(empty.id(), std::nullopt);
}

// try_wait: nullopt while the child runs, the status once it ended, and
// the same status again from try_wait and wait after that.
TEST_P(Process, TryWaitThenWaitGiveTheSameStatus) {
    struct outcome {
        bool running_seen = false;
        std::optional<exit_status> first;
        exit_status again = exit_status::exited(-1), waited = again;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            outcome o;
            child c = command("sh").arg("-c").arg("read x; exit 5").set_stdin(stdio::piped).spawn();
            o.running_seen = !c.try_wait().has_value();
            aspen::pipe_writer in = *c.take_stdin();
            co_await in.write_all("go\n");
            // Until it has ended: each try is a non-blocking waitid.
            while (!(o.first = c.try_wait())) co_await aspen::sleep(1ms);
            o.again = *c.try_wait();
            o.waited = co_await c.wait();
            co_return o;
        }(),
        "try_wait");
    EXPECT_TRUE(o.running_seen);
    ASSERT_TRUE(o.first.has_value());
    EXPECT_EQ(o.first->code(), 5);
    EXPECT_EQ(o.again, *o.first);
    EXPECT_EQ(o.waited, *o.first);
}

// A wait cancelled by a timeout leaves the child running and collectable;
// a second concurrent wait is refused; destroying the child under a waiter
// makes that wait throw ECANCELED.
TEST_P(Process, CancelledConcurrentAndOrphanedWaits) {
    struct outcome {
        bool timed_out = false;
        bool concurrent_refused = false;
        bool try_wait_refused = false;
        exit_status after = exit_status::exited(-1);
        int cancelled_errno = 0;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            outcome o;
            child c = command("sleep").arg("100").spawn();
            try {
                (void)co_await aspen::timeout(10ms, c.wait());
            } catch (const aspen::timed_out&) {
                o.timed_out = true;
            }
            // The waiter tries again while a try_wait of this task holds
            // the child for a moment; this task probes with try_wait until
            // it finds the waiter's wait in progress (a bounded number of
            // times; no timing is assumed).
            auto waiter = aspen::spawn([](child* c) -> task<exit_status> {
                for (;;) {
                    try {
                        co_return co_await c->wait();
                    } catch (const std::logic_error&) {
                    }
                    co_await aspen::sleep(1ms);
                }
            }(&c));
            for (int i = 0; i < 10000 && !o.try_wait_refused; ++i) {
                try {
                    (void)c.try_wait();
                    co_await aspen::sleep(1ms);
                } catch (const std::logic_error&) {
                    o.try_wait_refused = true;
                }
            }
            try {
                (void)co_await c.wait();
            } catch (const std::logic_error&) {
                o.concurrent_refused = true;
            }
            c.start_kill();
            o.after = co_await waiter;

            // The wait exists (holding its own reference to the child's
            // state) before the child is destroyed, whether or not it has
            // been polled yet.
            // (Not kill_on_drop: a child killed at the drop may end, and its
            // wait complete, just before the close reaches the waiter.)
            auto doomed = std::make_unique<child>(command("sleep").arg("100").spawn());
            const int doomed_pid = *doomed->id();
            std::atomic<bool> made{false};
            auto waiter2 = aspen::spawn([](child* c, std::atomic<bool>* made) -> task<int> {
                wait_awaitable w = c->wait();
                // release: the awaitable (and its reference) exist before the
                // main task, which loads with acquire, destroys the child.
                made->store(true, std::memory_order_release);
                try {
                    (void)co_await w;
                } catch (const std::system_error& e) {
                    co_return e.code().value();
                }
                co_return 0;
            }(doomed.get(), &made));
            for (int i = 0; i < 10000 && !made.load(std::memory_order_acquire); ++i) co_await aspen::sleep(1ms);
            co_await aspen::sleep(5ms);  // most often it is waiting by now; the test holds either way
            doomed.reset();  // the child runs on, in the orphan queue
            o.cancelled_errno = co_await waiter2;
            // Still ours (uncollected, so the pid is not reused): end it; a
            // later spawn collects it.
            ::kill(doomed_pid, SIGKILL);
            co_return o;
        }(),
        "cancelled waits");
    EXPECT_TRUE(o.timed_out);
    EXPECT_TRUE(o.concurrent_refused);
    EXPECT_TRUE(o.try_wait_refused);
    EXPECT_EQ(o.after, exit_status::killed(SIGKILL));
    EXPECT_EQ(o.cancelled_errno, ECANCELED);
}

// Is pid a zombie or gone (not running)? /proc/<pid>/stat's state field.
char process_state(int pid) {
    std::string path = "/proc/" + std::to_string(pid) + "/stat";
    FILE* f = std::fopen(path.c_str(), "r");
    if (!f) return '-';  // gone
    char buf[512] = {};
    std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    std::string s(buf, n);
    std::size_t close_paren = s.rfind(')');
    return close_paren == std::string::npos || close_paren + 2 >= s.size() ? '?' : s[close_paren + 2];
}

// Children destroyed before their status was collected: a kill_on_drop one
// is killed, and both are collected (not left as zombies) by later spawns.
TEST(ProcessOrphans, DroppedChildrenAreKilledOrCollectedLater) {
    const int before = settled_fds();
    int killed_pid = 0, exited_pid = 0;
    {
        child k = command("sleep").arg("100").kill_on_drop(true).spawn();
        killed_pid = *k.id();
        child e = command("true").spawn();
        exited_pid = *e.id();
    }
    // A bounded number of rounds, each a spawn and a wait (which collect
    // the orphans) and a short sleep; a kill or a collection that never
    // happens fails the test instead of hanging it.
    int rounds = 0;
    {
        aspen::current_thread_runtime rt;
        for (; rounds < 2000; ++rounds) {
            if (process_state(killed_pid) == '-' && process_state(exited_pid) == '-') break;
            rt.block_on([]() -> task<void> {
                (void)co_await command("true").status();
                co_await aspen::sleep(1ms);
            }());
        }
    }
    EXPECT_EQ(process_state(killed_pid), '-') << "the kill_on_drop child was not killed and collected";
    EXPECT_EQ(process_state(exited_pid), '-') << "the dropped child was left a zombie";
    EXPECT_LT(rounds, 2000);
    EXPECT_EQ(net_test::open_fds(), before);
}

// 64 children at once, each from its own task, each exiting with its own
// code: every task gets its own child's status.
TEST_P(Process, ManyChildrenAtOnceEachGetsItsOwnStatus) {
    constexpr int n = 64;
    const int before = settled_fds();
    std::vector<int> codes = aspen_test::run_on(
        GetParam(),
        []() -> task<std::vector<int>> {
            std::vector<aspen::join_handle<int>> hs;
            for (int i = 0; i < n; ++i)
                hs.push_back(aspen::spawn([](int i) -> task<int> {
                    // (A braced list in the co_await's expression trips g++ 12:
                    // "array used as initializer"; so args() has a statement
                    // of its own.)
                    command sh("sh");
                    sh.args({"-c", "sleep 0.0$(( $1 % 5 )); echo $1; exit $(( $1 % 200 ))", "sh"});
                    auto out = co_await sh.arg(std::to_string(i)).output();
                    if (out.stdout_text != std::to_string(i) + "\n") co_return -1;
                    co_return out.status.code().value_or(-2);
                }(i)));
            std::vector<int> codes;
            for (auto& h : hs) codes.push_back(co_await h);
            co_return codes;
        }(),
        "many children");
    ASSERT_EQ(codes.size(), static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) EXPECT_EQ(codes[i], i % 200) << i;
    EXPECT_EQ(net_test::open_fds(), before);
}

// The child reports its pid, process group and session (from /proc): by
// default both are this process's; process_group(0) makes it the leader of
// a group of its own; new_session(true) of a session of its own too.
TEST_P(Process, ProcessGroupAndNewSession) {
    struct ids {
        long pid = -1, pgrp = -1, sid = -1;
    };
    struct outcome {
        ids plain, grouped, session;
    };
    outcome o = aspen_test::run_on(
        GetParam(),
        []() -> task<outcome> {
            auto report = [](command c) -> task<ids> {
                c.arg("-c").arg("echo $$ $(cut -d' ' -f5,6 /proc/$$/stat)");
                aspen::process_output out = co_await c.output();
                ids r;
                EXPECT_EQ(std::sscanf(out.stdout_text.c_str(), "%ld %ld %ld", &r.pid, &r.pgrp, &r.sid), 3)
                    << out.stdout_text;
                co_return r;
            };
            outcome o;
            command plain("sh");
            task<ids> plain_report = report(std::move(plain));  // the command parameter outside the co_await (README, "Compiler caveats")
            o.plain = co_await std::move(plain_report);
            command grouped("sh");
            grouped.process_group(0);
            task<ids> grouped_report = report(std::move(grouped));
            o.grouped = co_await std::move(grouped_report);
            command session("sh");
            session.new_session(true);
            task<ids> session_report = report(std::move(session));
            o.session = co_await std::move(session_report);
            co_return o;
        }(),
        "process groups");
    EXPECT_EQ(o.plain.pgrp, static_cast<long>(::getpgrp()));
    EXPECT_EQ(o.plain.sid, static_cast<long>(::getsid(0)));
    EXPECT_EQ(o.grouped.pgrp, o.grouped.pid);
    EXPECT_EQ(o.grouped.sid, static_cast<long>(::getsid(0)));
    EXPECT_EQ(o.session.pgrp, o.session.pid);
    EXPECT_EQ(o.session.sid, o.session.pid);
}

TEST(ProcessErrors, BadProcessGroupsAreRefused) {
    command negative("true");
    negative.process_group(-1);
    EXPECT_NE(refusal_of(negative).find("process_group(-1)"), std::string::npos);
    command both("true");
    both.process_group(0).new_session(true);
    EXPECT_NE(refusal_of(both).find("exclude each other"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Kinds, Process, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
