// Child processes: aspen::command and aspen::child, as tokio::process.
//
//   aspen::process_output out = co_await aspen::command("git").arg("status").output();
//   if (out.status.success()) std::fputs(out.stdout_text.c_str(), stdout);
//
//   aspen::child c = aspen::command("sort").set_stdin(aspen::stdio::piped)
//                        .set_stdout(aspen::stdio::piped).spawn();
//   aspen::pipe_writer in = *c.take_stdin();   // aspen/pipe.hpp
//   aspen::pipe_reader out = *c.take_stdout();
//   ... write to `in`, read `out` (in two tasks when the data is large) ...
//   aspen::exit_status st = co_await c.wait();
//
// spawn() starts the program with posix_spawnp (so PATH is searched when
// the name has no '/'; the search uses this process's PATH) and opens a
// pidfd for it; wait() waits for the pidfd on the runtime's reactor, so a
// waiting task costs no thread. Spawning is synchronous and may be called
// outside a runtime; wait() needs one. pidfds need Linux 5.3 or later
// (Debian 12 ships 6.1): without them spawn() ends the child it started
// and throws the error.
//
// With g++ 12, a braced list in the same expression as a co_await
// (co_await command("sh").args({"-c", "exit 3"}).status()) does not
// compile ("array used as initializer", a compiler bug): call args() in a
// statement of its own, or chain arg().
//
// Errors: a program that cannot be started (ENOENT, EACCES, ...) throws
// std::system_error from spawn() with the errno and the program's name.
// An argument or environment entry with a NUL byte, an environment name
// that is empty or has '=', or an empty program name throws
// std::invalid_argument at spawn(), saying which.
//
// The child inherits this process's stdin, stdout and stderr unless told
// otherwise (output() pipes stdout and stderr and gives the child
// /dev/null as stdin unless set). It starts with an empty signal mask and
// the default action for every signal. aspen's own descriptors do not
// leak into it (aspen opens all of them with O_CLOEXEC); one the program
// opened without O_CLOEXEC is inherited, as with any exec.
//
// A child destroyed before its status was collected keeps running (unless
// kill_on_drop(true) was set: then it is sent SIGKILL); aspen collects its
// status later, at the next spawn() or child destruction in the process, so
// it does not stay a zombie for long (Tokio's orphan queue does the same).
//
// Cancel safety: wait() is cancel-safe (an abort, a lost timeout race: the
// child runs on and a later wait or try_wait collects the status). output()
// and status() are not: cancelling them leaves the child running, with its
// pipes closed, and collected later as above.
#pragma once

#include <aspen/detail/io_handle.hpp>
#include <aspen/pipe.hpp>
#include <aspen/task.hpp>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aspen {

// Where a child's stdin, stdout or stderr goes.
enum class stdio : unsigned char {
    inherit,  // this process's own
    piped,    // a pipe to this process: child::take_stdin() / take_stdout() / take_stderr()
    null,     // /dev/null
};

// How a child ended.
class exit_status {
public:
    // The exit code (0 to 255) if the child exited, nullopt if a signal
    // ended it.
    std::optional<int> code() const noexcept { return signal_ ? std::nullopt : std::optional<int>(value_); }
    // The signal that ended the child, nullopt if it exited.
    std::optional<int> signal() const noexcept { return signal_ ? std::optional<int>(value_) : std::nullopt; }
    bool core_dumped() const noexcept { return core_dumped_; }
    // Exited with code 0.
    bool success() const noexcept { return !signal_ && value_ == 0; }
    // "exit code 3", "signal 9 (Killed)".
    std::string to_string() const;
    bool operator==(const exit_status&) const = default;

    static exit_status exited(int code) noexcept { return exit_status(code, false, false); }
    static exit_status killed(int signal, bool core_dumped = false) noexcept {
        return exit_status(signal, true, core_dumped);
    }

private:
    exit_status(int value, bool signal, bool core) noexcept : value_(value), signal_(signal), core_dumped_(core) {}
    int value_;
    bool signal_;
    bool core_dumped_;
};

// What command::output() gives: the status and everything the child wrote
// to stdout and stderr.
struct process_output {
    exit_status status;
    std::string stdout_text;
    std::string stderr_text;
};

