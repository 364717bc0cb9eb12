// libFuzzer target: the public API driven by fuzzed programs.
//
// Byte 0 configures a small runtime (a current_thread runtime or 1..3
// workers, a 4..16-slot ring, a coop budget of 1..8) and, in bit 7,
// whether the runtime is destroyed as soon as the root returns, while
// detached children may still wait, run or be woken from the foreign
// thread. Each further byte is one step of the root task: spawn a child
// of one of seven kinds (yield; wait for a wake from a foreign thread;
// send on a bounded mpsc channel; hold a semaphore permit; hold the mutex;
// receive from a oneshot filled by a helper task; await a nested task),
// await / abort / detach one of the handles, or yield. Afterwards the root
// awaits what is left, the channel's consumer drains it, and the runtime
// goes away: once no task is alive, or at once (bit 7).
//
// Checked for every input: each child's frame destroyed exactly once, its
// body started at most once and, unless aborted (or detached and the
// runtime destroyed at once), started and finished exactly once; never
// more than 2 semaphore permits or 1 mutex holder at a time; every message
// sent was received and every message object destroyed.
// Leaks are LeakSanitizer's (the fuzzers build with ASan).
#include "stress/exactly_once_workload.hpp"

#include <aspen/aspen.hpp>
#include <aspen/sync/all.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

namespace {

struct world {
    explicit world(std::uint32_t children) : counts(children), detached(children) {}
    exactly_once::counters counts;
    std::vector<std::uint8_t> detached;  // written by the root only
    exactly_once::foreign_waker fw;
    aspen::semaphore permits{2};
    aspen::mutex mutex;
    std::atomic<int> permits_held{0}, mutex_held{0}, violations{0};
    std::atomic<long> messages_alive{0}, sent{0}, received{0};
};

// Counts live instances: none may be left at the end.
struct message {
    world* w;
    explicit message(world* ww) : w(ww) { w->messages_alive.fetch_add(1, std::memory_order_relaxed); }
    message(message&& o) noexcept : w(o.w) { w->messages_alive.fetch_add(1, std::memory_order_relaxed); }
    message& operator=(message&&) = delete;
    ~message() { w->messages_alive.fetch_sub(1, std::memory_order_relaxed); }
};

// Holds one unit of `held` for its lifetime (also when the task is aborted
// inside), and counts a violation when more than `limit` are held.
struct holding {
    world& w;
    std::atomic<int>& held;
    holding(world& ww, std::atomic<int>& h, int limit) : w(ww), held(h) {
        if (held.fetch_add(1, std::memory_order_relaxed) + 1 > limit)
            w.violations.fetch_add(1, std::memory_order_relaxed);
    }
    ~holding() { held.fetch_sub(1, std::memory_order_relaxed); }
};

aspen::task<void> send_later(aspen::oneshot_sender<int> tx) {
    co_await aspen::yield_now();
    (void)tx.send(42);  // given back when the receiver's task was aborted
}

aspen::task<int> nested(int depth) {
    co_await aspen::yield_now();
    co_return depth == 0 ? 1 : 1 + co_await nested(depth - 1);
}

aspen::task<void> child(exactly_once::destroy_mark mark, world& w, int kind, aspen::mpsc_sender<message> tx) {
    auto& c = w.counts;
    c.started[mark.id].fetch_add(1, std::memory_order_relaxed);
    switch (kind) {
        case 0:
            for (int i = 0; i < 3; ++i) co_await aspen::yield_now();
            break;
        case 1:
            co_await w.fw.wait();
            break;
        case 2: {
            auto back = co_await tx.send(message(&w));
            if (!back) w.sent.fetch_add(1, std::memory_order_relaxed);
            break;
        }
        case 3: {
            auto permit = co_await w.permits.acquire();
            holding h(w, w.permits_held, 2);
            co_await aspen::yield_now();
            break;
        }
        case 4: {
            auto guard = co_await w.mutex.lock();
            holding h(w, w.mutex_held, 1);
            co_await aspen::yield_now();
            break;
        }
        case 5: {
            auto [otx, orx] = aspen::oneshot_channel<int>();
            aspen::spawn(send_later(std::move(otx))).detach();
            auto got = co_await orx;
            if (got != std::optional<int>(42)) w.violations.fetch_add(1, std::memory_order_relaxed);
            break;
        }
        default: {
            int v = co_await nested(3);
            if (v != 4) w.violations.fetch_add(1, std::memory_order_relaxed);
        }
    }
    c.finished[mark.id].fetch_add(1, std::memory_order_relaxed);
}

aspen::task<void> consume(world& w, aspen::mpsc_receiver<message> rx) {
    while (auto m = co_await rx.recv()) w.received.fetch_add(1, std::memory_order_relaxed);
}

aspen::task<void> root(world& w, const std::uint8_t* p, std::size_t n) {
    auto [tx, rx] = aspen::mpsc_channel<message>(2);
    auto consumer = aspen::spawn(consume(w, std::move(rx)));
    struct spawned {
        aspen::join_handle<void> h;
        std::uint32_t id;
    };
    std::vector<spawned> hs;
    std::uint32_t next_id = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t op = p[i];
        const std::size_t pick = hs.empty() ? 0 : (op >> 3) % hs.size();
        switch (op % 6) {
            case 0:
            case 1: {
                const std::uint32_t id = next_id++;
                hs.push_back({aspen::spawn(child(exactly_once::destroy_mark(&w.counts, id), w, (op >> 3) % 7, tx)), id});
                break;
            }
            case 2:
                if (!hs.empty()) {
                    try {
                        co_await hs[pick].h;
                    } catch (const aspen::task_cancelled&) {
                    }
                    hs.erase(hs.begin() + static_cast<std::ptrdiff_t>(pick));
                }
                break;
            case 3:
                if (!hs.empty()) {
                    w.counts.aborted[hs[pick].id].store(1, std::memory_order_relaxed);
                    hs[pick].h.abort();
                }
                break;
            case 4:
                if (!hs.empty()) {
                    w.detached[hs[pick].id] = 1;
                    hs[pick].h.detach();
                    hs.erase(hs.begin() + static_cast<std::ptrdiff_t>(pick));
                }
                break;
            default:
                co_await aspen::yield_now();
        }
    }
    for (auto& s : hs) {
        try {
            co_await s.h;
        } catch (const aspen::task_cancelled&) {
        }
    }
    { auto drop = std::move(tx); }  // the consumer ends when every sender is gone
    co_await consumer;
    w.counts.next_id.store(next_id, std::memory_order_relaxed);
}

