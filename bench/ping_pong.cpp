// ping_pong: 1,000 pairs; task A of each pair spawns B, then sends an integer
// to B and waits for B's reply 100 times, over two channels (A->B, B->A).
// B replies with the value plus one. The value checked is the sum of what A
// and B received: rounds * rounds per pair.
//
// aspen's channels are bounded mpsc channels of capacity 1: a round trip
// never has more than one message in flight each way, so a send never waits
// for room, and each pair allocates its two channels once (a oneshot per
// message would allocate a shared state per message and need a way to hand
// the next one to the other side). Boost.Fiber's buffered_channel needs a
// power-of-two capacity of at least 2 and holds capacity - 1 values, so
// capacity 2 is its equivalent.
#include "bench.hpp"
#include "fiber_pool.hpp"

#include <boost/fiber/buffered_channel.hpp>
#include <boost/fiber/fiber.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {
namespace {

constexpr int pairs = 1000;
constexpr int rounds = 100;

using value_channel = aspen::mpsc_sender<std::int64_t>;
using value_receiver = aspen::mpsc_receiver<std::int64_t>;

aspen::task<std::int64_t> pong(value_receiver in, value_channel out, int n) {
    std::int64_t got = 0;
    for (int i = 0; i < n; ++i) {
        std::optional<std::int64_t> v = co_await in.recv();
        if (!v) throw std::runtime_error("ping_pong: B's channel ended early");
        got += *v;
        std::optional<std::int64_t> back = co_await out.send(*v + 1);  // named: see bench.hpp
        if (back) throw std::runtime_error("ping_pong: A's channel closed");
    }
    co_return got;
}

aspen::task<std::int64_t> ping(int n) {
    auto [to_b, b_in] = aspen::mpsc_channel<std::int64_t>(1);
    auto [to_a, a_in] = aspen::mpsc_channel<std::int64_t>(1);
    aspen::join_handle<std::int64_t> b = aspen::spawn(pong(std::move(b_in), std::move(to_a), n));
    std::int64_t got = 0;
    for (int i = 0; i < n; ++i) {
        std::optional<std::int64_t> back = co_await to_b.send(i);  // named: see bench.hpp
        if (back) throw std::runtime_error("ping_pong: B's channel closed");
        std::optional<std::int64_t> v = co_await a_in.recv();
        if (!v) throw std::runtime_error("ping_pong: A's channel ended early");
        got += *v;
    }
    co_return got + co_await b;
}

aspen::task<std::int64_t> ping_pong(int n_pairs, int n_rounds) {
    std::vector<aspen::join_handle<std::int64_t>> handles;
    handles.reserve(static_cast<std::size_t>(n_pairs));
    for (int p = 0; p < n_pairs; ++p) handles.push_back(aspen::spawn(ping(n_rounds)));
    std::int64_t total = 0;
    for (auto& h : handles) total += co_await h;
    co_return total;
}

std::int64_t run_aspen(aspen::runtime& rt) { return rt.block_on(ping_pong(pairs, rounds)); }

using fiber_channel = boost::fibers::buffered_channel<std::int64_t>;
constexpr std::size_t fiber_capacity = 2;  // holds one value

std::int64_t fiber_ping(int n) {
    fiber_channel to_b(fiber_capacity), to_a(fiber_capacity);
    std::int64_t b_got = 0;
    boost::fibers::fiber b([&] {
        for (int i = 0; i < n; ++i) {
            std::int64_t v = 0;
            if (to_b.pop(v) != boost::fibers::channel_op_status::success) fiber_failed("ping_pong: B's pop");
            b_got += v;
            if (to_a.push(v + 1) != boost::fibers::channel_op_status::success) fiber_failed("ping_pong: B's push");
        }
    });
    std::int64_t got = 0;
    for (int i = 0; i < n; ++i) {
        if (to_b.push(i) != boost::fibers::channel_op_status::success) fiber_failed("ping_pong: A's push");
        std::int64_t v = 0;
        if (to_a.pop(v) != boost::fibers::channel_op_status::success) fiber_failed("ping_pong: A's pop");
        got += v;
    }
    b.join();
    return got + b_got;
}

std::int64_t run_fiber() {
    std::int64_t total = 0;
    // The root is a fiber too, as in the aspen version (block_on spawns it).
    boost::fibers::fiber root([&total] {
        const int n_pairs = opaque(pairs);
        std::vector<std::int64_t> results(static_cast<std::size_t>(n_pairs));
        std::vector<boost::fibers::fiber> fibers;
        fibers.reserve(results.size());
        for (auto& r : results) fibers.emplace_back([&r] { r = fiber_ping(rounds); });
        for (auto& f : fibers) f.join();
        for (std::int64_t r : results) total += r;
    });
    root.join();
    return total;
}

}  // namespace

workload ping_pong_workload() {
    return {"ping_pong",  std::to_string(pairs) + "x" + std::to_string(rounds),
            std::int64_t{pairs} * rounds * rounds,
            &run_aspen, nullptr, nullptr, &run_fiber};
}

}  // namespace bench
