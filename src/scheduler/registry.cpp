#include "scheduler/registry.hpp"

#include <thread>

namespace aspen::detail {

void task_registry::shard::lock() noexcept {
    // acquire: the critical section sees the previous holder's list edits.
    while (locked.exchange(true, std::memory_order_acquire)) {
        // relaxed: only a hint to stop hammering the line; the exchange above
        // is what takes the lock.
        while (locked.load(std::memory_order_relaxed)) std::this_thread::yield();
    }
}

void task_registry::shard::unlock() noexcept {
    // release: publish our list edits to the next holder.
    locked.store(false, std::memory_order_release);
}

task_registry::task_registry(std::size_t shards)
    : shards_(std::make_unique<shard[]>(shards)), num_shards_(shards) {}

bool task_registry::insert(task_header* t, std::size_t index) noexcept {
    shard& s = shards_[index % num_shards_];
    s.lock();
    // relaxed: close() stores under every shard lock, so the lock orders it.
    if (closed_.load(std::memory_order_relaxed)) {
        s.unlock();
        return false;
    }
    t->reg_shard = static_cast<std::uint16_t>(index % num_shards_);
    t->reg_prev = nullptr;
    t->reg_next = s.head;
    if (s.head) s.head->reg_prev = t;
    s.head = t;
    // relaxed: a statistic (tasks_alive); the list itself is lock-protected.
    s.count.store(s.count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    s.unlock();
    return true;
}

void task_registry::remove(task_header* t) noexcept {
    shard& s = shards_[t->reg_shard];
    s.lock();
    if (t->reg_prev) t->reg_prev->reg_next = t->reg_next;
    else s.head = t->reg_next;
    if (t->reg_next) t->reg_next->reg_prev = t->reg_prev;
    t->reg_prev = t->reg_next = nullptr;
    // relaxed: statistic only, see insert.
    s.count.store(s.count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    s.unlock();
}

void task_registry::close() noexcept {
    for (std::size_t i = 0; i < num_shards_; ++i) {
        shards_[i].lock();
        // relaxed: ordered for inserters by the shard lock we hold.
        closed_.store(true, std::memory_order_relaxed);
        shards_[i].unlock();
    }
}

std::vector<task_header*> task_registry::snapshot() {
    std::vector<task_header*> out;
    for (std::size_t i = 0; i < num_shards_; ++i) {
        shard& s = shards_[i];
        s.lock();
        for (task_header* t = s.head; t; t = t->reg_next) {
            ref_inc(t);
            out.push_back(t);
        }
        s.unlock();
    }
    return out;
}

std::size_t task_registry::size() const noexcept {
    std::size_t n = 0;
    // relaxed: a statistic read while the runtime runs.
    for (std::size_t i = 0; i < num_shards_; ++i) n += shards_[i].count.load(std::memory_order_relaxed);
    return n;
}

}  // namespace aspen::detail
