// aspen::current_thread_runtime: the same API on a single-threaded executor
// that runs tasks on the thread calling block_on (tests, embedding).
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
