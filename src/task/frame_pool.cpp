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
// Size classes are 16 bytes apart (a block's alignment). With blocks from
// malloc, 64-byte classes rounded spawn_many's 208-byte blocks up to 256
// and spawn_many_local was 12% slower (memory traffic, a million alive at
// once). Carved blocks (below) take whole lines again, 256 bytes there,
// and spawn_many_local stayed within the noise (three alternating rounds;
// a carve is a bump of a pointer where a malloc was a call into glibc).
// The lists stay small (1.5 KiB a thread).
//
// Pooled blocks are carved from 32 KiB chunks (chunk_bytes), one size
// class a chunk and one chunk a class a thread carves from, each block
// starting on a cache line and its stride a whole number of lines. Why:
// with blocks 16 bytes apart from malloc, a task's block and its
// neighbour, run by two workers, shared a line that both wrote. skynet
// at 2 workers, alternating rounds of the benchmark: faster in 18 of 19,
// median 0.57x of TBB against 0.615x (docs/performance.md, stop 48).
// 128-byte lines were no better than 64. Not an aligned operator new per
// block: that made spawn_many_local 1.9x slower at 1 worker (glibc's
// memalign path); and not a line more per malloc'd block, aligned inside
// it: 1.6x slower there. Blocks go back to their chunks only once the
// thread's list and the depot are full, a whole list at a time. A chunk
// goes back to the system with its last block, and until then its free
// blocks serve the next allocations of its class (see "Chunks" below).
// Blocks of sizes the pool does not keep come from operator new as before.
//
// ASPEN_NO_FRAME_POOL (set build-wide in the ASan build) sends every block
// straight to operator new/delete so the sanitizer sees each free.
#include <aspen/detail/frame_pool.hpp>

#include <atomic>
#include <cassert>
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

// Chunks. Each chunk holds blocks of one size class, carved by one thread
// (tls_carvers[c]) and, once handed out, freed by any. Every field of a
// chunk but the carver's bump pointer is guarded by its class's mutex
// (depot[c].mu, below); the carver alone moves its pointer.
//   outstanding  carve_bias while the chunk is carved (the carver does not
//                count its carves), +1 for each block taken from the
//                chunk's free list, -1 for each block given back to it;
//                at retirement (the carver leaves the chunk: full, or its
//                thread exits) -(carve_bias - carved).
//   free         the blocks given back, waiting for reuse; the chunk is
//                in its class's list of partial chunks (prev, next)
//                exactly while this is not empty.
// Invariants: after retirement, outstanding is the number of the chunk's
// blocks in use (handed out and not given back: on a thread's list, in
// the depot, or a task's); before it, carve_bias less the carves not in
// use, which stays above 0 (a chunk holds far fewer than carve_bias
// blocks). A chunk is listed while it has free blocks (its carver may
// still be carving it: a free block is a carved one, so a taker and the
// carver never meet). So outstanding reaches 0 once, after retirement
// and the return of its last block, and then the chunk goes back to the
// system at once, its free blocks with it; until then a thread that needs
// a block of the class takes a listed chunk's free blocks before carving
// a new one. Why one class a chunk: a block given back can then serve the
// next allocation of its class, so one long-lived task keeps only its own
// block, not all of its chunk's memory from reuse (with chunks shared by
// every class, the blocks given back waited until the whole chunk was
// back: a burst of tasks of which every hundredth lived on kept nearly all
// of the burst's memory, and the next burst carved as much again; six
// bursts of 400,000 blocks of 448 bytes, one in 100 kept: RSS 219 MiB
// after the first, 1,008 after the sixth, against 219 and 240 now).
constexpr std::size_t line_bytes = 64;
constexpr std::uint64_t carve_bias = std::uint64_t{1} << 32;

struct alignas(line_bytes) chunk_header {
    std::uint64_t outstanding = carve_bias;
    free_block* free = nullptr;
    std::uint32_t free_count = 0;
    chunk_header* prev = nullptr;
    chunk_header* next = nullptr;
};

