// local_queue<T>: the bounded per-worker run queue of the work-stealing
// scheduler.
//
// ============================================================================
// Shape
// ============================================================================
//
// A ring of `capacity` slots (a power of two, 2 .. 2^20) plus ONE atomic
// 64-bit word that packs three ring indices of 21 bits each:
//
//     bits 42..62  steal  oldest slot a thief may still be copying
//     bits 21..41  head   oldest unclaimed slot
//     bits  0..20  tail   one past the newest slot
//
// Indices count modulo 2^21 (they wrap); a slot's position in the ring is
// `index & (capacity - 1)`, which is consistent across the wrap because the
// capacity divides 2^21. Every comparison of indices is a masked
// subtraction, dist(a, b) = (b - a) mod 2^21, never `<` on raw values.
//
// The abstract queue is the sequence of tasks in slots [head, tail), oldest
// at head. Slots [steal, head) hold tasks that a thief has claimed (they are
// no longer in the queue) but may still be reading out of the ring.
//
// Roles:
//   * the OWNER (one worker thread) calls push, pop, pop_oldest, push_oldest
//     and push_overflow; it works at the NEWEST end (tail), so fork-join code
//     runs depth-first (LIFO), except that a yield enters at the oldest end
//     (push_oldest);
//   * THIEVES (other workers) call steal_into, which takes the OLDEST half
//     in one claim;
//   * anyone may call len / is_empty / capacity.
//
// Slots are `std::atomic<T*>` accessed only with relaxed loads/stores: they
// carry no ordering of their own. Every hand-over of slot contents is
// published by a release RMW on the word and acquired by an acquire RMW or
// load of the word (the word is the only synchronisation variable; there are
// no standalone fences anywhere, so ThreadSanitizer models all of it).
// Nobody ever reads a slot speculatively (thieves read only after their claim
// succeeded), so in a correct run no two accesses to a slot are concurrent.
// The TSan build (ASPEN_TSAN) exploits that: there the slots are PLAIN
// pointers, so ThreadSanitizer reports any slot write/read pair that the
// word's release/acquire does not order - i.e. it checks the protocol itself
// (relaxed atomics would hide exactly those races from it).
//
// ============================================================================
// Invariants (I1-I4 hold for every value the word ever takes)
// ============================================================================
//
//   I1  dist(steal, head) + dist(head, tail) == dist(steal, tail)
//       i.e. steal <= head <= tail in ring order.
//   I2  dist(steal, tail) <= capacity.
//       Hence the slots of [steal, tail) are pairwise distinct ring slots.
//   I3  steal != head  iff  exactly one thief is between its claim CAS and
//       its release CAS ("a steal is in progress"). While a steal is in
//       progress only that thief ever changes `steal`.
//   I4  Only the queue's owner writes its slots (a thief writes into the
//       slots of its own dst queue in steal_into, i.e. as dst's owner), and
//       only slots at or beyond `tail` while dist(steal, new tail) stays
//       <= capacity, or (push_oldest) the slot at head - 1 while
//       steal == head and dist(steal, tail) < capacity; by I2 both are
//       outside [steal, tail).
//
// ============================================================================
// Operations and their linearization points
// ============================================================================
//
// Every state change is a compare-and-swap of the whole word, so each
// operation takes effect atomically at its one successful CAS on the word
// (the "linearization point"); a failed CAS changed nothing and the
// operation simply re-reads and re-decides.
//
//   push_batch     owner. push for k = min(n, free room) tasks at once:
//                  write slots tail .. tail+k-1, then CAS tail+k.
//
//   push(t)        owner. If dist(steal, tail) == capacity: full, return
//                  false. Else write slot[tail] = t, then CAS tail+1.
//                  Linearizes at the CAS: before it no other thread can see
//                  the slot (it is outside [head, tail)), after it the task
//                  is in [head, tail). On CAS failure (a thief moved head or
//                  steal) tail is unchanged - only the owner moves tail - so
//                  rewriting the same slot on retry is harmless, and `steal`
//                  only ever moves forward toward tail, so a capacity check
//                  made against an older `steal` is conservative.
//
//   push_oldest(t) owner. If full or a steal is in progress (steal != head):
//                  return false. Else write slot[head-1] = t, then CAS
//                  steal and head both to head-1. Linearizes at the CAS:
//                  the task enters [head, tail) at its oldest end. A thief's
//                  claim computed from the older word fails (head moved).
//
//   pop()          owner. If head == tail: empty. Else CAS tail-1 and return
//                  slot[tail-1]. Linearizes at the CAS. After a successful
//                  CAS head <= new tail, so the slot is outside [steal, head):
//                  no thief claimed it, and no thief can claim it afterwards
//                  (claims only cover [head, tail) as seen by their CAS).
//
//   pop_oldest()   owner (fairness: run the oldest local task). If empty:
//                  nullptr. Else CAS head+1; if no steal is in progress
//                  (steal == head) the same CAS moves steal with it, because
//                  the only reader of that slot is the owner itself, which
//                  reads it right after the CAS and before any later push of
//                  its own could reuse it. If a steal IS in progress, steal is
//                  left alone: the thief's release sets steal := head, which
//                  then also covers the slot the owner took (the owner has
//                  read it long before that matters: it reads it right after
//                  its own CAS, and only the owner ever writes slots). So
//                  pop_oldest returns nullptr only when the queue is empty -
//                  it does not fail because of a concurrent steal.
//
//   steal_into(dst, n)   thief; dst is the thief's OWN queue.
//                  1. Load the word. If steal != head another thief is
//                     copying: fail (nullptr, n = 0). This keeps I3.
//                  2. n = ceil(dist(head, tail) / 2), further bounded by
//                     dst's free space + 1 (n-1 go into dst's ring, the last
//                     one is returned). If n == 0: fail.
//                  3. CAS head += n, steal unchanged (acq_rel). This is the
//                     linearization point of the removal: the n oldest tasks
//                     leave the abstract queue atomically.
//                  4. Copy slots [steal, steal+n-1) into dst's ring beyond
//                     dst's tail (invisible to everybody: not yet in dst's
//                     [head, tail)); read the last one, slot[steal+n-1].
//                  5. Release the claim: CAS loop setting steal := head
//                     (release). A loop, because the owner may change tail
//                     (push/pop) or head (pop_oldest) meanwhile.
//                  6. Publish into dst: CAS dst.tail += n-1 (seq_cst, loop
//                     because thieves of dst may move dst's head/steal).
//                     That is an ordinary push into dst and linearizes there.
//                  Return the newest task of the batch, to be run directly.
//
//   push_overflow(t, inj)  owner, after push(t) returned false.
//                  * If there is room again (a thief freed slots since push
//                    failed), it is an ordinary push; returns 0.
//                  * If a steal is in progress, the queue is about to get
//                    room anyway: inj.push(t); returns 1.
//                  * Otherwise the ring is full and nobody is copying, so
//                    dist(head, tail) == capacity: CAS steal and head both
//                    += capacity/2 (the owner itself is the only reader of
//                    those slots, as in pop_oldest), link those tasks oldest
//                    first followed by t through `queue_next`, and hand the
//                    list to inj.push_batch(first, t, capacity/2 + 1) in ONE
//                    call. Returns capacity/2 + 1.
//
// ============================================================================
// Why no task is ever handed out twice (or lost)
// ============================================================================
//
// Think of the word's modification order as the history of the queue.
// A push CAS puts its task at logical index i (= old tail) into [head, tail).
// From then on i stays in [head, tail) for a contiguous run of word values,
// and the run ends at exactly one CAS: the first one that makes tail <= i
// (the owner's pop, which returns slot i) or head > i (a thief's claim, the
// owner's pop_oldest or push_overflow, each of which then reads slot i). The
// caller of that one CAS is the task's only consumer: every other operation
// that had planned to take i computed its CAS from an older word and fails.
// Index i cannot re-enter [head, tail) except through a new push at tail == i
// or a push_oldest at head - 1 == i, each of which stores a new task. pop
// takes tail-1 only when head < tail, i.e. an index that is still
// unclaimed; a claim takes [head, head+n) with
// head+n <= tail, i.e. only indices the owner has not popped.
//
// ============================================================================
// Why a slot is never overwritten while a thief copies it
// ============================================================================
//
// A thief reads only slots of [steal, head) between its claim and its
// release. The owner writes only slot[tail] and only when dist(steal, tail)
// < capacity, or slot[head-1] only when steal == head (no claim at all) and
// dist(steal, tail) < capacity (I4), so that slot is not in [steal, tail),
// which contains [steal, head).
// The capacity check uses `steal`, NOT `head`: claimed-but-not-yet-copied
// slots still count as occupied until the thief releases them. The release
// (thief's CAS, release order) and the owner's acquire load/CAS of the word
// that first shows the larger `steal` give happens-before from the thief's
// slot reads to the owner's later overwrite, so even at the level of the
// memory model a thief can never read a newer value.
//
// ============================================================================
// Why ABA cannot happen
// ============================================================================
//
// The word contains all of steal, head and tail, so any CAS that succeeds
// sees exactly the indices it computed from. The only way an identical word
// could carry different slot contents is "owner pops then pushes a different
// task into the same slot" (or the indices wrap all the way around). That is
// harmless: a thief reads slots only AFTER its claim CAS succeeded, and from
// then on the slots it reads are in [steal, head) where the owner cannot
// write them; it never acts on slot contents read before its CAS. The owner
// reads slots before a CAS nowhere. So an identical word always describes
// the present state exactly, whatever happened in between.
//
// ============================================================================
// Memory orders (details at each operation)
// ============================================================================
//
//   * push CAS success is seq_cst (not just release): the scheduler's idle
//     protocol is "publish work, then check for sleepers" vs "announce
//     sleeping, then re-check queues", which needs every push that makes work
//     visible to be in the single total order S together with the parker's
//     seq_cst state update and with the parker's seq_cst re-check
//     (len()/is_empty() are seq_cst loads for that reason).
//   * thief claim CAS: acq_rel (acquire the owner's slot writes).
//   * thief release CAS: release (order our slot reads before the owner's
//     reuse of the slots).
//   * owner loads/CAS failure orders: acquire (pick up thief releases before
//     any slot reuse).

