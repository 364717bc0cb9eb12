// The public runtime classes: thin owners of a scheduler.
#include "scheduler/current_thread.hpp"
#include "scheduler/multi_thread.hpp"

#include <aspen/current_thread_runtime.hpp>
#include <aspen/runtime.hpp>

#include <cstdio>
#include <exception>
#include <stdexcept>

namespace aspen {
namespace detail {

void check_blocking_allowed(const char* what) {
    if (tls().sched)
        throw std::logic_error(std::string(what) +
                               ": called from inside a runtime's task or worker; co_await the task instead");
}

void run_until_complete_on(scheduler* s, task_header* t) { s->run_until_complete(t); }
// Tasks first: destroying them cancels the blocking jobs they wait for, so
// only functions already running are left for the pool to wait for.
void runtime_base::shutdown() {
    sched_->shutdown();
    sched_->blocking().shutdown(std::nullopt);
}
std::size_t runtime_base::shutdown_timeout(std::chrono::nanoseconds d) {
    sched_->shutdown();
    return sched_->blocking().shutdown(d);
}
runtime_metrics runtime_base::metrics() const { return sched_->metrics(); }
runtime_handle runtime_base::handle() const { return runtime_handle(sched_->link()); }

runtime_base::~runtime_base() {
    try {
        shutdown();
    } catch (const std::exception& e) {
        // Destroying a runtime from its own task cannot be done safely: the
        // worker would have to join itself. Say so and stop.
        std::fprintf(stderr, "aspen: fatal: %s\n", e.what());
        std::terminate();
    }
    // Handles may outlive us: wait for their calls in flight, then cut them
    // off, before the scheduler goes.
    sched_->link()->close();
    delete sched_;
}

namespace {
scheduler* make_multi_thread(const config& cfg) {
    cfg.validate();
    return new multi_thread_scheduler(cfg);
}
scheduler* make_current_thread(const config& cfg) {
    cfg.validate();
    return new current_thread_scheduler(cfg);
}
}  // namespace
}  // namespace detail

runtime::runtime(const config& cfg) : runtime_base(detail::make_multi_thread(cfg)), workers_(cfg.workers) {}
runtime::~runtime() = default;

current_thread_runtime::current_thread_runtime(const config& cfg)
    : runtime_base(detail::make_current_thread(cfg)) {}
current_thread_runtime::~current_thread_runtime() = default;

}  // namespace aspen
