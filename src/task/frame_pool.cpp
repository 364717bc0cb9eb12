// The frame pool's slow paths and thread-exit cleanup; the fast paths are
// inline in include/aspen/detail/frame_pool.hpp.
//
// Why per-thread lists with no synchronisation: a frame is allocated by the
// thread that creates the coroutine and freed by whichever thread drops the
// last reference; pushing it onto *that* thread's list needs no atomics.
// Memory migrates between threads in producer/consumer patterns, so each
// list is capped and the surplus goes back to the system allocator.
//
// Size classes are 16 bytes apart (a block's alignment): a task's block is
// memory traffic when a million of them are alive at once, and 64-byte
// classes rounded spawn_many's 208-byte blocks up to 256 (spawn_many_local
// 12% faster with 16). The lists stay small (1.5 KiB a thread).
//
// ASPEN_NO_FRAME_POOL (set build-wide in the ASan build) sends every block
// straight to operator new/delete so the sanitizer sees each free.
#include <aspen/detail/frame_pool.hpp>

#include <coroutine>
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
        // The thread is exiting: every later free bypasses the pool (the
        // cap check fails) and every allocation misses it (empty lists).
        for (auto& count : tls_lists.counts) count = max_cached_per_class;
    }
};

// The thread's first block: whatever the pool holds must be freed at
// thread exit. The cleanup object is created by the thread's first push.
void arm_cleanup() {
    thread_local pool_cleanup cleanup;
    (void)cleanup;
    tls_lists.cleanup_armed = true;
}

// What the system allocator is asked for: a pooled size rounds up to its
// class, so the block fits any frame of that class when it comes back.
std::size_t system_size(std::size_t total) noexcept {
    std::size_t c = class_of(total);
    return enabled && c < num_classes ? (c + 1) * granule : total;
}

}  // namespace

void* allocate_from_system(std::size_t total, std::size_t result_offset) {
    void* block = ::operator new(system_size(total));
    return start_block(block, total, result_offset);
}

// Sized: in the ASan build (no pool) the sanitizer then checks that every
// frame is freed with the size it was allocated with, which deallocate_frame
// takes from the compiler and not from the header.
void free_slow(void* block, std::size_t bytes) noexcept {
    std::size_t c = class_of(bytes);
    if (!enabled || c >= num_classes || tls_lists.counts[c] >= max_cached_per_class)
        return ::operator delete(block, system_size(bytes));
    if (!tls_lists.cleanup_armed) arm_cleanup();
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