// Whole lines, so that no two blocks share one.
constexpr std::size_t stride_of(std::size_t c) noexcept {
    return ((c + 1) * granule + line_bytes - 1) / line_bytes * line_bytes;
}
// A listed chunk's free blocks become a thread's whole list at once.
static_assert((chunk_bytes - sizeof(chunk_header)) / stride_of(class_of(sizeof(task_header))) <= max_cached_per_class,
              "a chunk's free blocks must fit in one thread list");

struct carver {
    std::byte* next;
    std::byte* end;
    chunk_header* chunk;
    std::uint64_t carved;
};
thread_local constinit carver tls_carvers[num_classes]{};

// blocks_from_system's count: a thread's own until its exit cleanup folds
// it into the process's (a plain number on the paths that carve and give
// back; a shared counter there would be one more line the workers pass
// between them). relaxed: read only by a thread that joined the others.
std::atomic<std::int64_t> exited_threads_blocks{0};
thread_local constinit std::int64_t thread_blocks = 0;
thread_local constinit bool thread_blocks_folded = false;

void count_blocks(std::int64_t n) noexcept {
    if (thread_blocks_folded)
        exited_threads_blocks.fetch_add(n, std::memory_order_relaxed);
    else
        thread_blocks += n;
}

void fold_thread_blocks() noexcept {
    exited_threads_blocks.fetch_add(std::exchange(thread_blocks, 0), std::memory_order_relaxed);
    thread_blocks_folded = true;
}

