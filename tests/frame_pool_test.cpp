// The frame pool (include/aspen/detail/frame_pool.hpp): blocks are reused
// on the thread that freed them, a thread keeps at most 512 of a size class,
// a full list goes to the process-wide depot (up to depot_lists_of(class)
// lists) where a thread whose list ran dry takes it, and a thread's own list
// goes back to the system when the thread exits. This binary replaces the
// global operator new/delete to count the blocks the system allocator has
// handed out; each test does its allocations on threads of its own while
// the main thread waits in join(), so nothing else allocates in between,
// and uses a frame size of its own, so that it starts with an empty depot
// class. In the ASan build (ASPEN_NO_FRAME_POOL) every free goes to the
// system at once, and the tests check that instead. The TSan build skips
// them: TSan's runtime defines the global operator new itself, so it
// cannot be replaced there.
#include <aspen/detail/frame_pool.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <set>
#include <thread>
#include <vector>

namespace {
// relaxed: read only after join(), which orders every counted call.
std::atomic<long> live_blocks{0};
// The aligned form, which the pool's chunks come from.
std::atomic<long> live_chunks{0};
}  // namespace

#ifndef ASPEN_TSAN
// g++ sees a replaced operator delete's free, inlined where this file's
// operator new made the block, as a mismatch: here both are one pair.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
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
void* operator new(std::size_t size, std::align_val_t al) {
    auto a = static_cast<std::size_t>(al);
    void* p = std::aligned_alloc(a, (size + a - 1) / a * a);
    if (!p) throw std::bad_alloc();
    live_chunks.fetch_add(1, std::memory_order_relaxed);
    return p;
}
void operator delete(void* p, std::align_val_t) noexcept {
    if (!p) return;
    live_chunks.fetch_sub(1, std::memory_order_relaxed);
    std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t al) noexcept { operator delete(p, al); }
#endif