#pragma once

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace aspen::detail {

// Where local_queue gets its atomics from. Production uses std::atomic; the
// interleaving test (tests/local_queue_interleaving_test.cpp) substitutes an
// atomic whose every operation is a step of a deterministic scheduler, so it
// can run the real code under chosen interleavings. The default is an alias,
// so it compiles to exactly the code without the parameter.
struct std_atomics {
    template <class U>
    using atomic = std::atomic<U>;
};

// Test-only raw view of a queue (defined by the interleaving test).
template <class Q>
struct local_queue_inspector;

template <class T, class Atomics = std_atomics>
class local_queue {
    // The interleaving test reads the word and the slots between steps.
    template <class Q>
    friend struct local_queue_inspector;

public:
    static constexpr std::uint32_t min_capacity = 2;
    static constexpr std::uint32_t max_capacity = std::uint32_t{1} << 20;

    // `capacity`: power of two in [2, 2^20].
    // `initial_index`: the value all three indices start at (mod 2^21).
    // Production code leaves it 0; tests start near 2^21 to exercise the
    // index wrap-around without pushing two million tasks first.
    explicit local_queue(std::uint32_t capacity, std::uint32_t initial_index = 0)
        : cap_(capacity),
          mask_(capacity - 1),
          slots_(new slot_type[capacity]()),  // value-initialised: all nullptr
          word_(pack(initial_index, initial_index, initial_index)) {
        assert(capacity >= min_capacity && capacity <= max_capacity &&
               (capacity & (capacity - 1)) == 0 && "local_queue capacity must be a power of two in [2, 2^20]");
    }

    local_queue(const local_queue&) = delete;
    local_queue& operator=(const local_queue&) = delete;
    ~local_queue() = default;  // does not own the tasks

    // Owner only. Pushes at the newest end. Returns false (and does nothing)
    // when the ring is full, counting slots a thief is still copying.
    bool push(T* t) noexcept {
        assert(t != nullptr);
        // acquire: synchronise with thieves' release of their claims, so their
        // reads of a slot happen-before we overwrite that slot below.
        std::uint64_t w = word_.load(std::memory_order_acquire);
        for (;;) {
            const fields f = unpack(w);
            if (dist(f.steal, f.tail) == cap_) return false;
            if (try_push_at(w, f, t)) return true;
        }
    }

    // Owner only. Pushes up to n tasks (ts[0] oldest) at the newest end with
    // ONE CAS; returns how many fit (0 when full). Same argument as push:
    // the k slots written are all outside [steal, tail) by the capacity
    // check, and a retry rewrites the same slots.
    std::uint32_t push_batch(T* const* ts, std::uint32_t n) noexcept {
        // acquire: as in push.
        std::uint64_t w = word_.load(std::memory_order_acquire);
        for (;;) {
            const fields f = unpack(w);
            const std::uint32_t room = cap_ - dist(f.steal, f.tail);
            const std::uint32_t k = room < n ? room : n;
            if (k == 0) return 0;
            for (std::uint32_t i = 0; i < k; ++i) {
                assert(ts[i] != nullptr);
                // relaxed: published by the CAS below (as in try_push_at).
                slots_[(f.tail + i) & mask_].store(ts[i], std::memory_order_relaxed);
            }
            // success seq_cst, failure acquire: as in try_push_at.
            if (word_.compare_exchange_weak(w, pack(f.steal, f.head, f.tail + k), std::memory_order_seq_cst,
                                            std::memory_order_acquire))
                return k;
        }
    }

    // Owner only. Pushes at the OLDEST end (behind every queued task: a
    // yield). Returns false (and does nothing) when the ring is full or a
    // thief is copying: [steal, head) is claimed, so there is no free slot
    // just below head. Otherwise steal == head, and the slot at head - 1 is
    // the last free one before steal (I2), outside [steal, tail): nobody
    // reads it. The CAS moves steal and head down together, keeping
    // steal == head (I3: no steal in progress). A thief's claim computed
    // from the older word fails and re-reads. A retry after a failed CAS
    // writes slot new_head - 1, which is free by the same argument; the
    // slot written before is outside [steal, tail) and never read.
    bool push_oldest(T* t) noexcept {
        assert(t != nullptr);
        // acquire: as in push (thieves' releases before our slot write).
        std::uint64_t w = word_.load(std::memory_order_acquire);
        for (;;) {
            const fields f = unpack(w);
            if (dist(f.steal, f.tail) == cap_ || f.steal != f.head) return false;
            const std::uint32_t nh = (f.head - 1) & index_mask;
            if (try_publish(w, nh, t, pack(nh, nh, f.tail))) return true;
        }
    }

    // Owner only. Called when push(t) returned false. Moves the oldest half of
    // the ring plus t to the injector in ONE push_batch call (or just t via
    // push when a steal is in progress, or nothing if room appeared).
    // Returns the number of tasks handed to the injector (0 = t was pushed
    // locally after all). `Inj` needs push(T*) and push_batch(T*, T*, size_t).
    template <class Inj>
    std::uint32_t push_overflow(T* t, Inj& injector) {
        assert(t != nullptr);
        // acquire: as in push (we may write a slot below).
        std::uint64_t w = word_.load(std::memory_order_acquire);
        for (;;) {
            const fields f = unpack(w);
            if (dist(f.steal, f.tail) < cap_) {
                // A thief freed room since push failed: plain push.
                if (try_push_at(w, f, t)) return 0;
                continue;
            }
            if (f.steal != f.head) {
                // A thief is copying out about half the ring right now; do not
                // wait for it, and do not move more tasks than necessary.
                injector.push(t);
                return 1;
            }
            // Full and nobody copying: dist(head, tail) == capacity.
            const std::uint32_t half = cap_ / 2;
            const std::uint32_t first = f.head;
            const std::uint32_t next = (f.head + half) & index_mask;
            // acq_rel: acquire keeps the thieves' releases ordered before our
            // later slot reuse; nothing needs publishing (the injector's lock
            // publishes the tasks). steal moves with head: we are the only
            // reader of the claimed slots and read them right below.
            // failure acquire: as the initial load.
            if (!word_.compare_exchange_weak(w, pack(next, next, f.tail), std::memory_order_acq_rel,
                                             std::memory_order_acquire))
                continue;
            // relaxed: our own earlier writes (only the owner writes slots).
            T* head_task = slots_[first & mask_].load(std::memory_order_relaxed);
            T* prev = head_task;
            for (std::uint32_t i = 1; i < half; ++i) {
                // relaxed: our own earlier writes.
                T* cur = slots_[(first + i) & mask_].load(std::memory_order_relaxed);
                prev->queue_next = cur;
                prev = cur;
            }
            prev->queue_next = t;
            t->queue_next = nullptr;
            injector.push_batch(head_task, t, std::size_t{half} + 1);
            return half + 1;
        }
    }

    // Owner only. The newest task without removing it; nullptr when empty.
    // A thief may claim it right after: pop() then decides (it returns it
    // only if it is still unclaimed). Used by join inlining to check whether
    // a joined child is on top before popping.
    T* peek_newest() const noexcept {
        // acquire: as in pop (the slot is our own write; coherence suffices).
        const fields f = unpack(word_.load(std::memory_order_acquire));
        if (f.head == f.tail) return nullptr;
        // relaxed: our own earlier write; a thief only reads it.
        return slots_[(f.tail - 1) & mask_].load(std::memory_order_relaxed);
    }

    // Owner only. Pops the newest task (LIFO); nullptr when empty.
    T* pop() noexcept {
        // acquire: keeps thieves' releases ordered before anything we do next
        // (strictly only coherence is needed here: the slot is our own write).
        std::uint64_t w = word_.load(std::memory_order_acquire);
        for (;;) {
            const fields f = unpack(w);
            if (f.head == f.tail) return nullptr;
            const std::uint32_t nt = (f.tail - 1) & index_mask;
            // acq_rel: acquire as above; release is not needed (nothing to
            // publish) and free on x86 where every RMW is a full barrier.
            // failure acquire: as the initial load.
            if (word_.compare_exchange_weak(w, pack(f.steal, f.head, nt), std::memory_order_acq_rel,
                                            std::memory_order_acquire))
                // relaxed: our own earlier write; the CAS made the slot ours.
                return slots_[nt & mask_].load(std::memory_order_relaxed);
        }
    }

    // Owner only. Pops the OLDEST task (fairness); nullptr only when empty
    // (a steal in progress does not make it fail).
    T* pop_oldest() noexcept {
        // acquire: as in pop.
        std::uint64_t w = word_.load(std::memory_order_acquire);
        for (;;) {
            const fields f = unpack(w);
            if (f.head == f.tail) return nullptr;
            const std::uint32_t nh = (f.head + 1) & index_mask;
            // No steal in progress: release the slot at once (steal moves with
            // head). Steal in progress: leave steal, the thief's release sets
            // steal := head and so covers our slot too.
            const std::uint32_t ns = (f.steal == f.head) ? nh : f.steal;
            // acq_rel: acquire as in pop; nothing to publish.
            // failure acquire: as the initial load.
            if (word_.compare_exchange_weak(w, pack(ns, nh, f.tail), std::memory_order_acq_rel,
                                            std::memory_order_acquire))
                // relaxed: our own earlier write; only we write slots, and we
                // read it before any later push of ours.
                return slots_[f.head & mask_].load(std::memory_order_relaxed);
        }
    }

    // Thief. `dst` must be the calling worker's own queue (the caller is its
    // owner) and must not be *this. Claims ceil(half) of the unclaimed tasks
    // (bounded by dst's free space + 1), moves all but the newest of them
    // into dst (published with one seq_cst CAS on dst) and returns the newest
    // one, to be run directly. n_taken = number claimed (0 on failure).
    // Fails (nullptr) when the queue is empty or another thief is copying.
    T* steal_into(local_queue& dst, std::uint32_t& n_taken) noexcept {
        assert(&dst != this);
        n_taken = 0;
        // acquire: thieves of dst release the dst slots they copied; we are
        // about to overwrite dst slots (we act as dst's owner here).
        const std::uint64_t dw = dst.word_.load(std::memory_order_acquire);
        const fields d = unpack(dw);
        // Only we (dst's owner) add to dst; its thieves only free room, so
        // this is a lower bound for the whole call.
        const std::uint32_t dst_free = dst.cap_ - dist(d.steal, d.tail);

        // relaxed: only decides what to claim; the claim CAS acquires.
        std::uint64_t w = word_.load(std::memory_order_relaxed);
        fields f;
        std::uint32_t n;
        for (;;) {
            f = unpack(w);
            if (f.steal != f.head) return nullptr;  // another thief is copying
            const std::uint32_t avail = dist(f.head, f.tail);
            n = avail - avail / 2;  // ceil(avail / 2)
            if (n == 0) return nullptr;
            if (n > dst_free + 1) n = dst_free + 1;
            // acq_rel: acquire the owner's slot writes published by its push
            // (release sequence of the word); release keeps our claim ordered
            // for later acquirers. Linearization point of the removal.
            // failure relaxed: we only re-decide from the new value.
            if (word_.compare_exchange_weak(w, pack(f.steal, f.head + n, f.tail), std::memory_order_acq_rel,
                                            std::memory_order_relaxed))
                break;
        }

        // Copy [head, head + n - 1) into dst beyond its tail: those dst slots
        // are outside dst's [steal, tail) (n - 1 <= dst_free), so no thief of
        // dst reads them and nobody else writes them.
        const std::uint32_t first = f.head;
        for (std::uint32_t i = 0; i + 1 < n; ++i) {
            // relaxed: acquired by the claim CAS above.
            T* t = slots_[(first + i) & mask_].load(std::memory_order_relaxed);
            // relaxed: published by the dst CAS below.
            dst.slots_[(d.tail + i) & dst.mask_].store(t, std::memory_order_relaxed);
        }
        // relaxed: acquired by the claim CAS above.
        T* last = slots_[(first + n - 1) & mask_].load(std::memory_order_relaxed);

        // Release the claim: steal := head (head may have moved further by the
        // owner's pop_oldest; those slots are already consumed by it).
        std::uint64_t cur = pack(f.steal, f.head + n, f.tail);
        for (;;) {
            const fields c = unpack(cur);
            assert(c.steal == first && c.steal != c.head);
            // release: our slot reads above happen-before the owner's reuse of
            // those slots (the owner acquires the word before writing a slot).
            // failure relaxed: we only recompute from the new value.
            if (word_.compare_exchange_weak(cur, pack(c.head, c.head, c.tail), std::memory_order_release,
                                            std::memory_order_relaxed))
                break;
        }

        if (n > 1) {
            std::uint64_t dcur = dw;
            for (;;) {
                const fields c = unpack(dcur);
                assert(c.tail == d.tail);  // only we move dst's tail
                // seq_cst: this is a push that makes work visible; the idle
                // protocol's publish-then-check handshake needs it in the single
                // total order with the parker's seq_cst state update. (Also
                // release: publishes the dst slot writes above.)
                // failure relaxed: only thieves of dst moved head/steal; retry.
                if (dst.word_.compare_exchange_weak(dcur, pack(c.steal, c.head, c.tail + n - 1),
                                                    std::memory_order_seq_cst, std::memory_order_relaxed))
                    break;
            }
        }
        n_taken = n;
        return last;
    }

    // Any thread. Unclaimed tasks (tail - head) at one instant; a snapshot.
    std::uint32_t len() const noexcept {
        // seq_cst: a parker's re-check must be in the single total order with
        // pushers' seq_cst CAS (idle protocol).
        const fields f = unpack(word_.load(std::memory_order_seq_cst));
        return dist(f.head, f.tail);
    }

    // Any thread. seq_cst snapshot (usable for the parker's re-check).
    bool is_empty() const noexcept {
        // seq_cst: as in len().
        const fields f = unpack(word_.load(std::memory_order_seq_cst));
        return f.head == f.tail;
    }

    std::uint32_t capacity() const noexcept { return cap_; }

private:
    static constexpr unsigned index_bits = 21;
    static constexpr std::uint32_t index_mask = (std::uint32_t{1} << index_bits) - 1;
    static_assert(max_capacity <= index_mask, "dist(steal, tail) == capacity must be representable");
    static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

    struct fields {
        std::uint32_t steal, head, tail;
    };

    static constexpr std::uint64_t pack(std::uint32_t steal, std::uint32_t head, std::uint32_t tail) noexcept {
        return (std::uint64_t{steal & index_mask} << (2 * index_bits)) |
               (std::uint64_t{head & index_mask} << index_bits) | std::uint64_t{tail & index_mask};
    }
    static constexpr fields unpack(std::uint64_t w) noexcept {
        return {static_cast<std::uint32_t>(w >> (2 * index_bits)) & index_mask,
                static_cast<std::uint32_t>(w >> index_bits) & index_mask,
                static_cast<std::uint32_t>(w) & index_mask};
    }
    // Ring distance from a to b (how far b is ahead of a), mod 2^21.
    static constexpr std::uint32_t dist(std::uint32_t a, std::uint32_t b) noexcept { return (b - a) & index_mask; }

    // One push attempt from the observed word w (fields f, not full). The
    // slot at tail is outside [steal, tail) (capacity check, I2), and steal
    // only advances, so no thief is reading it even if w is stale.
    bool try_push_at(std::uint64_t& w, const fields& f, T* t) noexcept {
        return try_publish(w, f.tail, t, pack(f.steal, f.head, f.tail + 1));
    }

    // Owner: writes t into the slot of ring index `index`, which the caller
    // showed is outside [steal, tail) (I4), then tries to install the word
    // `next` that puts the index into [head, tail). On failure w holds the
    // new value.
    bool try_publish(std::uint64_t& w, std::uint32_t index, T* t, std::uint64_t next) noexcept {
        // relaxed: only the owner writes slots; the CAS below publishes it.
        slots_[index & mask_].store(t, std::memory_order_relaxed);
        // success seq_cst: release publishes the slot write to thieves; and
        // the idle protocol's publish-then-check handshake needs the push to
        // be in the single total order with the parker's seq_cst state update.
        // failure acquire: as push's initial load (thief releases).
        return word_.compare_exchange_weak(w, next, std::memory_order_seq_cst, std::memory_order_acquire);
    }

#if defined(ASPEN_TSAN)
    // Same interface as std::atomic<T*>, but a plain pointer, so that TSan
    // checks every slot access is ordered by the word (see the top comment).
    // Only with the production atomics: stepped slots stay steps.
    struct checked_slot {
        T* value = nullptr;
        T* load(std::memory_order) const noexcept { return value; }
        void store(T* v, std::memory_order) noexcept { value = v; }
    };
    using slot_type = std::conditional_t<std::is_same_v<Atomics, std_atomics>, checked_slot,
                                         typename Atomics::template atomic<T*>>;
#else
    using slot_type = typename Atomics::template atomic<T*>;
#endif

    // Read-mostly fields, on their own cache line (word_ is aligned away).
    const std::uint32_t cap_;
    const std::uint32_t mask_;
    const std::unique_ptr<slot_type[]> slots_;
    // The one synchronisation word, alone on its cache line (the class is
    // 64-aligned so nothing else follows it on that line).
    alignas(64) typename Atomics::template atomic<std::uint64_t> word_;
};

}  // namespace aspen::detail
