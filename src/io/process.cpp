// Child processes (aspen/process.hpp): posix_spawnp, a pidfd per child on
// the reactor, and the queue of orphans.
//
// Collecting a status (waitid on the pidfd) is done under the pidfd
// source's read slot (io_source::busy[0]): a wait holds it from its first
// poll (drive), try_wait and a child's destruction take it for their one
// non-blocking waitid. So two collectors never race, and the one that
// collects stores the status in io_source::exit_info before the slot is
// free again. Everything about a child goes through its pidfd, never its
// pid, so a pid the kernel gave to another process after the child was
// collected is never signalled or waited for.
#include <aspen/process.hpp>

#include <aspen/spawn.hpp>

#include "io/io_source.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace aspen {

namespace {

// The syscalls themselves: glibc 2.36's <sys/pidfd.h> declares its
// wrappers without extern "C", so C++ cannot link against them.
int open_pidfd(pid_t pid) noexcept { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }
int signal_pidfd(int pidfd, int sig) noexcept {
    return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

// exit_info's encoding: the exit code (0 to 255), or 256 + the signal, or
// 512 + the signal when it dumped core.
constexpr int killed_base = 256;
constexpr int dumped_base = 512;

int encode(const siginfo_t& info) noexcept {
    switch (info.si_code) {
        case CLD_EXITED:
            return info.si_status & 0xff;
        case CLD_DUMPED:
            return dumped_base + info.si_status;
        default:  // CLD_KILLED (WEXITED reports nothing else)
            return killed_base + info.si_status;
    }
}

exit_status decode(int info) noexcept {
    if (info >= dumped_base) return exit_status::killed(info - dumped_base, true);
    if (info >= killed_base) return exit_status::killed(info - killed_base);
    return exit_status::exited(info);
}

// One waitid(WNOHANG) on the pidfd, under the claim: the encoded status
// (stored in exit_info too), or -1 while the child runs.
int collect(detail::io_source& s, const char* what) {
    siginfo_t info{};
    while (::waitid(P_PIDFD, static_cast<id_t>(s.fd), &info, WEXITED | WNOHANG) != 0) {
        if (errno == EINTR) continue;
        if (errno == ECHILD)
            detail::throw_errno(ECHILD, std::string(what) +
                                            ": the child's status was collected elsewhere (a waitpid(-1) or "
                                            "SIGCHLD set to SIG_IGN in this process)");
        detail::throw_errno(errno, what);
    }
    if (info.si_pid == 0) return -1;
    int code = encode(info);
    // release: pairs with the acquire loads of exit_info (try_wait, id,
    // send_signal, a later wait), which then read a complete status.
    s.exit_info.store(code, std::memory_order_release);
    return code;
}

// collect() under the pidfd source's read slot, taken for this one
// non-blocking waitid (see the top of this file); nullopt, collecting
// nothing, while a wait holds the slot.
std::optional<int> collect_if_no_wait(detail::io_source& s, const char* what) {
    // acquire / release: as begin_op / end_op, so the slot's holders see
    // each other's collection.
    if (s.busy[0].exchange(true, std::memory_order_acquire)) return std::nullopt;
    struct release_slot {
        detail::io_source& s;
        ~release_slot() { s.busy[0].store(false, std::memory_order_release); }
    } slot{s};
    return collect(s, what);
}

int collected(const detail::io_source& s) noexcept {
    // acquire: see collect().
    return s.exit_info.load(std::memory_order_acquire);
}

// Children destroyed before their status was collected: a pidfd each (a
// duplicate: the child's own closes with it), collected here later.
struct orphan_list {
    std::mutex mutex;
    std::vector<int> pidfds;
};
orphan_list& orphans() {
    // Never destroyed: a child may be destroyed during static destruction.
    static orphan_list* list = new orphan_list;
    return *list;
}

void reap_orphans() noexcept {
    orphan_list& o = orphans();
    std::lock_guard lock(o.mutex);
    std::erase_if(o.pidfds, [](int fd) {
        siginfo_t info{};
        int r = ::waitid(P_PIDFD, static_cast<id_t>(fd), &info, WEXITED | WNOHANG);
        // Gone (collected, or ECHILD: nothing left to collect), or a failure
        // that retrying would not mend: either way the entry goes.
        if (r == 0 && info.si_pid == 0) return false;
        if (r != 0 && errno == EINTR) return false;
        ::close(fd);
        return true;
    });
}

void add_orphan(int pidfd) noexcept {
    int dup = ::fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
    // Out of descriptors or memory: the child stays a zombie after it ends
    // (until this process ends); nothing else is lost.
    if (dup < 0) return;
    orphan_list& o = orphans();
    std::lock_guard lock(o.mutex);
    try {
        o.pidfds.push_back(dup);
    } catch (...) {
        ::close(dup);
    }
}

// A descriptor closed when it goes out of scope.
class owned_fd {
public:
    owned_fd() noexcept = default;
    explicit owned_fd(int fd) noexcept : fd_(fd) {}
    owned_fd(const owned_fd&) = delete;
    owned_fd& operator=(const owned_fd&) = delete;
    ~owned_fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    int get() const noexcept { return fd_; }
    int release() noexcept { return std::exchange(fd_, -1); }
    void reset(int fd) noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

private:
    int fd_ = -1;
};

}  // namespace

std::string exit_status::to_string() const {
    std::string s = signal_ ? "signal " : "exit code ";
    s.append(std::to_string(value_));
    if (signal_)
        if (const char* name = ::sigdescr_np(value_)) s.append(" (").append(name).append(")");
    if (core_dumped_) s.append(", core dumped");
    return s;
}

// -- child -------------------------------------------------------------

child& child::operator=(child&& other) noexcept {
    if (this != &other) {
        let_go();
        pid_ = other.pid_;
        kill_on_drop_ = other.kill_on_drop_;
        pidfd_ = std::move(other.pidfd_);
        stdin_ = std::move(other.stdin_);
        stdout_ = std::move(other.stdout_);
        stderr_ = std::move(other.stderr_);
    }
    return *this;
}

child::~child() { let_go(); }

void child::let_go() noexcept {
    detail::io_source* s = pidfd_.get();
    if (!s) return;
    stdin_.reset();
    stdout_.reset();
    stderr_.reset();
    if (collected(*s) < 0) {
        if (kill_on_drop_) signal_pidfd(s->fd, SIGKILL);
        // A wait of another task holds the slot: it is being cancelled (the
        // close below), and the orphan queue collects the status instead.
        bool done = false;
        try {
            std::optional<int> info = collect_if_no_wait(*s, "aspen::child::~child");
            done = info && *info >= 0;
        } catch (...) {
            done = true;  // ECHILD: there is nothing left to collect
        }
        if (!done) add_orphan(s->fd);
    }
    pidfd_ = {};
    reap_orphans();
}

std::optional<int> child::id() const noexcept {
    detail::io_source* s = pidfd_.get();
    if (!s || collected(*s) >= 0) return std::nullopt;
    return pid_;
}

wait_awaitable child::wait() {
    detail::io_source* s = pidfd_.require("aspen::child::wait");
    stdin_.reset();
    return wait_awaitable(s);
}

std::optional<exit_status> child::try_wait() {
    const char* what = "aspen::child::try_wait";
    detail::io_source* s = pidfd_.require(what);
    if (int info = collected(*s); info >= 0) return decode(info);
    std::optional<int> info = collect_if_no_wait(*s, what);
    if (!info) throw std::logic_error(std::string(what) + ": a wait on this child is in progress");
    if (*info < 0) return std::nullopt;
    return decode(*info);
}

bool child::start_kill() { return send_signal(SIGKILL); }

bool child::send_signal(int sig) {
    const char* what = "aspen::child::send_signal";
    detail::io_source* s = pidfd_.require(what);
    if (collected(*s) >= 0) return false;
    if (signal_pidfd(s->fd, sig) == 0) return true;
    if (errno == ESRCH) return false;  // it has ended (its status not yet collected)
    detail::throw_errno(errno, std::string(what) + "(" + std::to_string(sig) + ")");
}

std::optional<pipe_writer> child::take_stdin() {
    pidfd_.require("aspen::child::take_stdin");
    return std::exchange(stdin_, std::nullopt);
}
std::optional<pipe_reader> child::take_stdout() {
    pidfd_.require("aspen::child::take_stdout");
    return std::exchange(stdout_, std::nullopt);
}
std::optional<pipe_reader> child::take_stderr() {
    pidfd_.require("aspen::child::take_stderr");
    return std::exchange(stderr_, std::nullopt);
}

bool wait_awaitable::poll(context& cx) {
    if (int info = collected(*claim_.src); info >= 0) {
        info_ = info;
        return true;
    }
    // The pidfd turns readable when the child ends; until then a waitid
    // finds nothing, which is a would-block like any other.
    return detail::drive(claim_, cx, what(), [&] {
        info_ = collect(*claim_.src, what());
        return info_ < 0 ? detail::attempt_result::would_block : detail::attempt_result::done;
    });
}

exit_status wait_awaitable::await_resume() {
    rethrow_if_error();
    return decode(info_);
}

// -- command -----------------------------------------------------------

command::command(std::string program) { argv_.push_back(std::move(program)); }

command& command::arg(std::string a) {
    argv_.push_back(std::move(a));
    return *this;
}

command& command::args(std::initializer_list<std::string_view> list) {
    for (std::string_view a : list) argv_.emplace_back(a);
    return *this;
}

command& command::env(std::string name, std::string value) {
    env_changes_.push_back({std::move(name), std::move(value)});
    return *this;
}

command& command::env_remove(std::string_view name) {
    env_changes_.push_back({std::string(name), std::nullopt});
    return *this;
}

command& command::env_clear() {
    env_cleared_ = true;
    env_changes_.clear();
    return *this;
}

command& command::current_dir(std::string dir) {
    dir_ = std::move(dir);
    return *this;
}

command& command::set_stdin(stdio s) {
    stdin_ = s;
    return *this;
}
command& command::set_stdout(stdio s) {
    stdout_ = s;
    return *this;
}
command& command::set_stderr(stdio s) {
    stderr_ = s;
    return *this;
}
command& command::process_group(int pgid) {
    process_group_ = pgid;
    return *this;
}

command& command::new_session(bool on) {
    new_session_ = on;
    return *this;
}

command& command::kill_on_drop(bool on) {
    kill_on_drop_ = on;
    return *this;
}

namespace {

bool has_nul(std::string_view s) noexcept { return s.find('\0') != std::string_view::npos; }

// "name=" is a prefix of entry.
bool names(std::string_view entry, std::string_view name) noexcept {
    return entry.size() > name.size() && entry[name.size()] == '=' && entry.substr(0, name.size()) == name;
}

// posix_spawn's attributes and file actions, destroyed with this object.
class spawn_setup {
public:
    explicit spawn_setup(const std::string& what) : what_(what) {
        check(::posix_spawn_file_actions_init(&actions_));
        if (int err = ::posix_spawnattr_init(&attr_)) {
            ::posix_spawn_file_actions_destroy(&actions_);
            detail::throw_errno(err, what_);
        }
        // The child starts with an empty signal mask (a worker's mask is not
        // the program's business) and every signal's default action (SIG_IGN
        // survives exec otherwise).
        sigset_t none, all;
        sigemptyset(&none);
        sigfillset(&all);
        ::posix_spawnattr_setsigmask(&attr_, &none);
        ::posix_spawnattr_setsigdefault(&attr_, &all);
        ::posix_spawnattr_setflags(&attr_, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    }
    spawn_setup(const spawn_setup&) = delete;
    spawn_setup& operator=(const spawn_setup&) = delete;
    ~spawn_setup() {
        ::posix_spawnattr_destroy(&attr_);
        ::posix_spawn_file_actions_destroy(&actions_);
    }
    void check(int err) const {
        if (err) detail::throw_errno(err, what_);
    }
    posix_spawn_file_actions_t* actions() noexcept { return &actions_; }
    const posix_spawnattr_t* attr() const noexcept { return &attr_; }
    // Adds POSIX_SPAWN_SETPGROUP (with the group) or POSIX_SPAWN_SETSID.
    void set_group(std::optional<int> pgid, bool new_session) {
        short flags = 0;
        check(::posix_spawnattr_getflags(&attr_, &flags));
        if (pgid) {
            check(::posix_spawnattr_setpgroup(&attr_, static_cast<pid_t>(*pgid)));
            flags |= POSIX_SPAWN_SETPGROUP;
        }
        if (new_session) flags |= POSIX_SPAWN_SETSID;
        check(::posix_spawnattr_setflags(&attr_, flags));
    }

private:
    const std::string& what_;
    posix_spawn_file_actions_t actions_;
    posix_spawnattr_t attr_;
};

}  // namespace

child command::spawn() const {
    std::string what = "aspen::command::spawn(\"";
    what.append(program()).append("\")");
    if (program().empty()) throw std::invalid_argument("aspen::command::spawn: the program name is empty");
    for (std::size_t i = 0; i < argv_.size(); ++i)
        if (has_nul(argv_[i]))
            throw std::invalid_argument(what + (i == 0 ? ": the program name" : ": argument " + std::to_string(i)) +
                                        " contains a NUL byte");
    for (const env_change& c : env_changes_) {
        if (c.name.empty() || c.name.find('=') != std::string::npos || has_nul(c.name))
            throw std::invalid_argument(what + ": the environment variable name \"" + c.name +
                                        "\" is empty or contains '=' or a NUL byte");
        if (c.value && has_nul(*c.value))
            throw std::invalid_argument(what + ": the value of environment variable " + c.name +
                                        " contains a NUL byte");
    }
    if (dir_ && (dir_->empty() || has_nul(*dir_)))
        throw std::invalid_argument(what + ": the working directory is empty or contains a NUL byte");
    if (process_group_ && *process_group_ < 0)
        throw std::invalid_argument(what + ": process_group(" + std::to_string(*process_group_) +
                                    "): a process group id is 0 (a new group) or positive");
    if (process_group_ && new_session_)
        throw std::invalid_argument(what + ": process_group and new_session exclude each other (a new session is "
                                           "a new process group)");
    reap_orphans();

    std::vector<char*> argv;
    for (const std::string& a : argv_) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);