namespace {

using aspen::detail::allocate_frame;
using aspen::detail::block_size_of;
using aspen::detail::deallocate_frame;
using aspen::detail::pool::max_cached_per_class;

constexpr bool pool_enabled = aspen::detail::pool::enabled;
constexpr long cap = static_cast<long>(max_cached_per_class);

// A frame size of its own per test (no other code in this binary allocates
// blocks of these classes), and how many blocks the depot keeps of it.
struct frame_class {
    std::size_t frame_size;
    std::size_t block_size() const { return block_size_of(frame_size, 0, 1); }
    long depot_lists() const {
        using namespace aspen::detail::pool;
        return pool_enabled ? static_cast<long>(depot_lists_of(class_of(block_size()))) : 0;
    }
    long depot_blocks() const { return depot_lists() * cap; }
    // How many of its blocks a chunk holds: each takes whole 64-byte
    // lines, after the chunk's own line.
    long blocks_per_chunk() const {
        using namespace aspen::detail::pool;
        const std::size_t stride = ((class_of(block_size()) + 1) * granule + 63) / 64 * 64;
        return static_cast<long>((chunk_bytes - 64) / stride);
    }
    std::vector<void*> allocate(std::size_t n) const {
        std::vector<void*> frames;
        frames.reserve(n);
        for (std::size_t i = 0; i < n; ++i) frames.push_back(allocate_frame(frame_size, 0, 1));
        return frames;
    }
    void free_all(const std::vector<void*>& frames) const {
        for (void* f : frames) deallocate_frame(f, block_size());
    }
};

// Blocks the system handed out: operator new's (larger frames, vectors)
// and the pool's blocks out of their chunks, which the pool counts
// (blocks_from_system): operator new sees only the chunks, through its
// aligned form (live_chunks).
long live() {
    return live_blocks.load(std::memory_order_relaxed) + static_cast<long>(aspen::detail::pool::blocks_from_system());
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

TEST(FramePool, AThreadKeepsOneListTheDepotTheNextOnesAndItsChunksTheRest) {
    SKIP_WITHOUT_COUNTING();
    const frame_class fc{1000};
    const long lists = fc.depot_lists();
    ASSERT_GE(lists, pool_enabled ? 1 : 0);
    const long tail = 88;
    const long n = cap * (lists + 1) + tail;
    long before = live();
    long while_alive = 0, after_reuse = 0;
    bool reused_last_freed_first = false;
    on_new_thread([&] {
        std::vector<void*> frames = fc.allocate(static_cast<std::size_t>(n));
        long base = live();
        fc.free_all(frames);
        while_alive = live() - base;
        // The thread's list is LIFO: the next block is the last one it
        // freed. (Its full list went back to its chunks when the depot was
        // full, and the last `tail` frees began a new one.)
        void* again = allocate_frame(fc.frame_size, 0, 1);
        reused_last_freed_first = again == frames[static_cast<std::size_t>(n) - 1];
        // The rest of the thread's list, then the depot's lists, then the
        // rest from chunks.
        base = live();
        std::vector<void*> more = fc.allocate(static_cast<std::size_t>(cap * (lists + 1) + 4));
        after_reuse = live() - base;
        deallocate_frame(again, fc.block_size());
        fc.free_all(more);
    });
    // The pool kept the depot's lists and the last `tail` of the n frees,
    // and gave the rest back to their chunks.
    EXPECT_EQ(while_alive, -n + (pool_enabled ? fc.depot_blocks() + tail : 0));
    // Taking more again took from the chunks only what the list and the
    // depot did not have (the vector `more` is one block more); without a
    // pool, every one.
    const long wanted = cap * (lists + 1) + 4;
    EXPECT_EQ(after_reuse, 1 + (pool_enabled ? wanted - (tail - 1) - fc.depot_blocks() : wanted));
    if (pool_enabled) {
        EXPECT_TRUE(reused_last_freed_first);
    }
    // The thread's exit gave its own list back; the depot keeps its lists
    // (filled again by the second round of frees).
    EXPECT_EQ(live() - before, fc.depot_blocks());
}

TEST(FramePool, BlocksFreedOnAnotherThreadReachTheAllocatingThreadThroughTheDepot) {
    SKIP_WITHOUT_COUNTING();
    const frame_class fc{1200};
    const long lists = fc.depot_lists();
    const long n = cap * (lists + 1) + 10;
    long before = live();
    std::vector<void*> frames;
    on_new_thread([&] { frames = fc.allocate(static_cast<std::size_t>(n)); });
    long after_allocating = live();
    long kept_by_freeing_thread = 0;
    on_new_thread([&] {
        long base = live();
        fc.free_all(frames);
        kept_by_freeing_thread = live() - base + n;
    });
    // The vector of frame addresses is one more block.
    EXPECT_EQ(after_allocating - before, n + 1);
    // The depot's lists and the 10 frees after its full list went back to
    // its chunks.
    EXPECT_EQ(kept_by_freeing_thread, pool_enabled ? fc.depot_blocks() + 10 : 0);
    // The freeing thread's exit gave its own list back, not the depot's.
    EXPECT_EQ(live() - before, 1 + fc.depot_blocks());

    // A producer whose list is empty takes the consumer's freed blocks from
    // the depot before it asks the system for any.
    long from_system = 0, of_the_freed = 0;
    std::set<void*> freed(frames.begin(), frames.end());
    on_new_thread([&] {
        long base = live();
        std::vector<void*> again = fc.allocate(static_cast<std::size_t>(fc.depot_blocks() + 3));
        from_system = live() - base - 1;  // without the vector
        // The depot's blocks come first. (The 3 after them come from the
        // free blocks of a chunk, or a new one: they may lie where freed
        // ones did either way.)
        for (long i = 0; i < fc.depot_blocks(); ++i) of_the_freed += freed.count(again[static_cast<std::size_t>(i)]) ? 1 : 0;
        fc.free_all(again);
    });
    // A chunk's free blocks become the thread's list all at once, so from
    // 3 up to 3 less one plus a chunk's blocks left their chunks.
    if (pool_enabled) {
        EXPECT_GE(from_system, 3);
        EXPECT_LT(from_system, 3 + fc.blocks_per_chunk());
    } else {
        EXPECT_EQ(from_system, 3 + fc.depot_blocks());
    }
    EXPECT_EQ(of_the_freed, pool_enabled ? fc.depot_blocks() : of_the_freed);
    frames = std::vector<void*>();  // frees the vector's own block
    freed.clear();
    EXPECT_EQ(live() - before, fc.depot_blocks());
}

// A frame larger than the pooled classes (over 2 KiB) comes from the system
// and goes back to it at once, also on a thread whose pool is armed and
// holds blocks: the pool keeps none of them, and they never take a pooled
// block of a smaller class.
TEST(FramePool, FramesOverTheLargestClassGoStraightToTheSystem) {
    SKIP_WITHOUT_COUNTING();
    const frame_class small{1800};
    const frame_class large{5000};
    ASSERT_LT(aspen::detail::pool::class_of(small.block_size()), aspen::detail::pool::num_classes);
    ASSERT_GE(aspen::detail::pool::class_of(large.block_size()), aspen::detail::pool::num_classes);
    long before = live();
    long while_alive = -1, after_free = -1;
    on_new_thread([&] {
        std::vector<void*> kept = small.allocate(3);
        small.free_all(kept);  // arms the thread's pool, which keeps the 3
        long base = live();
        std::vector<void*> frames = large.allocate(40);
        while_alive = live() - base - 1;  // without the vector
        large.free_all(frames);
        after_free = live() - base - 1;
    });
    EXPECT_EQ(while_alive, 40);
    EXPECT_EQ(after_free, 0);
    EXPECT_EQ(live(), before);  // the thread's exit gave its 3 small blocks back
}

// A thread_local destructor that runs after the pool's own exit cleanup
// still allocates and frees frames: those must come from and go to the
// system. Taking a list from the depot then would leak it (nothing frees
// the thread's lists any more), and giving it one would hand over blocks
// the cleanup has freed.
TEST(FramePool, AThreadPastItsExitCleanupNeitherTakesFromNorGivesToTheDepot) {
    SKIP_WITHOUT_COUNTING();
    const frame_class fc{1400};
    const frame_class other{1500};
    const frame_class empty{1600};
    long before = live();
    on_new_thread([&] {  // fills the depot's lists of the class
        std::vector<void*> frames = fc.allocate(static_cast<std::size_t>(cap * (fc.depot_lists() + 1)));
        fc.free_all(frames);
    });
    EXPECT_EQ(live() - before, fc.depot_blocks());
    long late_from_system = -1, late_after_free = -1;
    on_new_thread([&] {
        struct late {
            const frame_class& fc;
            const frame_class& empty;
            long& from_system;
            long& after_free;
            ~late() {
                long base = live();
                // The class whose depot lists are full, and one whose depot
                // is empty (a free must not give the dead list to it).
                std::vector<void*> f = fc.allocate(static_cast<std::size_t>(cap + 4));
                std::vector<void*> e = empty.allocate(3);
                from_system = live() - base - 2;  // without the vectors
                fc.free_all(f);
                empty.free_all(e);
                after_free = live() - base - 2;
            }
        };
        // Constructed before the pool's cleanup object, which the first
        // pooled free below creates, so destroyed after it.
        thread_local late l{fc, empty, late_from_system, late_after_free};
        (void)l;
        void* f = allocate_frame(other.frame_size, 0, 1);
        deallocate_frame(f, other.block_size());
    });
    EXPECT_EQ(late_from_system, cap + 4 + 3);
    EXPECT_EQ(late_after_free, 0);
    EXPECT_EQ(live() - before, fc.depot_blocks());
}

// A chunk goes back to the system with its last block, and not before: of
// a thread that carved many chunks and freed every block, the chunks left
// are those holding the depot's blocks (the thread's first frees: its first
// full list went there).
TEST(FramePool, AChunkGoesBackToTheSystemWithItsLastBlock) {
    SKIP_WITHOUT_COUNTING();
    const frame_class fc{1900};
    const long n = cap * (fc.depot_lists() + 1) + 300;
    const long chunks_before = live_chunks.load(std::memory_order_relaxed);
    long chunks_while_alive = 0;
    std::set<std::uintptr_t> depot_chunks;
    on_new_thread([&] {
        std::vector<void*> frames = fc.allocate(static_cast<std::size_t>(n));
        chunks_while_alive = live_chunks.load(std::memory_order_relaxed) - chunks_before;
        for (long i = 0; i < fc.depot_blocks(); ++i)
            depot_chunks.insert(reinterpret_cast<std::uintptr_t>(frames[static_cast<std::size_t>(i)]) &
                                ~(aspen::detail::pool::chunk_bytes - 1));
        fc.free_all(frames);
    });
    const long chunks_after = live_chunks.load(std::memory_order_relaxed) - chunks_before;
    if (pool_enabled) {
        // A chunk holds far fewer than n blocks of this class.
        EXPECT_GT(chunks_while_alive, static_cast<long>(depot_chunks.size()) + 1);
        EXPECT_EQ(chunks_after, static_cast<long>(depot_chunks.size()));
    } else {
        EXPECT_EQ(chunks_while_alive, 0);
        EXPECT_EQ(chunks_after, 0);
    }
}

// A block given back to a chunk that other blocks still hold serves the
// next allocation of its class before any new chunk is carved: of a burst
// in which one block a chunk lives on, the memory of the others is used
// again by the next burst. (When chunks were shared by every class, such a
// block waited until all of its chunk was back, and this test's second
// round carved about as many chunks again.)
TEST(FramePool, BlocksGivenBackToAHeldChunkAreUsedAgain) {
    SKIP_WITHOUT_COUNTING();
    const frame_class fc{1500};
    const long n = cap * (fc.depot_lists() + 1) + 20 * fc.blocks_per_chunk();
    long new_chunks = -1, reused = 0, freed_count = 0;
    on_new_thread([&] {
        std::vector<void*> frames = fc.allocate(static_cast<std::size_t>(n));
        // The first block of each chunk lives on; the rest are freed.
        std::set<std::uintptr_t> chunks;
        std::vector<void*> kept, freed;
        for (void* f : frames) {
            auto chunk = reinterpret_cast<std::uintptr_t>(f) & ~(aspen::detail::pool::chunk_bytes - 1);
            (chunks.insert(chunk).second ? kept : freed).push_back(f);
        }
        fc.free_all(freed);
        freed_count = static_cast<long>(freed.size());
        const long chunks_before = live_chunks.load(std::memory_order_relaxed);
        std::vector<void*> again = fc.allocate(freed.size());
        new_chunks = live_chunks.load(std::memory_order_relaxed) - chunks_before;
        std::set<void*> was_freed(freed.begin(), freed.end());
        for (void* f : again) reused += static_cast<long>(was_freed.count(f));
        fc.free_all(again);
        fc.free_all(kept);
    });
    // Every freed block is on the thread's list, in the depot or free in a
    // held chunk: the second round takes exactly those. Without a pool
    // there are no chunks.
    EXPECT_EQ(new_chunks, 0);
    if (pool_enabled) {
        EXPECT_GT(freed_count, 20 * fc.blocks_per_chunk() / 2);
        EXPECT_EQ(reused, freed_count);
    }
}

// Threads that allocate and threads that free the same class at once, so
// that full lists go into the depot and empty ones take them out while
// others do the same: no block is handed out twice (each holder stamps its
// blocks and checks the stamps before it passes them on; ThreadSanitizer
// sees two holders of one block as a race). Runs in every build.
TEST(FramePool, ConcurrentProducersAndConsumersNeverShareABlock) {
    const frame_class fc{1700};
    constexpr int threads = 4;
    constexpr int rounds = 40;
    const std::size_t batch = static_cast<std::size_t>(cap) * 3;
    std::mutex m;
    std::vector<std::vector<void*>> handed;  // batches waiting for a freeing thread
    std::atomic<long> bad_stamps{0}, duplicates{0};
    auto work = [&](int id) {
        for (int r = 0; r < rounds; ++r) {
            std::vector<void*> mine = fc.allocate(batch);
            std::set<void*> distinct(mine.begin(), mine.end());
            if (distinct.size() != mine.size()) duplicates.fetch_add(1, std::memory_order_relaxed);
            const std::uintptr_t stamp = static_cast<std::uintptr_t>(id) << 16 | static_cast<std::uintptr_t>(r);
            for (void* f : mine) *static_cast<std::uintptr_t*>(f) = stamp;
            for (void* f : mine)
                if (*static_cast<std::uintptr_t*>(f) != stamp) bad_stamps.fetch_add(1, std::memory_order_relaxed);
            std::vector<void*> theirs;
            {
                std::lock_guard lock(m);
                handed.push_back(std::move(mine));
                if (handed.size() > 1) {  // someone else's batch, most often
                    theirs = std::move(handed.front());
                    handed.erase(handed.begin());
                }
            }
            fc.free_all(theirs);
        }
    };
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; ++i) ts.emplace_back(work, i);
    for (auto& t : ts) t.join();
    for (auto& b : handed) fc.free_all(b);
    EXPECT_EQ(duplicates.load(), 0);
    EXPECT_EQ(bad_stamps.load(), 0);
}

}  // namespace
