// aspen::block_in_place's entry (aspen/block_in_place.hpp): where the
// calling thread belongs decides what happens; the hand-off itself is the
// multi-threaded scheduler's (multi_thread.cpp, "block_in_place").
#include <aspen/block_in_place.hpp>

#include "scheduler/scheduler.hpp"

#include <stdexcept>

namespace aspen::detail {

void block_in_place_impl(void (*fn)(void*), void* arg) {
    // Not a runtime's thread (a plain thread, a spawn_blocking function,
    // the function of an outer block_in_place): nothing to hand off.
    if (scheduler* s = tls().sched) return s->block_in_place(fn, arg);
    fn(arg);
}

void scheduler::block_in_place(void (*)(void*), void*) {
    throw std::logic_error(
        "aspen::block_in_place: called on a current_thread runtime, whose one thread runs every task; use "
        "spawn_blocking");
}

}  // namespace aspen::detail
