// wake_all_locked: wakes every waiter queued right now on a primitive whose
// state change concerns all of them (a barrier trips, a broadcast or watch
// value is sent, the last sender goes). Not a public API.
//
// The queue moves to a list on this stack first; nodes are popped from it
// under the lock and their wakers woken in batches with the lock released.
// A waiter that queues again in the meantime is not in this round, and one
// destroyed in the meantime unlinks itself from this list under the lock.
#pragma once

#include <aspen/sync/waiter_list.hpp>

#include <mutex>
#include <utility>

namespace aspen::detail::sync {

// Node: a waiter_node with an `aspen::waker waker` member. `g` holds the
// primitive's lock on entry and on return.
template <class Node>
void wake_all_locked(waiter_list& waiters, std::unique_lock<std::mutex>& g) noexcept {
    waiter_list round;
    round.splice_back(waiters);
    waker_batch wake;
    while (auto* n = static_cast<Node*>(round.pop_front())) {
        wake.push(std::move(n->waker));
        if (wake.full() || round.empty()) {
            g.unlock();
            wake.wake_all();
            g.lock();
        }
    }
}

}  // namespace aspen::detail::sync
