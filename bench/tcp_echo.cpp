// tcp_echo: a server on 127.0.0.1 accepts 64 connections; 64 clients in
// the same process each do 1,000 request/response round trips of 64 bytes
// (TCP_NODELAY), every response checked; connection setup is included in
// the time. The same workload runs on aspen and on standalone Asio (C++20
// coroutines, one io_context per thread, as many threads as aspen
// workers). The value is the number of round trips whose echo matched.
#include "asio_pool.hpp"
#include "bench.hpp"

#include <asio.hpp>

#include <array>
#include <atomic>
#include <cstring>
#include <exception>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace bench {
namespace {

constexpr int connections = 64;
constexpr int rounds = 1000;
constexpr std::size_t message = 64;

void fill(std::array<char, message>& out, int conn, int round) {
    for (std::size_t i = 0; i < message; ++i) out[i] = static_cast<char>(conn * 7 + round * 13 + static_cast<int>(i));
}

// ---- aspen ---------------------------------------------------------------------

aspen::task<void> aspen_session(aspen::tcp_stream s) {
    s.set_nodelay(true);
    char buf[4096];
    for (;;) {
        std::size_t n = co_await s.read(buf, sizeof buf);
        if (n == 0) co_return;
        co_await s.write_all(buf, n);
    }
}

aspen::task<void> aspen_server(aspen::tcp_listener& l) {
    std::vector<aspen::join_handle<void>> sessions;
    for (int i = 0; i < connections; ++i) sessions.push_back(aspen::spawn(aspen_session(co_await l.accept())));
    for (auto& h : sessions) co_await h;
}

aspen::task<std::int64_t> aspen_client(aspen::socket_address addr, int conn) {
    aspen::tcp_stream s = co_await aspen::tcp_stream::connect(addr);
    s.set_nodelay(true);
    std::array<char, message> out{}, in{};
    std::int64_t ok = 0;
    for (int r = 0; r < rounds; ++r) {
        fill(out, conn, r);
        co_await s.write_all(out.data(), message);
        std::size_t got = co_await s.read_exact(in.data(), message);
        if (got != message) break;
        ok += in == out;
    }
    co_return ok;
}

aspen::task<std::int64_t> aspen_echo() {
    aspen::tcp_listener l = aspen::tcp_listener::bind(aspen::socket_address::loopback_v4(0));
    auto server = aspen::spawn(aspen_server(l));
    std::vector<aspen::join_handle<std::int64_t>> clients;
    for (int c = 0; c < connections; ++c) clients.push_back(aspen::spawn(aspen_client(l.local_addr(), c)));
    std::int64_t total = 0;
    for (auto& h : clients) total += co_await h;
    co_await server;
    co_return total;
}

std::int64_t run_aspen(aspen::runtime& rt) { return rt.block_on(aspen_echo()); }

// ---- Asio ------------------------------------------------------------------------

using asio::ip::tcp;

asio::awaitable<void> asio_session(tcp::socket s) {
    s.set_option(tcp::no_delay(true));
    char buf[4096];
    for (;;) {
        asio::error_code ec;
        std::size_t n = co_await s.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
        if (ec) co_return;  // eof
        co_await asio::async_write(s, asio::buffer(buf, n), asio::use_awaitable);
    }
}

asio::awaitable<void> asio_server(tcp::acceptor& acceptor, asio_pool& pool) {
    for (int i = 0; i < connections; ++i) {
        // Each accepted socket goes to the next io_context (thread).
        asio::io_context& ctx = pool.next();
        tcp::socket s = co_await acceptor.async_accept(ctx, asio::use_awaitable);
        asio::co_spawn(ctx, asio_session(std::move(s)), asio::detached);
    }
}

asio::awaitable<std::int64_t> asio_client(tcp::endpoint ep, int conn) {
    tcp::socket s(co_await asio::this_coro::executor);
    co_await s.async_connect(ep, asio::use_awaitable);
    s.set_option(tcp::no_delay(true));
    std::array<char, message> out{}, in{};
    std::int64_t ok = 0;
    for (int r = 0; r < rounds; ++r) {
        fill(out, conn, r);
        co_await asio::async_write(s, asio::buffer(out), asio::use_awaitable);
        co_await asio::async_read(s, asio::buffer(in), asio::use_awaitable);
        ok += in == out;
    }
    co_return ok;
}

std::int64_t run_asio(asio_pool& pool) {
    tcp::acceptor acceptor(pool.next(), tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    tcp::endpoint ep = acceptor.local_endpoint();
    std::promise<void> server_done;
    asio::co_spawn(acceptor.get_executor(), asio_server(acceptor, pool), [&](std::exception_ptr e) {
        if (e) server_done.set_exception(e);
        else server_done.set_value();
    });
    struct results {
        std::atomic<std::int64_t> total{0};
        std::atomic<int> left{connections};
        std::exception_ptr error;  // first one, written by the client that failed
        std::atomic<bool> failed{false};
        std::promise<void> done;
    } res;
    for (int c = 0; c < connections; ++c) {
        asio::co_spawn(pool.next(), asio_client(ep, c), [&res](std::exception_ptr e, std::int64_t ok) {
            // relaxed: the promise below publishes the totals to the waiter.
            if (e && !res.failed.exchange(true, std::memory_order_relaxed)) res.error = e;
            res.total.fetch_add(ok, std::memory_order_relaxed);
            // acq_rel: the last client sees every other client's writes.
            if (res.left.fetch_sub(1, std::memory_order_acq_rel) == 1) res.done.set_value();
        });
    }
    res.done.get_future().wait();
    server_done.get_future().get();
    if (res.error) std::rethrow_exception(res.error);
    return res.total.load(std::memory_order_relaxed);
}

}  // namespace

workload tcp_echo_workload() {
    workload w{"tcp_echo", std::to_string(connections) + "x" + std::to_string(rounds),
               std::int64_t{connections} * rounds, &run_aspen, nullptr, nullptr};
    w.asio = &run_asio;
    w.requests = std::int64_t{connections} * rounds;
    return w;
}

}  // namespace bench
