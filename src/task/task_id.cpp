// Task ids (aspen/task_id.hpp): a process-wide counter, read only when an id
// is first asked for, and one word in the task's header that keeps it.
#include "scheduler/scheduler.hpp"

#include <aspen/task_id.hpp>

#include <atomic>
#include <cstdint>
#include <optional>
#include <stdexcept>

namespace aspen::detail {

namespace {
// relaxed (the add below): ids need only be distinct, which the RMW's
// atomicity gives; no other data is published with one.
constinit std::atomic<std::uint64_t> next_id{1};  // 0 means "none yet"

// A thread's batch of ids for fresh_task_id: one RMW on the shared
// counter per 1,024 ids, not one per id (that cache line would move
// between the workers at every given-back handle asked for its id).
struct id_range {
    std::uint64_t next = 0, end = 0;
};
thread_local constinit id_range local_ids;
}  // namespace

std::uint64_t task_id_of(task_header* t) noexcept {
    // relaxed: the word holds nothing but itself (see next_id).
    std::uint64_t id = t->id.load(std::memory_order_relaxed);
    if (id != 0) return id;
    std::uint64_t fresh = next_id.fetch_add(1, std::memory_order_relaxed);
    // Two first requests may race (the task itself and a handle on another
    // thread): one CAS wins, and the loser returns the winner's id (the
    // failed CAS loads it into `id`). relaxed for the reason above.
    if (t->id.compare_exchange_strong(id, fresh, std::memory_order_relaxed, std::memory_order_relaxed)) return fresh;
    return id;
}

std::uint64_t fresh_task_id() noexcept {
    if (local_ids.next == local_ids.end) [[unlikely]] {
        constexpr std::uint64_t batch = 1024;
        // relaxed: as task_id_of.
        local_ids.next = next_id.fetch_add(batch, std::memory_order_relaxed);
        local_ids.end = local_ids.next + batch;
    }
    return local_ids.next++;
}

}  // namespace aspen::detail

namespace aspen {

task_id task_id_access::of(detail::task_header* t) noexcept { return task_id(detail::task_id_of(t)); }

task_id current_task_id() {
    if (std::optional<task_id> id = try_current_task_id()) return *id;
    throw std::logic_error("aspen::current_task_id: called outside a task running on an aspen runtime");
}

std::optional<task_id> try_current_task_id() noexcept {
    if (detail::task_header* t = detail::current_task()) return task_id_access::of(t);
    return std::nullopt;
}

}  // namespace aspen
