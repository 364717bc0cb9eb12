// aspen::current_thread_runtime: the same API on a single-threaded executor
// that runs tasks on the thread calling block_on (tests, embedding).
// One block_on drives the runtime at a time, as in Tokio: a block_on from
// another thread (through a runtime_handle) waits while one drives, and its
// task runs in that drive; when that drive ends first (its own task done),
// a waiting block_on takes it over. Tasks, timers and sockets run only
// while some thread is inside block_on.
#pragma once

#include <aspen/config.hpp>
#include <aspen/detail/runtime_base.hpp>

namespace aspen {

class current_thread_runtime : public detail::runtime_base {
public:
    // Uses coop_budget, global_queue_interval and the exception handler of
    // cfg; worker-pool fields are ignored.
    explicit current_thread_runtime(const config& cfg = config{});
    ~current_thread_runtime();
};

}  // namespace aspen
