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

#include <cstddef>
#include <cstdint>
#include <utility>
#include <new>

namespace aspen::detail {
namespace {

constexpr std::size_t granule = 64;
constexpr std::size_t num_classes = 32;           // blocks up to 2 KiB are pooled
constexpr std::size_t max_cached_per_class = 512;  // cap on a thread's hoard

struct free_block {
    free_block* next;
};

// Plain data, constant-initialised: every access is a thread-pointer offset,
// with no init guard on the hot path. The cleanup object that frees the
// hoard at thread exit is created on the first free only.
struct frame_pool {
    free_block* heads[num_classes];
    std::uint32_t counts[num_classes];
    bool cleanup_armed;
    bool torn_down;  // thread exiting: frees bypass the pool
};
thread_local frame_pool pool{};

struct pool_cleanup {
    ~pool_cleanup() {
        for (auto*& head : pool.heads) {
            while (head) ::operator delete(std::exchange(head, head->next));
        }
        pool.torn_down = true;
    }
};

void arm_cleanup() {
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

void* raw_allocate(std::size_t bytes) {
    std::size_t c = class_of(bytes);
    if (use_pool && c < num_classes && !pool.torn_down) {
        if (free_block* b = pool.heads[c]) {
            pool.heads[c] = b->next;
            --pool.counts[c];
            return b;
        }
        return ::operator new((c + 1) * granule);
    }
    return ::operator new(bytes);
}

void raw_free(void* p, std::size_t bytes) noexcept {
    std::size_t c = class_of(bytes);
    if (use_pool && c < num_classes && !pool.torn_down && pool.counts[c] < max_cached_per_class) {
        if (!pool.cleanup_armed) arm_cleanup();
        pool.heads[c] = new (p) free_block{pool.heads[c]};
        ++pool.counts[c];
        return;
    }
    ::operator delete(p);
}

}  // namespace

void* allocate_frame(std::size_t frame_size, std::size_t result_size, std::size_t result_align) {
    // Alignments are powers of two: round up with a mask (a division here
    // cost more than the rest of the allocation).
    std::size_t result_offset = (sizeof(task_header) + frame_size + result_align - 1) & ~(result_align - 1);
    std::size_t total = result_offset + result_size;
    void* block = raw_allocate(total);
    auto* header = new (block) task_header;
    header->alloc_size = static_cast<std::uint32_t>(total);
    header->result_offset = static_cast<std::uint32_t>(result_offset);
    return header->frame();
}

void free_task_memory(task_header* t) noexcept {
    if (t->result_dtor) t->result_dtor(t->result_slot());
    std::size_t bytes = t->alloc_size;
    t->~task_header();
    raw_free(t, bytes);
}

void deallocate_frame(void* frame) noexcept {
    task_header* t = task_header::of_frame(frame);
    // A spawned task's frame is destroyed when it completes or is cancelled,
    // but the block (header, result slot) lives until its last reference:
    // the join handle reads the outcome there.
    if (t->spawned) return;
    free_task_memory(t);
}

}  // namespace aspen::detail
