// Timing wheel implementation; the design, the invariant (I) and the
// never-early argument are at the top of timer_wheel.hpp.
#include "time/timer_wheel.hpp"

#include <bit>
#include <cassert>

namespace aspen::detail {

namespace {

constexpr unsigned slot_bits = timer_wheel::slot_bits;
constexpr std::uint64_t slot_mask = timer_wheel::slots - 1;

// The level an entry due at `when` belongs to, seen from `elapsed`
// (when > elapsed): the 6-bit field holding their highest differing bit.
// Values >= levels mean "beyond the wheel" (overflow list).
unsigned level_for(std::uint64_t elapsed, std::uint64_t when) noexcept {
    // | slot_mask: deadlines within the current level-0 range are level 0.
    std::uint64_t masked = (elapsed ^ when) | slot_mask;
    unsigned significant = 63u - static_cast<unsigned>(std::countl_zero(masked));
    return significant / slot_bits;
}

}  // namespace

timer_wheel::timer_wheel(std::uint64_t start_tick) noexcept : elapsed_(start_tick) {}

void timer_wheel::link(timer_entry& e, unsigned list) noexcept {
    assert(!e.is_linked());
    e.list_ = static_cast<std::uint16_t>(list);
    e.prev_ = nullptr;
    e.next_ = heads_[list];
    if (e.next_) e.next_->prev_ = &e;
    heads_[list] = &e;
    if (list < overflow_list) occupied_[list / slots] |= std::uint64_t{1} << (list % slots);
    ++size_;
}

void timer_wheel::unlink(timer_entry& e) noexcept {
    unsigned list = e.list_;
    if (e.prev_)
        e.prev_->next_ = e.next_;
    else
        heads_[list] = e.next_;
    if (e.next_) e.next_->prev_ = e.prev_;
    e.prev_ = e.next_ = nullptr;
    e.list_ = timer_entry::unlinked;
    if (list < overflow_list && !heads_[list]) occupied_[list / slots] &= ~(std::uint64_t{1} << (list % slots));
    --size_;
}

void timer_wheel::place(timer_entry& e) noexcept {
    assert(e.deadline_ > elapsed_);
    unsigned level = level_for(elapsed_, e.deadline_);
    if (level >= levels) {
        link(e, overflow_list);
        return;
    }
    unsigned slot = static_cast<unsigned>((e.deadline_ >> (level * slot_bits)) & slot_mask);
    link(e, level * slots + slot);
}

void timer_wheel::insert(timer_entry& e, std::uint64_t deadline) noexcept {
    e.deadline_ = deadline;
    if (deadline <= elapsed_)
        link(e, expired_list);  // already due: handed out by the next advance
    else
        place(e);
}

void timer_wheel::remove(timer_entry& e) noexcept {
    if (e.is_linked()) unlink(e);
}

std::optional<timer_wheel::slot_ref> timer_wheel::next_slot() const noexcept {
    // By (I) every occupied slot of a lower level starts before every
    // occupied slot of a higher one: the first non-empty level decides.
    for (unsigned level = 0; level < levels; ++level) {
        std::uint64_t occ = occupied_[level];
        if (occ == 0) continue;
        unsigned shift = level * slot_bits;
        unsigned current = static_cast<unsigned>((elapsed_ >> shift) & slot_mask);
        // (I): no occupied slot lies before the current one (no wrap-around).
        std::uint64_t ahead = occ & (~std::uint64_t{0} << current);
        assert(ahead == occ);
        if (ahead == 0) ahead = occ;  // unreachable by (I); stay defined in release
        unsigned slot = static_cast<unsigned>(std::countr_zero(ahead));
        std::uint64_t span = std::uint64_t{1} << (shift + slot_bits);
        std::uint64_t start = (elapsed_ & ~(span - 1)) + (std::uint64_t{slot} << shift);
        // (I) makes start > elapsed_; the max keeps time monotonic regardless.
        if (start < elapsed_) start = elapsed_;
        return slot_ref{start, level * slots + slot};
    }
    if (heads_[overflow_list]) {
        // Everything there differs from elapsed_ above bit 36: due no sooner
        // than the next 2^36 boundary, where it is looked at (and cascaded).
        std::uint64_t start = ((elapsed_ >> horizon_bits) + 1) << horizon_bits;
        return slot_ref{start, overflow_list};
    }
    return std::nullopt;
}

std::optional<std::uint64_t> timer_wheel::next_expiration() const noexcept {
    if (heads_[expired_list]) return elapsed_;
    if (auto s = next_slot()) return s->start;
    return std::nullopt;
}

timer_entry* timer_wheel::pop_expired(std::uint64_t now) noexcept {
    for (;;) {
        if (timer_entry* e = heads_[expired_list]) {
            unlink(*e);
            return e;
        }
        std::optional<slot_ref> next = next_slot();
        if (!next || next->start > now) {
            if (now > elapsed_) elapsed_ = now;  // no occupied slot starts <= now: (I) holds
            return nullptr;
        }
        // Move time to the slot's start (no occupied slot is skipped, so (I)
        // still holds for everything else), then empty the slot: due entries
        // go to the expired list, the rest cascade to a lower level.
        // The overflow list is only reached when every level is empty, so
        // time may jump straight to `now` (nothing else can be skipped); this
        // keeps a jump of many 2^36 spans at one pass over the list.
        elapsed_ = next->list == overflow_list ? now : next->start;
        timer_entry* e = heads_[next->list];
        while (e) {
            timer_entry* following = e->next_;
            unlink(*e);
            if (e->deadline_ <= now)
                link(*e, expired_list);
            else
                place(*e);  // deadline > now >= elapsed_: strictly lower level
            e = following;
        }
    }
}

}  // namespace aspen::detail
