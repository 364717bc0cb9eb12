// mpsc: 4 producers send 10,000,000 messages in all through one bounded
// channel of capacity 1024 to one consumer, the root task, which sums them.
// Producer p sends p * per + k for k < per, so the sum is 0 + 1 + ... +
// (N - 1). The stream ends when the last producer drops its sender (aspen)
// or closes the channel (Boost.Fiber, whose buffered_channel holds
// capacity - 1 = 1023 values: its capacity must be a power of two).
#include "bench.hpp"
#include "fiber_pool.hpp"

#include <boost/fiber/buffered_channel.hpp>
#include <boost/fiber/fiber.hpp>

#include <atomic>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {
namespace {

constexpr int producers = 4;
constexpr std::int64_t messages = 10'000'000;
constexpr std::int64_t per_producer = messages / producers;
constexpr std::size_t capacity = 1024;
static_assert(messages % producers == 0, "every producer sends the same count");

aspen::task<void> produce(aspen::mpsc_sender<std::int64_t> tx, std::int64_t first, std::int64_t count) {
    for (std::int64_t k = 0; k < count; ++k) {
        std::optional<std::int64_t> back = co_await tx.send(first + k);  // named: see bench.hpp
        if (back) throw std::runtime_error("mpsc: the channel closed");
    }
}

aspen::task<std::int64_t> consume() {
    std::vector<aspen::join_handle<void>> handles;
    std::int64_t sum = 0;
    {
        auto [tx, rx] = aspen::mpsc_channel<std::int64_t>(capacity);
        for (int p = 0; p < producers; ++p) handles.push_back(aspen::spawn(produce(tx, p * per_producer, per_producer)));
        tx = {};  // only the producers' senders are left: their end is the end of stream
        while (std::optional<std::int64_t> v = co_await rx.recv()) sum += *v;
    }
    for (auto& h : handles) co_await h;
    co_return sum;
}

std::int64_t run_aspen(aspen::runtime& rt) { return rt.block_on(consume()); }

std::int64_t run_fiber() {
    std::int64_t sum = 0;
    boost::fibers::fiber root([&sum] {
        boost::fibers::buffered_channel<std::int64_t> ch(capacity);
        std::atomic<int> left{producers};
        std::vector<boost::fibers::fiber> fibers;
        for (int p = 0; p < producers; ++p)
            fibers.emplace_back([&ch, &left, first = p * per_producer] {
                for (std::int64_t k = 0; k < per_producer; ++k)
                    if (ch.push(first + k) != boost::fibers::channel_op_status::success) fiber_failed("mpsc: push");
                // acq_rel: the last producer closes after every push; close
                // itself orders the pops.
                if (left.fetch_sub(1, std::memory_order_acq_rel) == 1) ch.close();
            });
        std::int64_t v = 0;
        while (ch.pop(v) == boost::fibers::channel_op_status::success) sum += v;
        for (auto& f : fibers) f.join();
    });
    root.join();
    return sum;
}

}  // namespace

workload mpsc_workload() {
    return {"mpsc",   std::to_string(producers) + "x" + std::to_string(messages),
            messages * (messages - 1) / 2,
            &run_aspen, nullptr, nullptr, &run_fiber};
}

}  // namespace bench
