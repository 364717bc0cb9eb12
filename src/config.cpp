#include <aspen/config.hpp>

#include <stdexcept>
#include <string>
#include <thread>

namespace aspen {

std::size_t default_workers() noexcept {
    unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : n;
}

namespace {
[[noreturn]] void reject(const char* field, unsigned long long value, const char* rule) {
    throw std::invalid_argument("aspen::config: " + std::string(field) + " = " + std::to_string(value) + " is invalid: " +
                                rule);
}
}  // namespace

void config::validate() const {
    if (workers == 0 || workers > 4096) reject("workers", workers, "must be between 1 and 4096");
    std::uint32_t c = local_queue_capacity;
    if (c < 2 || c > (1u << 20) || (c & (c - 1)) != 0)
        reject("local_queue_capacity", c, "must be a power of two between 2 and 1048576");
    if (steal_attempts == 0) reject("steal_attempts", steal_attempts, "must be at least 1");
    if (global_queue_interval == 0) reject("global_queue_interval", global_queue_interval, "must be at least 1");
    if (event_interval == 0) reject("event_interval", event_interval, "must be at least 1");
    if (coop_budget == 0) reject("coop_budget", coop_budget, "must be at least 1");
    if (max_next_slot_runs == 0) reject("max_next_slot_runs", max_next_slot_runs, "must be at least 1");
    if (max_blocking_threads == 0) reject("max_blocking_threads", max_blocking_threads, "must be at least 1");
    if (blocking_keep_alive.count() < 0)
        throw std::invalid_argument("aspen::config: blocking_keep_alive = " + std::to_string(blocking_keep_alive.count()) +
                                    "ns is invalid: must not be negative");
}

}  // namespace aspen
