// mpsc_sender::reserve / try_reserve and mpsc_permit (Tokio's Permit): a
// permit holds a room (try_send then finds the channel full), its send never
// waits, an unused permit passes its room to the next waiting sender, an
// aborted reserve takes no room, a closed channel gives nullopt and a
// permit's send gives the value back; under load every message arrives
// exactly once and no room is lost. On every runtime kind.
#include <aspen/aspen.hpp>

#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <random>
#include <utility>
#include <vector>

namespace {

using aspen_test::run_on;

#ifdef ASPEN_SANITIZED
constexpr int per_producer = 500;
#else
constexpr int per_producer = 5000;
#endif

class MpscReserve : public ::testing::TestWithParam<int> {};

aspen::task<int> send_one(aspen::mpsc_sender<int> tx, int v) {
    std::optional<int> back = co_await tx.send(v);
    co_return back ? -1 : v;
}

// Two permits fill a channel of 2; a waiting send gets the room of the
// permit dropped unused; the permits' values arrive in send order.
aspen::task<int> permits_body() {
    auto [tx, rx] = aspen::mpsc_channel<int>(2);
    std::optional<aspen::mpsc_permit<int>> a = co_await tx.reserve();
    std::optional<aspen::mpsc_permit<int>> b = tx.try_reserve();
    if (!a || !b) co_return 1;
    if (tx.try_send(9).has_value() == false) co_return 2;  // full: both rooms reserved
    if (tx.try_reserve()) co_return 3;
    aspen::join_handle<int> waiting = aspen::spawn(send_one(tx, 7));
    co_await aspen::yield_now();
    if (waiting.is_finished()) co_return 4;  // no room yet
    if (a->send(1)) co_return 5;
    *b = aspen::mpsc_permit<int>();  // dropped unused: its room goes to the waiting send
    int sent = co_await waiting;
    if (sent != 7) co_return 6;
    std::optional<int> first = co_await rx.recv();
    std::optional<int> second = co_await rx.recv();
    if (!first || !second || *first != 1 || *second != 7) co_return 7;
    try {
        (void)a->send(2);  // used up
        co_return 8;
    } catch (const std::logic_error&) {
    }
    co_return 0;
}

TEST_P(MpscReserve, PermitsHoldRoomsAndAnUnusedOnePassesItOn) {
    EXPECT_EQ(run_on(GetParam(), permits_body(), "mpsc permits"), 0);
}

aspen::task<int> reserve_and_send(aspen::mpsc_sender<int> tx, int v) {
    std::optional<aspen::mpsc_permit<int>> p = co_await tx.reserve();
    if (!p) co_return -1;
    std::optional<int> back = p->send(v);
    co_return back ? -2 : v;
}

// Reservers queue behind a held permit; the first is aborted while it
// waits; the room released then reaches the second, not the aborted one.
aspen::task<int> aborted_reserve_body() {
    auto [tx, rx] = aspen::mpsc_channel<int>(1);
    std::optional<aspen::mpsc_permit<int>> held = tx.try_reserve();
    if (!held) co_return 1;
    aspen::join_handle<int> first = aspen::spawn(reserve_and_send(tx, 1));
    aspen::join_handle<int> second = aspen::spawn(reserve_and_send(tx, 2));
    co_await aspen::yield_now();
    co_await aspen_test::abort_and_join(first);
    held.reset();  // the room goes to `second`
    int sent = co_await second;
    if (sent != 2) co_return 2;
    std::optional<int> got = co_await rx.recv();
    if (!got || *got != 2) co_return 3;
    // The room came back with the receive: nothing is lost.
    co_return tx.try_reserve() ? 0 : 4;
}

TEST_P(MpscReserve, AnAbortedReserveTakesNoRoom) {
    EXPECT_EQ(run_on(GetParam(), aborted_reserve_body(), "aborted reserve"), 0);
}

// Closing: a waiting reserve and a later one give nullopt; a permit taken
// before gives its value back.
aspen::task<int> closed_body() {
    auto [tx, rx] = aspen::mpsc_channel<int>(1);
    std::optional<aspen::mpsc_permit<int>> held = co_await tx.reserve();
    aspen::join_handle<int> waiting = aspen::spawn(reserve_and_send(tx, 5));
    co_await aspen::yield_now();
    rx.close();
    int sent = co_await waiting;
    if (sent != -1) co_return 1;
    std::optional<int> back = held->send(6);
    if (!back || *back != 6) co_return 2;
    std::optional<aspen::mpsc_permit<int>> late = co_await tx.reserve();
    if (late || tx.try_reserve()) co_return 3;
    co_return 0;
}

TEST_P(MpscReserve, AClosedChannelGivesNoPermitAndAPermitGivesTheValueBack) {
    EXPECT_EQ(run_on(GetParam(), closed_body(), "reserve closed"), 0);
}

// Producers send through permits, some reservers aborted at random while
// they wait; the consumer counts every value exactly once, and at the end
// every room of the channel can be reserved again.
aspen::task<void> producer(aspen::mpsc_sender<int> tx, int base) {
    for (int i = 0; i < per_producer; ++i) {
        std::optional<aspen::mpsc_permit<int>> p = co_await tx.reserve();
        if (!p) co_return;
        (void)p->send(base + i);
    }
}

aspen::task<void> stray_reserver(aspen::mpsc_sender<int> tx) {
    std::optional<aspen::mpsc_permit<int>> p = co_await tx.reserve();
    co_await aspen::yield_now();  // holds the room a moment, then drops it unused
}

aspen::task<int> load_body() {
    constexpr int producers = 4, capacity = 8;
    auto [tx, rx] = aspen::mpsc_channel<int>(capacity);
    std::vector<aspen::join_handle<void>> hs;
    for (int p = 0; p < producers; ++p) hs.push_back(aspen::spawn(producer(tx, p * per_producer)));
    std::vector<int> seen(static_cast<std::size_t>(producers * per_producer), 0);
    std::mt19937 rng(7);
    std::vector<aspen::join_handle<void>> strays;
    for (int got = 0; got < producers * per_producer; ++got) {
        if (rng() % 64 == 0) strays.push_back(aspen::spawn(stray_reserver(tx)));
        if (rng() % 128 == 0 && !strays.empty()) strays[rng() % strays.size()].abort();
        std::optional<int> v = co_await rx.recv();
        if (!v) co_return -1;
        ++seen[static_cast<std::size_t>(*v)];
    }
    for (auto& h : hs) co_await h;
    for (auto& s : strays) {
        try {
            co_await s;
        } catch (const aspen::task_cancelled&) {
        }
    }
    for (int n : seen)
        if (n != 1) co_return -2;
    std::vector<aspen::mpsc_permit<int>> all;
    for (int i = 0; i < capacity; ++i) {
        std::optional<aspen::mpsc_permit<int>> p = tx.try_reserve();
        if (!p) co_return -3;  // a room was lost
        all.push_back(std::move(*p));
    }
    co_return tx.try_reserve() ? -4 : 0;
}

TEST_P(MpscReserve, EveryMessageOnceAndNoRoomLostUnderLoad) {
    EXPECT_EQ(run_on(GetParam(), load_body(), "reserve load"), 0);
}

INSTANTIATE_TEST_SUITE_P(Kinds, MpscReserve, aspen_test::runtime_kinds, aspen_test::kind_name);

}  // namespace
