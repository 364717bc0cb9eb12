// Coroutine frame allocation: [task_header | frame] blocks recycled through
// per-thread free lists by size class.
//
// Why per-thread lists with no synchronisation: a frame is allocated by the
// thread that creates the coroutine and freed by whichever thread drops the
// last reference; pushing it onto *that* thread's list needs no atomics.
// Memory migrates between threads in producer/consumer patterns, so each
// list is capped and the surplus goes back to the system allocator.
//
// ASPEN_NO_FRAME_POOL (set in the ASan build) sends every block straight to
// operator new/delete so the sanitizer sees each free.
#include <aspen/detail/task_header.hpp>

#include <cassert>
#include <cstddef>
#include <coroutine>
#include <cstdint>
#include <utility>
#include <new>

namespace aspen::detail {
namespace {

// Size classes 16 bytes apart (a block's alignment): a task's block is
// memory traffic when a million of them are alive at once, and 64-byte
// classes rounded spawn_many's 208-byte blocks up to 256 (spawn_many_local
// 12% faster with 16). The pool's arrays stay small (1.5 KiB a thread).
constexpr std::size_t granule = 16;
constexpr std::size_t num_classes = 128;          // blocks up to 2 KiB are pooled
constexpr std::size_t max_cached_per_class = 512;  // cap on a thread's hoard

struct free_block {
    free_block* next;
};

// Plain data, constant-initialised: every access is a thread-pointer offset,
// with no init guard on the hot path. The cleanup object that frees the
// hoard at thread exit is created by the thread's first push.
struct frame_pool {
    free_block* heads[num_classes];
    std::uint32_t counts[num_classes];
    bool cleanup_armed;
};
thread_local frame_pool pool{};

struct pool_cleanup {
    ~pool_cleanup() {
        for (auto*& head : pool.heads) {
            while (head) ::operator delete(std::exchange(head, head->next));
        }
        // The thread is exiting: every later free bypasses the pool (the
        // cap check fails) and every allocation misses it (empty lists).
        for (auto& count : pool.counts) count = max_cached_per_class;
    }
};

[[gnu::noinline]] void arm_cleanup() {
    thread_local pool_cleanup cleanup;
    (void)cleanup;
    pool.cleanup_armed = true;
}

#ifdef ASPEN_NO_FRAME_POOL
constexpr bool use_pool = false;
#else
constexpr bool use_pool = true;
#endif

std::size_t class_of(std::size_t bytes) noexcept { return (bytes + granule - 1) / granule - 1; }

// Only what the free needs: most frames are awaited inline and never use
// the rest of the header, which spawn_root builds (init_header).
void* start_block(void* block, std::size_t total, std::size_t result_offset) noexcept {
    auto* header = static_cast<task_header*>(block);
    header->alloc_size = static_cast<std::uint32_t>(total);
    header->result_offset = static_cast<std::uint32_t>(result_offset);
    header->spawned = false;
    return header->frame();
}

// What the system allocator is asked for: a pooled size rounds up to its
// class, so the block fits any frame of that class when it comes back.
std::size_t system_size(std::size_t total) noexcept {
    std::size_t c = class_of(total);
    return use_pool && c < num_classes ? (c + 1) * granule : total;
}

// The pool has no block of this size. Out of line (as the two slow paths
// of raw_free below), so a pool hit needs no stack frame.
[[gnu::noinline]] void* allocate_from_system(std::size_t total, std::size_t result_offset) {
    void* block = ::operator new(system_size(total));
    return start_block(block, total, result_offset);
}

void push_block(void* p, std::size_t c) noexcept {
    pool.heads[c] = new (p) free_block{pool.heads[c]};
    ++pool.counts[c];
}

// The thread's first block: whatever the pool holds must be freed at
// thread exit.
[[gnu::noinline]] void push_first_block(void* p, std::size_t c) noexcept {
    arm_cleanup();
    push_block(p, c);
}

// Sized: in the ASan build (no pool) the sanitizer then checks that every
// frame is freed with the size it was allocated with, which deallocate_frame
// takes from the compiler and not from the header.
[[gnu::noinline]] void free_to_system(void* p, std::size_t total) noexcept {
    ::operator delete(p, system_size(total));
}

void raw_free(void* p, std::size_t bytes) noexcept {
    std::size_t c = class_of(bytes);
    if (!use_pool || c >= num_classes || pool.counts[c] >= max_cached_per_class) return free_to_system(p, bytes);
    if (pool.counts[c] == 0 && !pool.cleanup_armed) return push_first_block(p, c);
    push_block(p, c);
}

// The frame destroy_root_frame is destroying on this thread. Why not the
// header's `spawned` flag: every inline frame's free then read its header,
// which cost fib and skynet 2% to 6% (alternating runs at 1 and 2 workers).
thread_local void* kept_frame = nullptr;

}  // namespace

void* allocate_frame(std::size_t frame_size, std::size_t result_size, std::size_t result_align) {
    std::size_t result_offset = result_offset_of(frame_size, result_align);
    std::size_t total = result_offset + result_size;
    std::size_t c = class_of(total);
    if (use_pool && c < num_classes) {
        if (free_block* b = pool.heads[c]) {
            pool.heads[c] = b->next;
            --pool.counts[c];
            return start_block(b, total, result_offset);
        }
    }
    return allocate_from_system(total, result_offset);
}

void free_task_memory(task_header* t) noexcept {
    if (t->result_dtor) t->result_dtor(t->result_slot());
    std::size_t bytes = t->alloc_size;
    t->~task_header();
    raw_free(t, bytes);
}

void destroy_root_frame(task_header* t) noexcept {
    // Nested: a destructor in the frame may destroy another task's frame.
    void* outer = std::exchange(kept_frame, t->frame());
    std::coroutine_handle<>::from_address(t->frame()).destroy();
    kept_frame = outer;
}

void deallocate_frame(void* frame, std::size_t block_size) noexcept {
    // A spawned task's frame is destroyed when it completes or is cancelled,
    // but the block (header, result slot) lives until its last reference:
    // the join handle reads the outcome there.
    if (frame == kept_frame) return;
    task_header* t = task_header::of_frame(frame);
    // Checked in the sanitizer builds (asserts on; ASan also checks the
    // size of every free, see free_to_system, and sees a spawned block
    // freed here as a use after free when its handle reads it).
    assert(!t->spawned && block_size == t->alloc_size);
    raw_free(t, block_size);  // never spawned: no header was built
}

}  // namespace aspen::detail
