// Registry of spawned tasks that shutdown could not find otherwise: those
// that went idle at least once (waiting on a waker no one may ever fire),
// and those spawned from outside the runtime. Queued tasks are found by
// draining the queues, and a running task belongs to a worker that shutdown
// joins first, so a task spawned by a worker that completes without ever
// waiting (most fork-join tasks) never touches the registry.
//
// Sharded intrusive doubly linked lists, one small spinlock each: a worker
// registers into its own shard, so the lock is normally uncontended; removal
// happens on whichever thread completes the task and locks the task's shard.
// A closed registry refuses new tasks; the check happens under the shard
// lock so a spawn racing with shutdown is either swept or refused.
#pragma once

#include <aspen/detail/task_header.hpp>

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

namespace aspen::detail {

class task_registry {
public:
    explicit task_registry(std::size_t shards);
    // False when closed: the task was not registered.
    bool insert(task_header* t, std::size_t shard) noexcept;
    void remove(task_header* t) noexcept;
    void close() noexcept;
    bool closed() const noexcept {
        // acquire: a spawn that sees the registry open is ordered before the
        // close, hence before the shutdown drain that follows it.
        return closed_.load(std::memory_order_acquire);
    }
    // Takes a reference on every registered task and returns them.
    std::vector<task_header*> snapshot();
    std::size_t size() const noexcept;

private:
    struct alignas(64) shard {
        std::atomic<bool> locked{false};
        task_header* head = nullptr;
        std::atomic<std::size_t> count{0};
        void lock() noexcept;
        void unlock() noexcept;
    };
    std::unique_ptr<shard[]> shards_;
    std::size_t num_shards_;
    std::atomic<bool> closed_{false};
};

}  // namespace aspen::detail
