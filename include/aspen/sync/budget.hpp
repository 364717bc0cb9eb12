// The coop budget of the sync primitives that use it (barrier, broadcast,
// watch; shared_mutex gets it through semaphore). Not a public API.
//
// Every poll that is about to complete an operation calls coop_proceed
// first, before changing any state. It spends one unit of the task's
// budget (config::coop_budget per poll, as consume_budget does); when none
// is left, it asks the task to yield behind all ready work, wakes it, and
// returns false: the caller returns pending with nothing changed, and the
// next poll (with a fresh budget) completes the operation. So a loop over an
// always-ready channel cannot hog its worker.
#pragma once

#include <aspen/coop.hpp>
#include <aspen/detail/task_header.hpp>
#include <aspen/waker.hpp>

namespace aspen::detail::sync {

inline bool coop_proceed(const aspen::context& cx) noexcept {
    if (coop_try_consume()) return true;
    // The polling task is RUNNING: the wake only marks it NOTIFIED, and the
    // flag sends it to the back of the ready work when the poll returns.
    if (task_header* t = current_task()) t->yield_requested = true;
    cx.waker().wake_by_ref();
    return false;
}

}  // namespace aspen::detail::sync