// co_await child.wait() -> exit_status.
class [[nodiscard]] wait_awaitable : public detail::io_awaitable<wait_awaitable> {
public:
    explicit wait_awaitable(detail::io_source* s) noexcept : claim_(s, false) {}
    exit_status await_resume();
    bool poll(context& cx);
    static const char* what() noexcept { return "aspen::child::wait"; }

private:
    detail::io_claim claim_;
    int info_ = -1;
};

class child {
public:
    child() noexcept = default;  // empty: wait and the rest throw std::logic_error
    child(child&&) noexcept = default;
    child& operator=(child&& other) noexcept;
    ~child();

    // The process id, nullopt once the status has been collected (the
    // kernel may then give the number to another process).
    std::optional<int> id() const noexcept;

    // Closes the child's stdin pipe if it was not taken (so a child that
    // reads to end of input can finish), then waits for the child to end.
    // Once the status is collected, every later wait and try_wait gives it
    // again at once. One wait at a time (a second, concurrent one throws
    // std::logic_error); destroying the child while a task waits makes that
    // wait throw std::system_error(ECANCELED).
    wait_awaitable wait();
    // The status if the child has ended (collecting it), else nullopt; never
    // waits.
    std::optional<exit_status> try_wait();

    // Sends SIGKILL (start_kill) or sig. Returns false, sending nothing, once
    // the status has been collected; std::system_error if the kernel refuses.
    bool start_kill();
    bool send_signal(int sig);

    // The pipes of the streams configured stdio::piped, once each; nullopt
    // for the others and after the first take.
    std::optional<pipe_writer> take_stdin();
    std::optional<pipe_reader> take_stdout();
    std::optional<pipe_reader> take_stderr();

    bool is_open() const noexcept { return static_cast<bool>(pidfd_); }

private:
    friend class command;
    void let_go() noexcept;
    int pid_ = 0;
    bool kill_on_drop_ = false;
    detail::io_handle pidfd_;
    std::optional<pipe_writer> stdin_;
    std::optional<pipe_reader> stdout_;
    std::optional<pipe_reader> stderr_;
};

// A program and how to start it. The setters return *this for chaining;
// nothing is checked or started before spawn().
class command {
public:
    explicit command(std::string program);

    command& arg(std::string a);
    command& args(std::initializer_list<std::string_view> list);
    template <class Range>
    command& args(const Range& list) {
        for (const auto& a : list) arg(std::string(a));
        return *this;
    }
    // The child's environment: this process's, with these changes.
    command& env(std::string name, std::string value);
    command& env_remove(std::string_view name);
    // Start from an empty environment instead (env() adds to it).
    command& env_clear();
    command& current_dir(std::string dir);
    command& set_stdin(stdio s);
    command& set_stdout(stdio s);
    command& set_stderr(stdio s);
    // SIGKILL the child when its aspen::child is destroyed before its
    // status was collected (default: it keeps running).
    command& kill_on_drop(bool on);
    // setpgid(0, pgid) in the child before exec (as Tokio's
    // process_group): 0 makes the child the leader of a new process group
    // (its pid is the group id), so that a terminal's SIGINT to this
    // process's group does not reach it, and kill(-pid, sig) reaches the
    // child and everything it starts. A negative pgid:
    // std::invalid_argument at spawn.
    command& process_group(int pgid);
    // setsid() in the child before exec: a new session (and process group)
    // without a controlling terminal, as a daemon starts. Excludes
    // process_group (std::invalid_argument at spawn if both are set).
    command& new_session(bool on);

    // Starts the program (see the top of this file for the errors).
    child spawn() const;
    // Spawns with stdin, stdout and stderr inherited unless set, and waits.
    task<exit_status> status() const;
    // Spawns with stdout and stderr piped and stdin from /dev/null unless
    // set, reads both to the end (concurrently, so neither pipe fills up
    // and stalls the child), waits, and gives all three.
    task<process_output> output() const;

    const std::string& program() const noexcept { return argv_.front(); }

private:
    struct env_change {
        std::string name;
        std::optional<std::string> value;  // nullopt: remove
    };
    std::vector<std::string> argv_;
    std::vector<env_change> env_changes_;
    bool env_cleared_ = false;
    std::optional<std::string> dir_;
    std::optional<stdio> stdin_, stdout_, stderr_;
    bool kill_on_drop_ = false;
    std::optional<int> process_group_;
    bool new_session_ = false;
};

}  // namespace aspen
