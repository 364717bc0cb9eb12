// line_proxy: a line protocol served through a proxy, all in one process.
//
//   clients --TCP--> proxy (io::copy_bidirectional) --TCP--> server
//
// The server reads requests a line at a time (io::buf_reader::next_line,
// at most 1 KiB a line) and answers each with its upper-cased text; its
// replies go through an io::buf_writer that is flushed only when no
// further request is already buffered, so a client that pipelines its
// requests gets its replies in a few large writes instead of one syscall a
// line. Each client writes its requests through a buf_writer on its write
// half while a reader task checks every reply on the read half. The proxy
// passes each side's end of stream on and reports the bytes it moved.
#include <aspen/aspen.hpp>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr int clients = 8;
constexpr int requests = 20'000;  // per client

std::string request(int client, int i) { return "client " + std::to_string(client) + " asks " + std::to_string(i); }

std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

aspen::task<void> serve_connection(aspen::tcp_stream conn) {
    aspen::io::buf_reader<aspen::tcp_stream&> rd(conn);
    aspen::io::buf_writer<aspen::tcp_stream&> wr(conn);
    while (std::optional<std::string> line = co_await rd.next_line(1024)) {
        std::string reply = upper(std::move(*line)) + "\n";  // named: see README, "Compiler caveats"
        co_await wr.write_all(reply);
        if (rd.buffer().empty()) co_await wr.flush();  // nothing more pipelined: answer now
    }
    co_await wr.shutdown();
}

aspen::task<void> server(aspen::tcp_listener& listener) {
    std::vector<aspen::join_handle<void>> conns;
    for (int i = 0; i < clients; ++i) {
        aspen::tcp_stream conn = co_await listener.accept();
        conns.push_back(aspen::spawn(serve_connection(std::move(conn))));
    }
    for (auto& h : conns) co_await h;
}

aspen::task<aspen::io::copy_totals> proxy_one(aspen::tcp_stream in, aspen::socket_address upstream) {
    aspen::tcp_stream out = co_await aspen::tcp_stream::connect(upstream);
    aspen::io::copy_totals t = co_await aspen::io::copy_bidirectional(in, out);
    co_return t;
}

aspen::task<std::uint64_t> proxy(aspen::tcp_listener& front, aspen::socket_address upstream) {
    std::vector<aspen::join_handle<aspen::io::copy_totals>> conns;
    for (int i = 0; i < clients; ++i) {
        aspen::tcp_stream in = co_await front.accept();
        conns.push_back(aspen::spawn(proxy_one(std::move(in), upstream)));
    }
    std::uint64_t moved = 0;
    for (auto& h : conns) {
        aspen::io::copy_totals t = co_await h;
        moved += t.a_to_b + t.b_to_a;
    }
    co_return moved;
}

aspen::task<void> send_requests(aspen::tcp_write_half half, int client) {
    aspen::io::buf_writer wr(std::move(half));
    for (int i = 0; i < requests; ++i) {
        std::string line = request(client, i) + "\n";
        co_await wr.write_all(line);
    }
    co_await wr.shutdown();  // flush, then end of stream: the server ends the connection
}

// How many replies were right, in order.
aspen::task<int> check_replies(aspen::tcp_read_half half, int client) {
    aspen::io::buf_reader rd(std::move(half));
    int ok = 0, i = 0;
    while (std::optional<std::string> line = co_await rd.next_line(1024)) ok += *line == upper(request(client, i++));
    co_return ok;
}

aspen::task<int> client(aspen::socket_address front, int id) {
    aspen::tcp_stream conn = co_await aspen::tcp_stream::connect(front);
    auto [rd, wr] = std::move(conn).into_split();
    auto writer = aspen::spawn(send_requests(std::move(wr), id));
    int ok = co_await check_replies(std::move(rd), id);
    co_await writer;
    co_return ok;
}

aspen::task<int> run() {
    aspen::tcp_listener upstream = aspen::tcp_listener::bind(aspen::socket_address::loopback_v4(0));
    aspen::tcp_listener front = aspen::tcp_listener::bind(aspen::socket_address::loopback_v4(0));
    auto srv = aspen::spawn(server(upstream));
    auto prx = aspen::spawn(proxy(front, upstream.local_addr()));
    std::vector<aspen::join_handle<int>> users;
    for (int c = 0; c < clients; ++c) users.push_back(aspen::spawn(client(front.local_addr(), c)));
    int ok = 0;
    for (auto& h : users) ok += co_await h;
    std::uint64_t moved = co_await prx;
    co_await srv;
    std::printf("%d clients x %d pipelined requests through the proxy: %d replies right (of %d), %llu bytes proxied\n",
                clients, requests, ok, clients * requests, static_cast<unsigned long long>(moved));
    co_return ok;
}

}  // namespace

int main() {
    aspen::runtime rt;
    int ok = rt.block_on(run());
    return ok == clients * requests ? 0 : 1;
}
