// split_duplex: a pipelined client on one TCP connection, split into a read
// half and a write half (tcp_stream::into_split). A writer task streams
// 500,000 numbered lines (about 13 MB) to an in-process server that sends
// each line back upper-cased, while a reader task checks every reply as it
// arrives. Writing everything before reading stalls: the replies fill the
// socket buffers, the server stops reading, and the writer waits forever
// (it did here from about 400,000 lines on). With the halves in two tasks
// the connection runs both ways at once.
#include <aspen/aspen.hpp>

#include <cctype>
#include <cstdio>
#include <string>
#include <utility>

namespace {

constexpr int lines = 500'000;

std::string line(int i) { return "line " + std::to_string(i) + " of the stream\n"; }

std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

// Upper-cases whatever comes in, until the client's end of stream.
aspen::task<void> serve(aspen::tcp_listener& listener) {
    aspen::tcp_stream s = co_await listener.accept();
    char buf[16 * 1024];
    for (;;) {
        std::size_t n = co_await s.read(buf, sizeof buf);
        if (n == 0) co_return;
        std::string out = upper(std::string(buf, n));
        co_await s.write_all(out);
    }
}

aspen::task<void> write_lines(aspen::tcp_write_half wr) {
    for (int i = 0; i < lines; ++i) co_await wr.write_all(line(i));
}  // wr goes: the server reads end of stream

// Returns how many replies matched, in order.
aspen::task<int> check_replies(aspen::tcp_read_half rd) {
    std::string pending;
    char buf[16 * 1024];
    int ok = 0;
    for (;;) {
        std::size_t n = co_await rd.read(buf, sizeof buf);
        if (n == 0) co_return ok;
        pending.append(buf, n);
        for (std::size_t end; (end = pending.find('\n')) != std::string::npos; pending.erase(0, end + 1)) {
            if (pending.compare(0, end + 1, upper(line(ok))) != 0) co_return ok;
            ++ok;
        }
    }
}

aspen::task<int> run() {
    auto listener = aspen::tcp_listener::bind(aspen::socket_address::loopback_v4(0));
    auto server = aspen::spawn(serve(listener));
    aspen::tcp_stream conn = co_await aspen::tcp_stream::connect(listener.local_addr());
    auto [rd, wr] = std::move(conn).into_split();
    auto writer = aspen::spawn(write_lines(std::move(wr)));
    int ok = co_await check_replies(std::move(rd));
    co_await writer;
    co_await server;
    co_return ok;
}

}  // namespace

int main() {
    aspen::runtime rt;
    int ok = rt.block_on(run());
    std::printf("split_duplex: %d of %d lines echoed upper-cased and checked while still sending: %s\n", ok, lines,
                ok == lines ? "ok" : "FAILED");
    return ok == lines ? 0 : 1;
}
