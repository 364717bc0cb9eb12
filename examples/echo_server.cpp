// echo_server: a TCP echo server on 127.0.0.1, one task per connection.
//
//   echo_server [--port P] [--connections N] [--seconds S] [--workers W]
//
// Prints "listening on 127.0.0.1:<port>" (port 0, the default, picks a free
// one). With --connections N it exits once N connections have been served
// and closed; with --seconds S it exits after S seconds at the latest
// (scripts/showcase.sh uses both, so it never outlives the showcase).
// Pair it with echo_client.
#include <aspen/aspen.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct options {
    unsigned port = 0;
    long connections = -1;  // -1: no limit
    long seconds = -1;      // -1: no limit
    std::size_t workers = 0;
};

options parse_args(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> long {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "echo_server: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return std::strtol(argv[++i], nullptr, 10);
        };
        if (a == "--port") o.port = static_cast<unsigned>(value());
        else if (a == "--connections") o.connections = value();
        else if (a == "--seconds") o.seconds = value();
        else if (a == "--workers") o.workers = static_cast<std::size_t>(value());
        else {
            std::fprintf(stderr, "usage: echo_server [--port P] [--connections N] [--seconds S] [--workers W]\n");
            std::exit(2);
        }
    }
    return o;
}

// Echoes until the peer closes; a reset peer just ends the connection.
aspen::task<void> echo(aspen::tcp_stream s) {
    s.set_nodelay(true);
    char buf[16 * 1024];
    try {
        for (;;) {
            std::size_t n = co_await s.read(buf, sizeof buf);
            if (n == 0) co_return;
            co_await s.write_all(buf, n);
        }
    } catch (const std::system_error& e) {
        std::fprintf(stderr, "echo_server: connection ended: %s\n", e.what());
    }
}

aspen::task<void> serve(aspen::tcp_listener& listener, long connections) {
    std::vector<aspen::join_handle<void>> active;
    for (long served = 0; connections < 0 || served < connections; ++served) {
        aspen::tcp_stream s;
        bool failed = false;
        try {
            s = co_await listener.accept();
        } catch (const std::system_error& e) {
            std::fprintf(stderr, "echo_server: accept: %s\n", e.what());
            failed = true;
        }
        if (failed) {
            // Out of descriptors (EMFILE): the connection waits in the
            // kernel queue; back off instead of spinning on the error.
            co_await aspen::sleep(std::chrono::milliseconds(50));
            --served;
            continue;
        }
        active.push_back(aspen::spawn(echo(std::move(s))));
    }
    for (auto& h : active) co_await h;
}

}  // namespace

int main(int argc, char** argv) {
    options o = parse_args(argc, argv);
    aspen::config cfg;
    if (o.workers) cfg.workers = o.workers;
    aspen::runtime rt(cfg);
    auto listener = aspen::tcp_listener::bind(aspen::socket_address::loopback_v4(static_cast<std::uint16_t>(o.port)));
    std::printf("listening on %s\n", listener.local_addr().to_string().c_str());
    std::fflush(stdout);
    try {
        if (o.seconds >= 0) rt.block_on(aspen::timeout(std::chrono::seconds(o.seconds), serve(listener, o.connections)));
        else rt.block_on(serve(listener, o.connections));
    } catch (const aspen::timed_out&) {
        std::printf("echo_server: --seconds %ld reached, stopping\n", o.seconds);
        return 0;
    }
    std::printf("echo_server: served %ld connections, stopping\n", o.connections);
    return 0;
}
