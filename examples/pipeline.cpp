// pipeline: child processes, as a shell pipeline would use them. One task
// feeds words to `sort` through its stdin while this one reads the sorted
// lines from its stdout; then output() runs a command under a timeout and
// collects what it printed.
#include <aspen/aspen.hpp>

#include <cstdio>
#include <string>
#include <string_view>

using namespace std::chrono_literals;

aspen::task<void> feed(aspen::pipe_writer in) {
    for (std::string_view word : {"pear\n", "apple\n", "fig\n", "banana\n"}) co_await in.write_all(word);
    // `in` closes with this frame: sort reads the end of its input.
}

aspen::task<int> pipeline() {
    aspen::child sort =
        aspen::command("sort").set_stdin(aspen::stdio::piped).set_stdout(aspen::stdio::piped).spawn();
    aspen::join_handle<void> writer = aspen::spawn(feed(*sort.take_stdin()));
    aspen::pipe_reader out = *sort.take_stdout();
    std::string sorted;
    co_await out.read_to_end(sorted);
    co_await writer;
    aspen::exit_status status = co_await sort.wait();
    std::printf("sort (%s):\n%s", status.to_string().c_str(), sorted.c_str());

    aspen::command uname("uname");
    uname.arg("-s");
    aspen::process_output u = co_await aspen::timeout(5s, uname.output());
    std::printf("uname -s (%s): %s", u.status.to_string().c_str(), u.stdout_text.c_str());
    bool ok = status.success() && sorted == "apple\nbanana\nfig\npear\n" && u.status.success();
    co_return ok ? 0 : 1;
}

int main() {
    aspen::runtime rt;
    return rt.block_on(pipeline());
}
