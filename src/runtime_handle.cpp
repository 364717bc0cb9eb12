// runtime_handle: spawning onto a runtime through its link, which the
// runtime clears (under the exclusive lock) before it destroys its scheduler.
#include "scheduler/scheduler.hpp"

#include <aspen/errors.hpp>
#include <aspen/runtime_handle.hpp>

#include <optional>
#include <stdexcept>
#include <string>

namespace aspen {

namespace {
[[noreturn]] void throw_empty(const char* what) {
    throw std::logic_error(std::string(what) +
                           ": the handle is empty (default-constructed); take one from runtime::handle() or "
                           "runtime_handle::current()");
}
}  // namespace

namespace detail {

namespace {
// The free functions' misuse: no runtime to go to on this thread.
[[noreturn]] void throw_no_runtime(const char* what, const char* instead) {
    throw std::logic_error(std::string(what) +
                           ": called outside a runtime (not in a task, on a runtime's thread, or in a "
                           "spawn_blocking or block_in_place function); use " +
                           instead + " or a runtime_handle");
}
}  // namespace

void spawn_on_blocking_owner(task_header* t) {
    if (auto owner = blocking_thread_owner()) return runtime_handle(std::move(owner)).spawn_released(t, "aspen::spawn");
    discard_unspawned(t);
    throw_no_runtime("aspen::spawn", "runtime::spawn");
}

// The link outlives the returned lock: the runtime keeps it until its
// shutdown has cleared it, which waits for the lock.
pinned_scheduler pin_blocking_owner(const char* what) {
    if (auto owner = blocking_thread_owner()) return runtime_handle(std::move(owner)).pin(what);
    throw_no_runtime(what, "runtime::spawn_blocking");
}

}  // namespace detail

runtime_handle runtime_handle::current() {
    if (detail::scheduler* s = detail::tls().sched) return runtime_handle(s->link());
    if (auto owner = detail::blocking_thread_owner()) return runtime_handle(std::move(owner));
    throw std::logic_error(
        "aspen::runtime_handle::current: called outside a runtime's task, worker thread or spawn_blocking "
        "function; pass a handle in");
}

detail::pinned_scheduler runtime_handle::pin(const char* what) const {
    if (!link_) throw_empty(what);
    std::optional<detail::pinned_scheduler> p = try_pin();
    if (!p) throw runtime_shut_down();
    return std::move(*p);
}

std::optional<detail::pinned_scheduler> runtime_handle::try_pin() const {
    std::shared_lock lock(link_->mutex());
    detail::scheduler* s = link_->sched();
    if (!s) return std::nullopt;
    return detail::pinned_scheduler{std::move(lock), s};
}

// The task is discarded only after the lock is released: its destructors
// may use a handle to this runtime themselves, and a second shared lock on
// one thread may deadlock against a waiting close().
void runtime_handle::spawn_released(detail::task_header* t, const char* what) const {
    bool spawned = false;
    if (link_) {
        std::shared_lock lock(link_->mutex());
        detail::scheduler* s = link_->sched();
        spawned = s && detail::try_spawn_root(s, t);
    }
    if (spawned) return;
    detail::discard_unspawned(t);
    if (!link_) throw_empty(what);
    throw runtime_shut_down();
}

runtime_metrics runtime_handle::metrics() const { return pin("aspen::runtime_handle::metrics").sched->metrics(); }

}  // namespace aspen