chunk_header* chunk_of(void* block) noexcept {
    return reinterpret_cast<chunk_header*>(reinterpret_cast<std::uintptr_t>(block) & ~(chunk_bytes - 1));
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
// max_cached_per_class blocks. The same lock guards the class's chunks.
struct depot_class {
    std::mutex mu;
    // Full lists held. Written under mu; read without it first, so that a
    // thread freeing (allocating) a million blocks into a full (from an
    // empty) depot does not take the lock for each: that cost
    // spawn_many_local at 1 worker 13%.
    std::atomic<std::uint32_t> count{0};
    free_block* lists[depot_lists]{};
    // Listed chunks (see "Chunks"), and how many: written under mu, read
    // without it as count is.
    chunk_header* partial = nullptr;
    std::atomic<std::uint32_t> num_partial{0};
};
// constinit: frames may be allocated during other files' static initialisation.
constinit depot_class depot[num_classes];

// The list functions below run under d.mu. relaxed (num_partial): as
// depot_class::count.
void list_chunk(depot_class& d, chunk_header* ch) noexcept {
    ch->prev = nullptr;
    ch->next = d.partial;
    if (d.partial) d.partial->prev = ch;
    d.partial = ch;
    d.num_partial.store(d.num_partial.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void unlist_chunk(depot_class& d, chunk_header* ch) noexcept {
    (ch->prev ? ch->prev->next : d.partial) = ch->next;
    if (ch->next) ch->next->prev = ch->prev;
    d.num_partial.store(d.num_partial.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

// n of the chunk's count have gone: at 0 it goes back to the system, its
// free blocks with it. Under d.mu.
void drop_outstanding(depot_class& d, chunk_header* ch, std::uint64_t n) noexcept {
    ch->outstanding -= n;
    if (ch->outstanding != 0) return;
    if (ch->free) unlist_chunk(d, ch);
    ch->~chunk_header();
    ::operator delete(ch, chunk_bytes, std::align_val_t{chunk_bytes});
}

void retire_chunk(std::size_t c) noexcept {
    carver& k = tls_carvers[c];
    if (k.chunk) {
        std::lock_guard lock(depot[c].mu);
        drop_outstanding(depot[c], k.chunk, carve_bias - k.carved);
    }
    k = carver{};
}

// Cut from the thread's chunk of class c.
void* carve(std::size_t c) {
    const std::size_t stride = stride_of(c);
    carver& k = tls_carvers[c];
    if (static_cast<std::size_t>(k.end - k.next) < stride) {
        void* mem = ::operator new(chunk_bytes, std::align_val_t{chunk_bytes});
        retire_chunk(c);
        // Nobody else sees the chunk until a block of it is handed out,
        // which publishes it (the task's spawn, or a free list).
        auto* chunk = new (mem) chunk_header{};
        k = carver{static_cast<std::byte*>(mem) + sizeof(chunk_header), static_cast<std::byte*>(mem) + chunk_bytes, chunk, 0};
    }
    void* block = k.next;
    k.next += stride;
    ++k.carved;
    count_blocks(1);
    return block;
}

// Gives the blocks of list `head` (class c) back to their chunks, under
// one lock.
void give_back(std::size_t c, free_block* head) noexcept {
    if (!head) return;
    depot_class& d = depot[c];
    std::int64_t n = 0;
    {
        std::lock_guard lock(d.mu);
        while (head) {
            free_block* b = std::exchange(head, head->next);
            chunk_header* ch = chunk_of(b);
            if (!ch->free) list_chunk(d, ch);
            b->next = ch->free;
            ch->free = b;
            ++ch->free_count;
            drop_outstanding(d, ch, 1);
            ++n;
        }
    }
    count_blocks(-n);
}

// Gives the thread's empty list of class c the free blocks of a listed
// chunk; false if none is listed.
bool take_from_chunk(std::size_t c) noexcept {
    assert(tls_lists.heads[c] == nullptr);
    depot_class& d = depot[c];
    // relaxed: a hint, as in give_to_depot.
    if (d.num_partial.load(std::memory_order_relaxed) == 0) return false;
    std::uint32_t n = 0;
    {
        std::lock_guard lock(d.mu);
        chunk_header* ch = d.partial;
        if (!ch) return false;
        unlist_chunk(d, ch);
        tls_lists.heads[c] = std::exchange(ch->free, nullptr);
        n = std::exchange(ch->free_count, 0);
        ch->outstanding += n;
    }
    tls_lists.room[c] = static_cast<std::uint32_t>(max_cached_per_class - n);
    count_blocks(n);
    return true;
}

struct pool_cleanup {
    ~pool_cleanup() {
        for (std::size_t c = 0; c < num_classes; ++c) {
            give_back(c, std::exchange(tls_lists.heads[c], nullptr));
            retire_chunk(c);
        }
        fold_thread_blocks();
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

std::int64_t blocks_from_system() noexcept {
    return exited_threads_blocks.load(std::memory_order_relaxed) + thread_blocks;
}

void* allocate_from_system(std::size_t total, std::size_t result_offset) {
    std::size_t c = class_of(total);
    if (!enabled || c >= num_classes) return start_block(::operator new(total), total, result_offset);
    // An armed thread frees what it takes at exit, and its cleanup retires
    // its chunk. Armed first: arming gives the class its room, which the
    // full list from the depot then takes.
    if (!tls_lists.cleanup_armed) arm_cleanup();
    // Then the free blocks of a chunk: before a new carve, so that a block
    // given back is used again while its chunk is held by others.
    if (!past_exit_cleanup(c) && ((depot_has_lists(c) && take_from_depot(c)) || take_from_chunk(c)))
        return start_block(pop(c), total, result_offset);
    void* block = carve(c);
    // Past the exit cleanup nothing would retire the chunk later, so it
    // goes at once: a 32 KiB chunk for each such block, back with it (only
    // thread_local destructors allocate then, and seldom).
    if (past_exit_cleanup(c)) retire_chunk(c);
    return start_block(block, total, result_offset);
}

// Sized: in the ASan build (no pool) the sanitizer then checks that every
// frame is freed with the size it was allocated with, which deallocate_frame
// takes from the compiler and not from the header.
void free_slow(void* block, std::size_t bytes) noexcept {
    std::size_t c = class_of(bytes);
    if (!enabled || c >= num_classes) return ::operator delete(block, bytes);
    // Not armed yet: the thread's first push arms it (and gives the class
    // its room).
    if (!tls_lists.cleanup_armed) arm_cleanup();
    if (past_exit_cleanup(c)) return give_back(c, new (block) free_block{nullptr});
    // No room otherwise: a full list, which goes to the depot if it has
    // room, else back to its chunks, all of it under one lock (one a block
    // would take the class's lock at every free of a burst); the block
    // then starts the list anew.
    if (tls_lists.room[c] == 0 && !give_to_depot(c)) {
        give_back(c, std::exchange(tls_lists.heads[c], nullptr));
        tls_lists.room[c] = max_cached_per_class;
    }
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
