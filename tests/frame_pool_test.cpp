// The frame pool (include/aspen/detail/frame_pool.hpp): blocks are reused
// on the thread that freed them, a thread keeps at most 512 of a size class,
// and a thread's hoard goes back to the system when the thread exits. This
// binary replaces the global operator new/delete to count the blocks the
// system allocator has handed out; each test does its allocations on
// threads of its own while the main thread waits in join(), so nothing
// else allocates in between. In the ASan build (ASPEN_NO_FRAME_POOL) every
// free goes to the system at once, and the tests check that instead. The
// TSan build skips them: TSan's runtime defines the global operator new
// itself, so it cannot be replaced there.
#include <aspen/detail/frame_pool.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <thread>
#include <vector>

namespace {
// relaxed: read only after join(), which orders every counted call.
std::atomic<long> live_blocks{0};
}  // namespace

#ifndef ASPEN_TSAN
void* operator new(std::size_t size) {
    void* p = std::malloc(size == 0 ? 1 : size);
    if (!p) throw std::bad_alloc();
    live_blocks.fetch_add(1, std::memory_order_relaxed);
    return p;
}
void operator delete(void* p) noexcept {
    if (!p) return;
    live_blocks.fetch_sub(1, std::memory_order_relaxed);
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
#endif

namespace {

using aspen::detail::allocate_frame;
using aspen::detail::block_size_of;
using aspen::detail::deallocate_frame;
using aspen::detail::pool::max_cached_per_class;

// A frame size no other code in this binary allocates blocks of.
constexpr std::size_t frame_size = 1000;
constexpr std::size_t block_size = block_size_of(frame_size, 0, 1);
constexpr long cap = static_cast<long>(max_cached_per_class);
constexpr long pooled = aspen::detail::pool::enabled ? cap : 0;

std::vector<void*> allocate(std::size_t n) {
    std::vector<void*> frames;
    frames.reserve(n);
    for (std::size_t i = 0; i < n; ++i) frames.push_back(allocate_frame(frame_size, 0, 1));
    return frames;
}

void free_all(const std::vector<void*>& frames) {
    for (void* f : frames) deallocate_frame(f, block_size);
}

template <class F>
void on_new_thread(F f) {
    std::thread(f).join();
}

#ifdef ASPEN_TSAN
#define SKIP_WITHOUT_COUNTING() GTEST_SKIP() << "TSan's runtime owns operator new; the release and ASan builds run this"
#else
#define SKIP_WITHOUT_COUNTING() (void)0
#endif

TEST(FramePool, KeepsAtMostItsCapAndReusesWhatItKeeps) {
    SKIP_WITHOUT_COUNTING();
    long before = live_blocks.load(std::memory_order_relaxed);
    long while_alive = 0, after_reuse = 0;
    bool reused_last_freed_first = false;
    on_new_thread([&] {
        std::vector<void*> frames = allocate(cap + 88);
        long base = live_blocks.load(std::memory_order_relaxed);
        free_all(frames);
        while_alive = live_blocks.load(std::memory_order_relaxed) - base;
        // The pool is LIFO: the next block of the class is the last one it kept.
        void* again = allocate_frame(frame_size, 0, 1);
        reused_last_freed_first = again == frames[static_cast<std::size_t>(cap) - 1];
        std::vector<void*> more = allocate(static_cast<std::size_t>(cap) - 1);
        after_reuse = live_blocks.load(std::memory_order_relaxed) - base;
        deallocate_frame(again, block_size);
        free_all(more);
    });
    // cap + 88 frames were freed: the pool kept `pooled` of them and gave
    // the rest back. Taking `cap` blocks again costs the system nothing new
    // when they come from the pool (the vector `more` is one allocation).
    EXPECT_EQ(while_alive, -(cap + 88) + pooled);
    EXPECT_EQ(after_reuse, -(cap + 88) + pooled + (cap - pooled) + 1);
    if (aspen::detail::pool::enabled) {
        EXPECT_TRUE(reused_last_freed_first);
    }
    // The thread's exit gave its hoard back.
    EXPECT_EQ(live_blocks.load(std::memory_order_relaxed), before);
}

TEST(FramePool, ABlockFreedOnAnotherThreadStaysThereAndGoesWithIt) {
    SKIP_WITHOUT_COUNTING();
    long before = live_blocks.load(std::memory_order_relaxed);
    std::vector<void*> frames;
    on_new_thread([&] { frames = allocate(cap + 10); });
    long after_allocating = live_blocks.load(std::memory_order_relaxed);
    long kept_by_freeing_thread = 0;
    on_new_thread([&] {
        long base = live_blocks.load(std::memory_order_relaxed);
        free_all(frames);
        kept_by_freeing_thread = live_blocks.load(std::memory_order_relaxed) - base + (cap + 10);
    });
    // The vector of frame addresses is one more block.
    EXPECT_EQ(after_allocating - before, cap + 10 + 1);
    EXPECT_EQ(kept_by_freeing_thread, pooled);
    frames = std::vector<void*>();  // frees the vector's own block
    EXPECT_EQ(live_blocks.load(std::memory_order_relaxed), before);
}

}  // namespace
