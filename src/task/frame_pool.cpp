// The frame pool's slow paths and thread-exit cleanup; the fast paths are
// inline in include/aspen/detail/frame_pool.hpp.
//
// Why per-thread lists with no synchronisation: a frame is allocated by the
// thread that creates the coroutine and freed by whichever thread drops the
// last reference; pushing it onto *that* thread's list needs no atomics.
// Memory migrates between threads in producer/consumer patterns, so each
// list is capped; a full list moves to the depot (below), from which a
// thread with an empty list takes it, and only what the depot has no room
// for goes back to the system allocator. The depot's lists are kept for
// the life of the process (at most 1 MiB a class, and at least one list).
//
// Size classes are 16 bytes apart (a block's alignment): a task's block is
// memory traffic when a million of them are alive at once, and 64-byte
// classes rounded spawn_many's 208-byte blocks up to 256 (spawn_many_local
// 12% faster with 16). The lists stay small (1.5 KiB a thread).
//
// ASPEN_NO_FRAME_POOL (set build-wide in the ASan build) sends every block
// straight to operator new/delete so the sanitizer sees each free.
#include <aspen/detail/frame_pool.hpp>

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <mutex>
#include <new>
#include <utility>

namespace aspen::detail {
namespace pool {

#ifdef ASPEN_NO_FRAME_POOL
extern const int built_without_frame_pool = 0;
#else
extern const int built_with_frame_pool = 0;
#endif
thread_local constinit lists tls_lists{};
thread_local constinit void* kept_frame = nullptr;

namespace {

struct pool_cleanup {
    ~pool_cleanup() {
        for (auto*& head : tls_lists.heads) {
            while (head) ::operator delete(std::exchange(head, head->next));
        }
        // The thread is exiting: every later free bypasses the pool (no
        // room, and armed: free_slow) and every allocation misses it
        // (empty lists, and no room for a depot's list).
        for (auto& room : tls_lists.room) room = 0;
    }
};

// The thread's first block: whatever the pool holds must be freed at
// thread exit. The cleanup object is created by the thread's first push.
// Arming gives every class its room: until then the lists are empty and
// room is 0, which sends every free here.
void arm_cleanup() {
    thread_local pool_cleanup cleanup;
    (void)cleanup;
    tls_lists.cleanup_armed = true;
    for (auto& room : tls_lists.room) room = max_cached_per_class;
}

// What the system allocator is asked for: a pooled size rounds up to its
// class, so the block fits any frame of that class when it comes back.
std::size_t system_size(std::size_t total) noexcept {
    std::size_t c = class_of(total);
    return enabled && c < num_classes ? (c + 1) * granule : total;
}

// The depot: full lists handed over by threads that free more blocks of a
// class than they allocate, taken by threads whose list of that class ran
// dry, before they ask the system allocator. Why: in a producer/consumer
// pattern (a task spawning many that other workers run) the producer's
// list is always empty and the consumers' always full, so every block went
// from one thread's malloc arena and back into it from another thread,
// whose free then waits for the arena's lock while the producer holds it:
// spawn_many_local at 2 workers took 212 to 276 ms without the depot, 74
// to 77 with it (1 worker unchanged). A whole list moves in one step (it
// is already linked); one lock per class, taken once per
// max_cached_per_class blocks.
struct depot_class {
    std::mutex mu;
    // Full lists held. Written under mu; read without it first, so that a
    // thread freeing (allocating) a million blocks into a full (from an
    // empty) depot does not take the lock for each: that cost
    // spawn_many_local at 1 worker 13%.
    std::atomic<std::uint32_t> count{0};
    free_block* lists[depot_lists]{};
};
// constinit: frames may be allocated during other files' static initialisation.
constinit depot_class depot[num_classes];

// Moves the thread's full list of class c to the depot; false (nothing
// moved) if the depot's room for the class is taken.
bool give_to_depot(std::size_t c) noexcept {
    depot_class& d = depot[c];
    // relaxed: a hint only; the decision is made again under the lock.
    if (d.count.load(std::memory_order_relaxed) == depot_lists_of(c)) return false;
    std::lock_guard lock(d.mu);
    // relaxed (both): under mu, which orders every change of count and of
    // the lists (the blocks' links included) with the taker's.
    std::uint32_t n = d.count.load(std::memory_order_relaxed);
    if (n == depot_lists_of(c)) return false;
    d.lists[n] = std::exchange(tls_lists.heads[c], nullptr);
    d.count.store(n + 1, std::memory_order_relaxed);
    tls_lists.room[c] = max_cached_per_class;
    return true;
}

// The thread's exit cleanup has run (armed, no room, an empty list): its
// lists must stay empty, so it neither takes from the depot nor keeps a
// block. A living armed thread has no room only in a full list.
bool past_exit_cleanup(std::size_t c) noexcept {
    return tls_lists.cleanup_armed && tls_lists.room[c] == 0 && tls_lists.heads[c] == nullptr;
}

// The depot holds a list of class c. relaxed: a hint, as in give_to_depot.
bool depot_has_lists(std::size_t c) noexcept { return depot[c].count.load(std::memory_order_relaxed) != 0; }

// Gives the thread's empty list of class c a full list from the depot;
// false if it has none.
bool take_from_depot(std::size_t c) noexcept {
    depot_class& d = depot[c];
    std::lock_guard lock(d.mu);
    // relaxed (both): under mu, as in give_to_depot.
    std::uint32_t n = d.count.load(std::memory_order_relaxed);
    if (n == 0) return false;
    tls_lists.heads[c] = d.lists[n - 1];
    d.count.store(n - 1, std::memory_order_relaxed);
    tls_lists.room[c] = 0;
    return true;
}

}  // namespace

void* allocate_from_system(std::size_t total, std::size_t result_offset) {
    std::size_t c = class_of(total);
    // An armed thread frees what it takes at exit. Armed first: arming
    // gives the class its room, which the full list from the depot then
    // takes.
    if (enabled && c < num_classes && !past_exit_cleanup(c) && depot_has_lists(c)) {
        if (!tls_lists.cleanup_armed) arm_cleanup();
        if (take_from_depot(c)) return start_block(pop(c), total, result_offset);
    }
    void* block = ::operator new(system_size(total));
    return start_block(block, total, result_offset);
}

// Sized: in the ASan build (no pool) the sanitizer then checks that every
// frame is freed with the size it was allocated with, which deallocate_frame
// takes from the compiler and not from the header.
void free_slow(void* block, std::size_t bytes) noexcept {
    std::size_t c = class_of(bytes);
    if (!enabled || c >= num_classes) return ::operator delete(block, system_size(bytes));
    // Not armed yet: the thread's first push arms it (and gives the class
    // its room).
    if (!tls_lists.cleanup_armed) arm_cleanup();
    // No room otherwise: a full list, which goes to the depot if it has
    // room.
    if (past_exit_cleanup(c) || (tls_lists.room[c] == 0 && !give_to_depot(c)))
        return ::operator delete(block, system_size(bytes));
    push(block, c);
}

}  // namespace pool

void destroy_root_frame(task_header* t) noexcept {
    // Nested: a destructor in the frame may destroy another task's frame.
    void* outer = std::exchange(pool::kept_frame, t->frame());
    std::coroutine_handle<>::from_address(t->frame()).destroy();
    pool::kept_frame = outer;
}

}  // namespace aspen::detail
