// A plain thread's waker and sleep (include/aspen/detail/thread_parker.hpp).
//
// Protocol: `woken` is 0 while nothing woke the thread since its last park
// returned, 1 after a wake. A wake stores 1, then FUTEX_WAKEs the word. park
// swaps it back to 0: a 1 means a wake came, so return; a 0 means sleep in
// FUTEX_WAIT, which the kernel enters only while the word still reads 0, so
// a wake between the swap and the wait makes the wait return at once. No
// wake is lost; a spurious return costs the caller one more poll.
//
// Lifetime: the target is freed by whoever drops the last reference (the
// parked thread's own, or a waker copy held by the operation or by a
// waker batch on another thread), so a wake that comes after the call
// returned touches live memory.
#include <aspen/detail/thread_parker.hpp>

#include "scheduler/scheduler.hpp"
#include "sync/futex.hpp"

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace aspen::detail {

struct parker_target {
    std::atomic<std::uint32_t> refs{1};
    std::atomic<std::uint32_t> woken{0};
};

namespace {

using target = parker_target;

void parker_clone(void* p) noexcept {
    // relaxed: a new reference from one we hold orders nothing.
    static_cast<target*>(p)->refs.fetch_add(1, std::memory_order_relaxed);
}
void parker_drop(void* p) noexcept {
    auto* t = static_cast<target*>(p);
    // acq_rel: the last owner's delete must see every other owner's writes.
    if (t->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete t;
}
void parker_wake_by_ref(void* p) noexcept {
    auto* t = static_cast<target*>(p);
    // release: what the waker did before the wake (a value sent, a lock
    // freed) happens before the parked thread's acquire swap and re-poll.
    t->woken.store(1, std::memory_order_release);
    futex_wake_one(&t->woken);
}
void parker_wake(void* p) noexcept {
    parker_wake_by_ref(p);
    parker_drop(p);
}
constexpr waker_vtable parker_vtable{parker_clone, parker_wake, parker_wake_by_ref, parker_drop};

}  // namespace

thread_parker::thread_parker() : target_(new parker_target), waker_(&parker_vtable, target_) {}

void thread_parker::park() noexcept {
    // acquire: pairs with the waker's release store.
    while (target_->woken.exchange(0, std::memory_order_acquire) == 0) futex_wait(&target_->woken, 0);
}

void check_may_block(const char* what) {
    if (tls().sched)
        throw std::logic_error(std::string(what) +
                               ": called on a runtime's thread, where waiting would block the worker; co_await "
                               "the operation instead, or call this from spawn_blocking or a plain thread");
}

}  // namespace aspen::detail