aspen::task<void> drive_until_alone(aspen::current_thread_runtime& rt) {
    while (rt.metrics().tasks_alive > 1) co_await aspen::yield_now();
}

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "runtime_fuzz: %s\n", what);
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    aspen::config cfg;
    const bool single = data[0] % 4 == 0;  // a current_thread runtime
    cfg.workers = single ? 1 : data[0] % 4;
    cfg.local_queue_capacity = std::uint32_t{4} << ((data[0] >> 2) % 3);
    cfg.coop_budget = 1 + ((data[0] >> 4) & 7);
    const bool destroy_at_once = (data[0] & 0x80) != 0;
    world w(static_cast<std::uint32_t>(size));
    // Detached children may still run: wait for them, or let the
    // destruction cancel them (racing the foreign thread's wakes).
    if (single) {
        aspen::current_thread_runtime rt(cfg);
        rt.block_on(root(w, data + 1, size - 1));
        // They run only while a block_on drives: drive until only this is left.
        if (!destroy_at_once) rt.block_on(drive_until_alone(rt));
    } else {
        aspen::runtime rt(cfg);
        rt.block_on(root(w, data + 1, size - 1));
        while (!destroy_at_once && rt.metrics().tasks_alive != 0)
            std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    const std::uint32_t children = w.counts.next_id.load();
    for (std::uint32_t id = 0; id < children; ++id) {
        const unsigned s = w.counts.started[id].load(), f = w.counts.finished[id].load(),
                       d = w.counts.destroyed[id].load();
        const bool aborted = w.counts.aborted[id].load() || (destroy_at_once && w.detached[id]);
        if (d != 1) die("a child's frame was not destroyed exactly once");
        if (s > 1 || f > s) die("a child started twice or finished without starting");
        if (!aborted && (s != 1 || f != 1)) die("a child that was not aborted did not run exactly once");
    }
    if (w.violations.load() != 0) die("more than 2 permits / 1 mutex holder, or a wrong oneshot / nested value");
    if (w.messages_alive.load() != 0) die("a message object was leaked or destroyed twice");
    if (w.sent.load() != w.received.load()) die("a message sent was not received");
    return 0;
}