    std::vector<std::string> env_storage;
    std::vector<char*> envp;
    char** env = environ;
    if (env_cleared_ || !env_changes_.empty()) {
        if (!env_cleared_)
            for (char** e = environ; *e; ++e) env_storage.emplace_back(*e);
        for (const env_change& c : env_changes_) {
            std::erase_if(env_storage, [&](const std::string& e) { return names(e, c.name); });
            if (c.value) env_storage.push_back(std::string(c.name).append("=").append(*c.value));
        }
        for (std::string& e : env_storage) envp.push_back(e.data());
        envp.push_back(nullptr);
        env = envp.data();
    }

    spawn_setup setup(what);
    // Per stream: the parent's end of its pipe (piped), closed here if the
    // spawn fails, and the child's end, closed here once the child has it.
    owned_fd parent_end[3], child_end[3];
    std::optional<stdio> modes[3] = {stdin_, stdout_, stderr_};
    for (int target = 0; target < 3; ++target) {
        stdio mode = modes[target].value_or(stdio::inherit);
        bool in = target == 0;
        if (mode == stdio::null) {
            setup.check(::posix_spawn_file_actions_addopen(setup.actions(), target, "/dev/null",
                                                           in ? O_RDONLY : O_WRONLY, 0));
        } else if (mode == stdio::piped) {
            int fds[2];
            if (::pipe2(fds, O_CLOEXEC) != 0) detail::throw_errno(errno, what + ": pipe2");
            parent_end[target].reset(in ? fds[1] : fds[0]);
            child_end[target].reset(in ? fds[0] : fds[1]);
            // An end that landed on 0 to 2 (this process closed its own)
            // would be overwritten by an earlier dup2: move it above.
            if (child_end[target].get() < 3) {
                int moved = ::fcntl(child_end[target].get(), F_DUPFD_CLOEXEC, 3);
                if (moved < 0) detail::throw_errno(errno, what + ": fcntl(F_DUPFD_CLOEXEC)");
                child_end[target].reset(moved);
            }
            // dup2 clears O_CLOEXEC on the copy, which the program keeps.
            setup.check(::posix_spawn_file_actions_adddup2(setup.actions(), child_end[target].get(), target));
        }
    }
    if (dir_) setup.check(::posix_spawn_file_actions_addchdir_np(setup.actions(), dir_->c_str()));
    setup.set_group(process_group_, new_session_);

