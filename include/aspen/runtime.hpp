// aspen::runtime: the multi-threaded work-stealing runtime.
#pragma once

#include <aspen/config.hpp>
#include <aspen/detail/runtime_base.hpp>

#include <cstddef>

namespace aspen {

class runtime : public detail::runtime_base {
public:
    // Starts cfg.workers threads; throws std::invalid_argument on a bad cfg.
    explicit runtime(const config& cfg = config{});
    ~runtime();
    std::size_t num_workers() const noexcept { return workers_; }

private:
    std::size_t workers_;
};

}  // namespace aspen
