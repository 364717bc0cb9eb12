// The exactly-once workload shared by tests/stress/exactly_once_test.cpp and
// the soak (tests/soak/aspen_soak.cpp): random trees of spawned tasks with
// random yields, aborts and wakes from a foreign thread. Every spawned task
// gets an id; per id it counts how often its body started, finished, and how
// often its frame was destroyed. check() then demands, for every id:
// destroyed exactly once, started at most once, and, unless it was aborted,
// started and finished exactly once.
#pragma once

#include "splitmix.hpp"

#include <aspen/aspen.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace exactly_once {

using namespace std::chrono_literals;

struct counters {
    explicit counters(std::uint32_t n)
        : total(n),
          started(new std::atomic<std::uint8_t>[n]()),
          finished(new std::atomic<std::uint8_t>[n]()),
          destroyed(new std::atomic<std::uint8_t>[n]()),
          aborted(new std::atomic<std::uint8_t>[n]()) {}
    const std::uint32_t total;  // ids 0 .. total-1
    std::unique_ptr<std::atomic<std::uint8_t>[]> started, finished, destroyed, aborted;
    std::atomic<std::uint32_t> next_id{0};
};

// Wakes parked tasks from a foreign thread, in batches, at random moments.
class foreign_waker {
public:
    foreign_waker() : thread_([this] { run(); }) {}
    ~foreign_waker() {
        stop_.store(true, std::memory_order_release);
        thread_.join();
    }
    // A poll_fn that is pending until the foreign thread has woken it once.
    auto wait() {
        auto state = std::make_shared<std::atomic<bool>>(false);
        return aspen::poll_fn([this, state, registered = false](aspen::context& cx) mutable -> aspen::poll<int> {
            if (state->load(std::memory_order_acquire)) return aspen::ready(1);
            if (!registered) {
                registered = true;
                std::lock_guard l(mutex_);
                pending_.push_back({state, cx.waker()});
            }
            return aspen::pending;
        });
    }

private:
    struct entry {
        std::shared_ptr<std::atomic<bool>> state;
        aspen::waker waker;
    };
    void run() {
        std::mt19937 rng(7);
        while (!stop_.load(std::memory_order_acquire)) {
            std::vector<entry> batch;
            {
                std::lock_guard l(mutex_);
                batch.swap(pending_);
            }
            for (auto& e : batch) {
                e.state->store(true, std::memory_order_release);
                if (rng() % 2) e.waker.wake_by_ref();
                e.waker.wake();
            }
            if (batch.empty()) std::this_thread::sleep_for(50us);
        }
        std::lock_guard l(mutex_);
        for (auto& e : pending_) {
            e.state->store(true, std::memory_order_release);
            e.waker.wake();
        }
    }
    std::mutex mutex_;
    std::vector<entry> pending_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

struct destroy_mark {
    counters* c;
    std::uint32_t id;
    destroy_mark(counters* cc, std::uint32_t i) : c(cc), id(i) {}
    destroy_mark(destroy_mark&& o) noexcept : c(std::exchange(o.c, nullptr)), id(o.id) {}
    ~destroy_mark() {
        if (c) c->destroyed[id].fetch_add(1, std::memory_order_relaxed);
    }
};

using stress_util::splitmix;

// Trees are at most max_depth deep (at most 4^6 nodes); the root keeps at
// most 64 trees in flight, so memory stays bounded whatever the order.
constexpr int max_depth = 6;

struct stress {
    counters& c;
    foreign_waker& fw;

    // Claims an id for a new task, or none when the budget is used up.
    bool claim(std::uint32_t& id) {
        id = c.next_id.fetch_add(1, std::memory_order_relaxed);
        return id < c.total;
    }

    aspen::task<void> node(destroy_mark mark, std::uint64_t seed, int depth) {
        std::uint32_t id = mark.id;
        c.started[id].fetch_add(1, std::memory_order_relaxed);
        splitmix rng{seed};
        if (rng() % 8 == 0) co_await aspen::yield_now();
        if (rng() % 64 == 0) co_await fw.wait();
        int children = depth < max_depth ? static_cast<int>(rng() % 5) : 0;
        std::vector<aspen::join_handle<void>> hs;
        for (int i = 0; i < children; ++i) {
            std::uint32_t child;
            if (!claim(child)) break;
            auto h = aspen::spawn(node(destroy_mark(&c, child), rng(), depth + 1));
            switch (rng() % 16) {
                case 0:
                    h.detach();
                    break;
                case 1:
                    c.aborted[child].store(1, std::memory_order_relaxed);
                    h.abort();
                    hs.push_back(std::move(h));
                    break;
                default:
                    hs.push_back(std::move(h));
            }
        }
        for (auto& h : hs) {
            try {
                co_await h;
            } catch (const aspen::task_cancelled&) {
            }
        }
        c.finished[id].fetch_add(1, std::memory_order_relaxed);
    }

    // Keeps planting trees until the id budget is spent.
    aspen::task<void> root() {
        splitmix rng{42};
        std::vector<aspen::join_handle<void>> trees;
        std::uint32_t id;
        while (claim(id)) {
            trees.push_back(aspen::spawn(node(destroy_mark(&c, id), rng(), 0)));
            if (trees.size() >= 64) {
                for (auto& h : trees) co_await h;
                trees.clear();
            }
        }
        for (auto& h : trees) co_await h;
    }
};

// What check() found. `first_error` is empty when every count is right.
struct report {
    std::uint64_t started = 0, finished = 0, aborted = 0;
    std::string first_error;
};

inline report check(const counters& c) {
    report r;
    for (std::uint32_t id = 0; id < c.total; ++id) {
        const unsigned s = c.started[id].load(), f = c.finished[id].load(), d = c.destroyed[id].load();
        const bool a = c.aborted[id].load();
        std::string bad;
        if (d != 1) bad = "frame destroyed " + std::to_string(d) + " times";
        else if (s > 1) bad = "started " + std::to_string(s) + " times";
        else if (f > s) bad = "finished without starting";
        else if (!a && s != 1) bad = "not aborted, never ran";
        else if (!a && f != 1) bad = "not aborted, did not finish";
        if (!bad.empty() && r.first_error.empty()) r.first_error = "task " + std::to_string(id) + ": " + bad;
        r.started += s;
        r.finished += f;
        r.aborted += a;
    }
    if (r.first_error.empty() && c.next_id.load() < c.total) r.first_error = "not every id was used";
    return r;
}

// Runs the workload with `total` tasks on a runtime made from cfg, until no
// task is alive, and checks the counts.
inline report run(const aspen::config& cfg, std::uint32_t total) {
    counters c(total);
    {
        foreign_waker fw;
        aspen::runtime rt(cfg);
        stress s{c, fw};
        rt.block_on(s.root());
        // Detached subtrees may still run: wait until none is alive.
        while (rt.metrics().tasks_alive != 0) std::this_thread::sleep_for(1ms);
    }
    return check(c);
}

}  // namespace exactly_once
