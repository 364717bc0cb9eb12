#include <aspen/metrics.hpp>

namespace aspen {

worker_metrics& worker_metrics::operator+=(const worker_metrics& o) noexcept {
    polls += o.polls;
    tasks_spawned += o.tasks_spawned;
    tasks_completed += o.tasks_completed;
    next_slot_runs += o.next_slot_runs;
    inlined_joins += o.inlined_joins;
    local_pushes += o.local_pushes;
    overflows += o.overflows;
    overflow_tasks += o.overflow_tasks;
    injector_pops += o.injector_pops;
    steal_operations += o.steal_operations;
    tasks_stolen += o.tasks_stolen;
    failed_steals += o.failed_steals;
    parks += o.parks;
    unparks += o.unparks;
    send_polls += o.send_polls;
    budget_forced_yields += o.budget_forced_yields;
    local_queue_depth += o.local_queue_depth;
    for (std::size_t i = 0; i < poll_time_buckets; ++i) poll_time_histogram[i] += o.poll_time_histogram[i];
    poll_time_ns += o.poll_time_ns;
    if (o.longest_poll_ns > longest_poll_ns) longest_poll_ns = o.longest_poll_ns;
    busy_ns += o.busy_ns;
    return *this;
}

worker_metrics runtime_metrics::total() const noexcept {
    worker_metrics sum;
    for (const auto& w : workers) sum += w;
    return sum;
}

}  // namespace aspen
