// echo_client: a load generator for echo_server (loopback only).
//
//   echo_client --port P [--connections N] [--rounds M] [--size B] [--workers W]
//
// Opens N connections to 127.0.0.1:P, each doing M request/response round
// trips of B bytes (TCP_NODELAY), checks every echoed byte, and prints the
// requests per second. Exits non-zero on any mismatch or error.
#include <aspen/aspen.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct options {
    unsigned port = 0;
    std::size_t connections = 64;
    std::size_t rounds = 1000;
    std::size_t size = 64;
    std::size_t workers = 0;
};

options parse_args(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> unsigned long {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "echo_client: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return std::strtoul(argv[++i], nullptr, 10);
        };
        if (a == "--port") o.port = static_cast<unsigned>(value());
        else if (a == "--connections") o.connections = value();
        else if (a == "--rounds") o.rounds = value();
        else if (a == "--size") o.size = value();
        else if (a == "--workers") o.workers = value();
        else {
            std::fprintf(stderr, "usage: echo_client --port P [--connections N] [--rounds M] [--size B] [--workers W]\n");
            std::exit(2);
        }
    }
    if (o.port == 0 || o.port > 65535 || o.size == 0) {
        std::fprintf(stderr, "echo_client: --port (1-65535) is required and --size must be positive\n");
        std::exit(2);
    }
    return o;
}

// One connection's round trips; returns how many responses matched.
aspen::task<std::size_t> client(aspen::socket_address addr, std::size_t id, std::size_t rounds, std::size_t size) {
    aspen::tcp_stream s = co_await aspen::tcp_stream::connect(addr, std::chrono::seconds(10));
    s.set_nodelay(true);
    std::vector<char> out(size), in(size);
    std::size_t ok = 0;
    for (std::size_t r = 0; r < rounds; ++r) {
        for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<char>(id * 7 + r * 13 + i);
        co_await s.write_all(out.data(), size);
        std::size_t got = co_await s.read_exact(in.data(), size);
        if (got != size) break;  // the server went away
        if (in == out) ++ok;
    }
    co_return ok;
}

aspen::task<std::size_t> run(const options& o) {
    auto addr = aspen::socket_address::loopback_v4(static_cast<std::uint16_t>(o.port));
    std::vector<aspen::join_handle<std::size_t>> clients;
    for (std::size_t c = 0; c < o.connections; ++c) clients.push_back(aspen::spawn(client(addr, c, o.rounds, o.size)));
    std::size_t ok = 0;
    for (auto& h : clients) ok += co_await h;
    co_return ok;
}

}  // namespace

int main(int argc, char** argv) {
    options o = parse_args(argc, argv);
    aspen::config cfg;
    if (o.workers) cfg.workers = o.workers;
    aspen::runtime rt(cfg);
    auto start = std::chrono::steady_clock::now();
    std::size_t ok = 0;
    try {
        ok = rt.block_on(run(o));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "echo_client: %s\n", e.what());
        return 1;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::size_t expected = o.connections * o.rounds;
    std::printf("echo_client: %zu connections x %zu round trips of %zu bytes: %zu/%zu checked ok, %.0f req/s (%.3f s)\n",
                o.connections, o.rounds, o.size, ok, expected, static_cast<double>(ok) / secs, secs);
    return ok == expected ? 0 : 1;
}