    pid_t pid = 0;
    if (int err = ::posix_spawnp(&pid, argv[0], setup.actions(), setup.attr(), argv.data(), env))
        detail::throw_errno(err, what);
    for (owned_fd& e : child_end) e.reset(-1);

    int pidfd = open_pidfd(pid);  // O_CLOEXEC by definition
    if (pidfd < 0) {
        int err = errno;
        // Without a pidfd aspen cannot wait for it: end it rather than leave
        // a process nobody can collect.
        ::kill(pid, SIGKILL);
        while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        detail::throw_errno(err, what + ": pidfd_open");
    }
    child c;
    c.pid_ = pid;
    c.kill_on_drop_ = kill_on_drop_;
    c.pidfd_ = detail::make_io(pidfd);
    // From here on a failure (out of memory) destroys c, which treats the
    // child as any other dropped one.
    if (parent_end[0].get() >= 0) c.stdin_ = pipe_writer::from_native(parent_end[0].release());
    if (parent_end[1].get() >= 0) c.stdout_ = pipe_reader::from_native(parent_end[1].release());
    if (parent_end[2].get() >= 0) c.stderr_ = pipe_reader::from_native(parent_end[2].release());
    return c;
}

namespace {
task<std::string> read_all(pipe_reader r) {
    std::string text;
    co_await r.read_to_end(text);
    co_return text;
}

task<exit_status> run_status(command cmd) {
    child c = cmd.spawn();
    co_return co_await c.wait();
}

task<process_output> run_output(command cmd) {
    child c = cmd.spawn();
    std::optional<pipe_reader> out = c.take_stdout();
    std::optional<pipe_reader> err = c.take_stderr();
    // stderr in a task of its own, stdout here: a child that fills one pipe
    // while the other is not being read would stall.
    join_handle<std::string> err_reader;
    if (err) err_reader = aspen::spawn(read_all(std::move(*err)));
    std::string out_text, err_text;
    try {
        if (out) co_await out->read_to_end(out_text);
    } catch (...) {
        if (err_reader.valid()) err_reader.abort();
        throw;
    }
    if (err_reader.valid()) err_text = co_await err_reader;
    exit_status status = co_await c.wait();
    co_return process_output{status, std::move(out_text), std::move(err_text)};
}
}  // namespace

task<exit_status> command::status() const { return run_status(*this); }

task<process_output> command::output() const {
    command cmd = *this;
    if (!cmd.stdin_) cmd.stdin_ = stdio::null;
    if (!cmd.stdout_) cmd.stdout_ = stdio::piped;
    if (!cmd.stderr_) cmd.stderr_ = stdio::piped;
    return run_output(std::move(cmd));
}

}  // namespace aspen
