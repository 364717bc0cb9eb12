// Coroutine frame allocation: [task_header | frame] blocks recycled through
// per-thread free lists by size class. The fast paths (a pool hit, a push
// under the cap) are inline, because every coroutine's creation and end
// runs them: fib(30) with every call awaited inline took 32.0 to 33.6 ms
// while they were calls into the library, 27.4 to 28.2 ms since
// (alternating runs of the benchmark). The slow paths and the pool's
// thread-exit cleanup are in src/task/frame_pool.cpp, which explains the
// pool.
#pragma once

#include <aspen/detail/task_header.hpp>

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <new>

namespace aspen::detail {

namespace pool {
// Size classes 16 bytes apart, pooled up to 2 KiB (see frame_pool.cpp).
inline constexpr std::size_t granule = 16;
inline constexpr std::size_t num_classes = 128;
inline constexpr std::size_t max_cached_per_class = 512;
// The depot (frame_pool.cpp) holds full lists of max_cached_per_class
// blocks: of a class, as many as fit in depot_bytes_per_class, at least
// one and at most depot_lists.
inline constexpr std::size_t depot_bytes_per_class = std::size_t{1} << 20;
inline constexpr std::size_t depot_lists = 8;
// Pooled blocks are carved from chunks of this size, aligned to it (see
// frame_pool.cpp).
inline constexpr std::size_t chunk_bytes = std::size_t{32} << 10;
constexpr std::size_t depot_lists_of(std::size_t c) noexcept {
    std::size_t n = depot_bytes_per_class / (max_cached_per_class * (c + 1) * granule);
    return n == 0 ? 1 : (n > depot_lists ? depot_lists : n);
}
// ASPEN_NO_FRAME_POOL must be the same in every translation unit (the
// build sets it for the whole tree, see CMakeLists.txt): the library
// defines only the marker of the mode it was built in, so code built in
// the other mode fails to link instead of mixing pooled and unpooled
// blocks.
#ifdef ASPEN_NO_FRAME_POOL
inline constexpr bool enabled = false;  // the ASan build: every block to new/delete
extern const int built_without_frame_pool;
[[gnu::used]] static const int* const mode_marker = &built_without_frame_pool;
#else
inline constexpr bool enabled = true;
extern const int built_with_frame_pool;
[[gnu::used]] static const int* const mode_marker = &built_with_frame_pool;
#endif

struct free_block {
    free_block* next;
};
// Plain data, constant-initialised: every access is a thread-pointer offset,
// with no init guard or TLS wrapper call.
// room[c] is how many more blocks class c's list takes before it is full
// (max_cached_per_class minus its length), and 0 while the thread is not
// armed (its first push arms the exit cleanup, which then gives every
// class its room) or past its exit cleanup (nothing may be kept then): so
// the free's fast path tests one number. (A length and an armed flag cost
// it a second load and test: fib(25) with every call awaited inline ran
// about 2 more instructions a call.)
struct lists {
    free_block* heads[num_classes];
    std::uint32_t room[num_classes];
    bool cleanup_armed;
};
extern thread_local constinit lists tls_lists;
// The frame destroy_root_frame is destroying on this thread (its block is
// kept). Why not the header's `spawned` flag: every inline frame's free then
// read its header, which cost fib and skynet 2% to 6%.
extern thread_local constinit void* kept_frame;

constexpr std::size_t class_of(std::size_t bytes) noexcept { return (bytes + granule - 1) / granule - 1; }

// Only what the free needs: most frames are awaited inline and never use
// the rest of the header, which spawn_root builds.
inline void* start_block(void* block, std::size_t total, std::size_t result_offset) noexcept {
    auto* header = static_cast<task_header*>(block);
    header->alloc_size = static_cast<std::uint32_t>(total);
    header->result_offset = static_cast<std::uint32_t>(result_offset);
    header->spawned = false;
    return header->frame();
}

// Out of line (frame_pool.cpp): the pool has no block of this size; a free
// that the fast path below leaves to it (no pool, the list full, or the
// thread's exit cleanup not armed yet: its first push arms it).
void* allocate_from_system(std::size_t total, std::size_t result_offset);
void free_slow(void* block, std::size_t bytes) noexcept;

// Pooled blocks out of their chunks (carved, or taken again from a chunk's
// free blocks) and not given back to them (a block on a free list or in
// the depot counts: it is not back): those of exited
// threads and the calling thread's; another living thread's count joins at
// its exit. For the pool's tests, which run one thread at a time.
std::int64_t blocks_from_system() noexcept;

// Puts a block on class c's list (the caller checked its room).
inline void push(void* block, std::size_t c) noexcept {
    tls_lists.heads[c] = new (block) free_block{tls_lists.heads[c]};
    --tls_lists.room[c];
}

// Takes the newest block off class c's list (the caller checked that the
// list is not empty).
inline free_block* pop(std::size_t c) noexcept {
    free_block* b = tls_lists.heads[c];
    tls_lists.heads[c] = b->next;
    ++tls_lists.room[c];
    return b;
}

inline void free_block_of(void* block, std::size_t bytes) noexcept {
    std::size_t c = class_of(bytes);
    // No room, not an empty list, sends a free out of line (a full list, or
    // a thread not armed yet: its first push arms it): a spawned task's
    // block is often freed into an empty list (its allocation took the
    // last one), and the call into free_slow each time cost fib(30) at 1
    // worker 1% to 3% (49.7 to 50.4 ms against 50.8 to 52.0, three
    // alternating pairs).
    if (!enabled || c >= num_classes || tls_lists.room[c] == 0) return free_slow(block, bytes);
    push(block, c);
}
}  // namespace pool

// operator new of every task frame; returns the frame address. Of the
// header before it only alloc_size, result_offset and spawned (false) are
// set: a frame awaited inline needs no more, and spawn_root builds the rest
// before the task is shared. A spawned root moves its result into a slot of
// result_size bytes after the frame, so its frame (parameters and all) can
// be destroyed the moment it completes.
inline void* allocate_frame(std::size_t frame_size, std::size_t result_size, std::size_t result_align) {
    std::size_t result_offset = result_offset_of(frame_size, result_align);
    std::size_t total = result_offset + result_size;
    std::size_t c = pool::class_of(total);
    if (pool::enabled && c < pool::num_classes && pool::tls_lists.heads[c] != nullptr)
        return pool::start_block(pool::pop(c), total, result_offset);
    return pool::allocate_from_system(total, result_offset);
}

// operator delete of every task frame; block_size is block_size_of the
// frame's size, which the compiler passes to a sized operator delete. Why
// the size comes from the caller and not from the header's alloc_size: a
// free list index computed from a load made the next allocation wait for
// it: an inline await of a task took about 3 ns longer, a fifth of its cost
// (fib(30) with every spawn awaited inline).
inline void deallocate_frame(void* frame, std::size_t block_size) noexcept {
    // A spawned task's frame is destroyed when it completes or is cancelled,
    // but the block (header, result slot) lives until its last reference:
    // the join handle reads the outcome there.
    if (frame == pool::kept_frame) return;
    task_header* t = task_header::of_frame(frame);
    // Checked in the sanitizer builds (asserts on; ASan also checks the
    // size of every free, see free_slow, and sees a spawned block freed
    // here as a use after free when its handle reads it).
    assert(!t->spawned && block_size == t->alloc_size);
    pool::free_block_of(t, block_size);  // never spawned: no header was built
}

// A spawned task's last reference is gone (its frame went at completion):
// runs the result's destructor, the header's, and frees the block. Inline:
// one call less at the end of every spawned task (drop_join_handle).
inline void free_task_memory(task_header* t) noexcept {
    if (t->result_live) t->result_dtor()(t->result_slot());
    std::size_t bytes = t->alloc_size;
    t->~task_header();
    pool::free_block_of(t, bytes);
}

// free_task_memory for a block whose header holds nothing to destroy: no
// result in the slot, no exception, no join waker (end_adopted's, whose
// joiner took the outcome from the frame). Its members' destructors would
// do nothing, so the header's lifetime may simply end with the free.
inline void free_bare_task_memory(task_header* t) noexcept {
    assert(!t->result_live && !t->error && !t->join_waker);
    pool::free_block_of(t, t->alloc_size);
}

}  // namespace aspen::detail
