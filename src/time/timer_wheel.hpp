// Hierarchical timing wheel: 6 levels x 64 slots, 1 ms per level-0 slot.
//
// Time is a plain count of milliseconds (a "tick") chosen by the owner; the
// driver counts ms since it started. The wheel is NOT thread-safe: the
// driver holds its mutex around every call.
//
// Levels and slot math
// --------------------
// Level L has 64 slots of 64^L ms each, so it spans 64^(L+1) ms:
//
//     level 0: 64 x 1 ms       = 64 ms
//     level 1: 64 x 64 ms      = ~4 s
//     level 2: 64 x 4.1 s      = ~4.4 min
//     level 3: 64 x 4.4 min    = ~4.7 h
//     level 4: 64 x 4.7 h      = ~12.4 days
//     level 5: 64 x 12.4 days  = ~2.2 years (2^36 ms)
//
// `elapsed_` is the wheel's own time: every entry with deadline <= elapsed_
// has been handed out (or sits on the expired list, see below). An entry with
// deadline d > elapsed_ goes to the level given by the highest bit in which d
// and elapsed_ differ:
//
//     level = msb((elapsed_ ^ d) | 63) / 6,   slot = (d >> 6*level) & 63
//
// So d agrees with elapsed_ on every bit above its level's 6-bit field and is
// strictly greater in that field: its slot lies strictly after the current
// slot of that level ((elapsed_ >> 6*level) & 63) and never wraps around.
// That gives the invariant everything rests on:
//
//     (I) an entry at level L, slot s, has deadline in the slot's range
//         [base_L + s*64^L, base_L + (s+1)*64^L) where base_L is elapsed_
//         rounded down to a multiple of 64^(L+1), and that range lies
//         entirely after elapsed_.
//
// Consequences: every occupied slot of level L starts before every occupied
// slot of level L+1 (level L's ranges end at the next 64^(L+1) boundary,
// where level L+1's begin), so the next slot to process is the first
// occupied slot (a 64-bit occupancy mask per level, count-trailing-zeros) of
// the lowest non-empty level. Deadlines that differ from elapsed_ above bit
// 36 (more than ~2.2 years ahead) go to one extra "overflow" list, treated as
// a single slot starting at the next 2^36 boundary.
//
// Advancing and cascading
// -----------------------
// advance(now) repeatedly takes the earliest occupied slot whose start is
// <= now, moves elapsed_ to that start (which keeps (I) for every other
// entry: no occupied slot start is skipped), and for each entry in it:
// deadline <= now -> hand it to `fire`; otherwise re-insert it relative to
// the new elapsed_, which puts it at a strictly lower level (it now agrees
// with elapsed_ on this level's field too). Each entry therefore moves at
// most 6 times (7 with the overflow list) in its life. Finally elapsed_ =
// now; by then no occupied slot starts at or before now, so (I) holds again.
//
// Why never early
// ---------------
// The only place an entry is handed to `fire` is the explicit comparison
// deadline <= now above (an entry inserted with deadline <= elapsed_ goes to
// the expired list; elapsed_ only ever takes values that were a `now` passed
// to advance, or a slot start below such a now, so it is due as well). Slot
// positions only decide WHEN an entry is looked at, never WHETHER it fires:
// looking too soon just cascades it. next_expiration() returns the start of
// the earliest occupied slot, which is <= the deadline of everything in it,
// so a driver that sleeps until next_expiration() is never late either; for
// level 0 (the last stop of every entry) the slot start IS the deadline.
//
// Entries are intrusive (the owner embeds a timer_entry): insert and remove
// are O(1) list operations and the wheel never allocates.
#pragma once

#include <aspen/detail/timer_entry.hpp>
#include <aspen/waker.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace aspen::detail {

class timer_wheel {
public:
    static constexpr unsigned levels = 6;
    static constexpr unsigned slot_bits = 6;
    static constexpr unsigned slots = 1u << slot_bits;
    // Deadlines at least this far apart from elapsed_ (in the high bits) live
    // on the overflow list.
    static constexpr unsigned horizon_bits = levels * slot_bits;  // 36

    explicit timer_wheel(std::uint64_t start_tick = 0) noexcept;
    timer_wheel(const timer_wheel&) = delete;
    timer_wheel& operator=(const timer_wheel&) = delete;

    // Links `e` (which must not be linked) to expire at `deadline`. A deadline
    // <= elapsed() is already due: it fires on the next advance (any now).
    void insert(timer_entry& e, std::uint64_t deadline) noexcept;
    // Unlinks `e`; a no-op if it is not linked (fired, or never inserted).
    void remove(timer_entry& e) noexcept;

    // The earliest tick at which advance() could fire something: the start of
    // the earliest occupied slot (<= every deadline in it), elapsed() when
    // something is already due, nullopt when the wheel is empty. Advancing to
    // an earlier tick fires nothing; it may be earlier than the first
    // deadline (then advancing to it only cascades).
    std::optional<std::uint64_t> next_expiration() const noexcept;

    // Fires (calls fire(timer_entry&) on, after unlinking) every entry whose
    // deadline <= now, and moves elapsed() to now. `fire` may insert and
    // remove other entries. A `now` below elapsed() fires only what is due.
    template <class F>
    void advance(std::uint64_t now, F&& fire) {
        while (timer_entry* e = pop_expired(now)) fire(*e);
    }
    // One step of advance: the next entry with deadline <= now, unlinked, or
    // nullptr (then elapsed() == max(elapsed(), now)).
    timer_entry* pop_expired(std::uint64_t now) noexcept;

    std::uint64_t elapsed() const noexcept { return elapsed_; }
    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }

private:
    static constexpr unsigned overflow_list = levels * slots;
    static constexpr unsigned expired_list = overflow_list + 1;
    static constexpr unsigned list_count = expired_list + 1;

    struct slot_ref {
        std::uint64_t start;
        unsigned list;
    };
    std::optional<slot_ref> next_slot() const noexcept;
    void place(timer_entry& e) noexcept;  // by deadline relative to elapsed_
    void link(timer_entry& e, unsigned list) noexcept;
    void unlink(timer_entry& e) noexcept;

    timer_entry* heads_[list_count] = {};
    std::uint64_t occupied_[levels] = {};  // bit s: slot s of that level is non-empty
    std::uint64_t elapsed_;
    std::size_t size_ = 0;
};

}  // namespace aspen::detail
