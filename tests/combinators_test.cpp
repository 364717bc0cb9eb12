// when_all, when_any and select: results and their order, exceptions,
// concurrency of the operands, no operand outliving the call (also when
// the caller is aborted), and cancel safety: permits, notifications and
// messages conserved when an operation loses, counted exactly.
#include <aspen/aspen.hpp>

#include "runtime_kinds.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <random>
#include <semaphore>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

namespace {

using aspen_test::alive_token;
using aspen_test::run_on;

#ifdef ASPEN_SANITIZED
constexpr int stress_rounds = 300;
constexpr int messages_per_producer = 2000;
#else
constexpr int stress_rounds = 3000;
constexpr int messages_per_producer = 20000;
#endif

class Combinators : public ::testing::TestWithParam<int> {};

aspen::task<int> value(int v) { co_return v; }
aspen::task<std::string> text(std::string s) { co_return s; }
aspen::task<void> nothing() { co_return; }
aspen::task<int> fail_with(std::string what) {
    co_await aspen::yield_now();
    throw std::runtime_error(what);
}

// Waits until the event is set: finishes only if something else sets it,
// i.e. only if the operands really run concurrently.
aspen::task<int> wait_then(aspen::event* e, int v, std::atomic<int>* alive) {
    alive_token a(alive);
    co_await e->wait();
    co_return v;
}
aspen::task<int> set_then(aspen::event* e, int v, std::atomic<int>* alive) {
    alive_token a(alive);
    co_await aspen::yield_now();
    e->set();
    co_return v;
}

aspen::task<int> when_all_tuple_body() {
    aspen::event e;
    std::atomic<int> alive{0};
    auto [a, b, s, m] = co_await aspen::when_all(wait_then(&e, 1, &alive), set_then(&e, 2, &alive),
                                                 text("three"), nothing());
    static_assert(std::is_same_v<decltype(m), std::monostate>);
    co_return (a == 1 && b == 2 && s == "three" && alive.load() == 0) ? 1 : 0;
}

TEST_P(Combinators, WhenAllTupleRunsOperandsConcurrentlyAndKeepsOrder) {
    EXPECT_EQ(run_on(GetParam(), when_all_tuple_body(), "when_all tuple"), 1);
}

aspen::task<long> when_all_vector_body(int n) {
    std::vector<aspen::task<int>> ts;
    for (int i = 0; i < n; ++i) ts.push_back(value(i));
    std::vector<int> vs = co_await aspen::when_all(std::move(ts));
    long sum = 0;
    for (int i = 0; i < n; ++i)
        if (vs[static_cast<std::size_t>(i)] == i) sum += i;
    std::vector<aspen::task<void>> none;
    co_await aspen::when_all(std::move(none));
    std::vector<int> empty = co_await aspen::when_all(std::vector<aspen::task<int>>{});
    co_return empty.empty() ? sum : -1;
}

TEST_P(Combinators, WhenAllVectorGivesResultsInOrder) {
    EXPECT_EQ(run_on(GetParam(), when_all_vector_body(1000), "when_all vector"), 999L * 1000 / 2);
}

aspen::task<int> slow_fail(std::atomic<int>* alive, std::string what) {
    alive_token a(alive);
    for (int i = 0; i < 20; ++i) co_await aspen::yield_now();
    throw std::runtime_error(what);
}
aspen::task<int> slow_value(std::atomic<int>* alive) {
    alive_token a(alive);
    for (int i = 0; i < 50; ++i) co_await aspen::yield_now();
    co_return 7;
}

aspen::task<std::string> when_all_error_body() {
    std::atomic<int> alive{0};
    std::string what;
    try {
        // The first operand fails last, but it comes first in argument order.
        (void)co_await aspen::when_all(slow_fail(&alive, "first"), fail_with("second"), slow_value(&alive));
    } catch (const std::runtime_error& e) {
        what = e.what();
    }
    if (alive.load() != 0) co_return "an operand outlived when_all";
    std::vector<aspen::task<int>> ts;
    ts.push_back(slow_value(&alive));
    ts.push_back(fail_with("vector"));
    try {
        (void)co_await aspen::when_all(std::move(ts));
    } catch (const std::runtime_error& e) {
        what += std::string("+") + e.what();
    }
    if (alive.load() != 0) co_return "an operand outlived when_all(vector)";
    co_return what;
}

TEST_P(Combinators, WhenAllRethrowsTheFirstErrorInArgumentOrderAfterAllFinished) {
    EXPECT_EQ(run_on(GetParam(), when_all_error_body(), "when_all error"), "first+vector");
}

aspen::task<void> await_all_forever(aspen::event* never, std::atomic<int>* alive, aspen::event* started) {
    started->set();
    (void)co_await aspen::when_all(wait_then(never, 1, alive), wait_then(never, 2, alive));
}

aspen::task<int> abort_caller_body() {
    aspen::event never, started;
    std::atomic<int> alive{0};
    auto h = aspen::spawn(await_all_forever(&never, &alive, &started));
    co_await started.wait();
    while (alive.load() != 2) co_await aspen::yield_now();
    co_await aspen_test::abort_and_join(h);
    // The operands were waiting: aborting them destroyed them at once.
    co_return alive.load();
}

TEST_P(Combinators, AbortingTheCallerOfWhenAllAbortsItsOperands) {
    EXPECT_EQ(run_on(GetParam(), abort_caller_body(), "when_all caller aborted"), 0);
}

aspen::task<int> when_any_body() {
    aspen::event never;
    std::atomic<int> alive{0};
    auto r = co_await aspen::when_any(wait_then(&never, 1, &alive), value(2), wait_then(&never, 3, &alive));
    static_assert(std::is_same_v<decltype(r), aspen::first_of<int>>);
    if (r.index != 1 || r.value != 2 || alive.load() != 0) co_return 1;

    auto m = co_await aspen::when_any(text("x"), wait_then(&never, 1, &alive), nothing());
    static_assert(std::is_same_v<decltype(m.value), std::variant<std::string, int, std::monostate>>);
    if (m.index == 1 || alive.load() != 0) co_return 2;
    if (m.index == 0 && std::get<0>(m.value) != "x") co_return 3;

    std::vector<aspen::task<int>> ts;
    for (int i = 0; i < 10; ++i) ts.push_back(i == 6 ? value(60) : wait_then(&never, i, &alive));
    auto v = co_await aspen::when_any(std::move(ts));
    if (v.index != 6 || v.value != 60 || alive.load() != 0) co_return 4;

    try {
        (void)co_await aspen::when_any(std::vector<aspen::task<int>>{});
        co_return 5;
    } catch (const std::invalid_argument&) {
    }
    try {
        (void)co_await aspen::when_any(fail_with("winner"), wait_then(&never, 1, &alive));
        co_return 6;
    } catch (const std::runtime_error& e) {
        if (std::string(e.what()) != "winner" || alive.load() != 0) co_return 7;
    }
    co_return 0;
}

TEST_P(Combinators, WhenAnyGivesTheFirstAndAbortsAndAwaitsTheRest) {
    EXPECT_EQ(run_on(GetParam(), when_any_body(), "when_any"), 0);
}

// A loser busy on another worker when it is aborted must still be gone
// when when_any returns.
aspen::task<int> busy(std::atomic<int>* alive, std::atomic<bool>* running) {
    alive_token a(alive);
    running->store(true);
    for (;;) co_await aspen::yield_now();
}
aspen::task<int> after_running(std::atomic<bool>* running) {
    while (!running->load()) co_await aspen::yield_now();
    co_return 5;
}
aspen::task<int> when_any_busy_loser_body(int rounds) {
    std::atomic<int> alive{0};
    for (int i = 0; i < rounds; ++i) {
        std::atomic<bool> running{false};
        auto r = co_await aspen::when_any(busy(&alive, &running), after_running(&running));
        if (r.index != 1 || alive.load() != 0) co_return i + 1;
    }
    co_return 0;
}

TEST_P(Combinators, WhenAnyLoserRunningElsewhereIsGoneWhenItReturns) {
    EXPECT_EQ(run_on(GetParam(), when_any_busy_loser_body(stress_rounds / 10), "busy loser"), 0);
}

// ---- cancel safety under when_any: notifications and permits ----------------

aspen::task<void> take_notification(aspen::notify* n, std::atomic<int>* received) {
    co_await n->notified();
    received->fetch_add(1);
}
aspen::task<void> wait_event(aspen::event* e) { co_await e->wait(); }

// Each round, a foreign thread sets the round's event and sends one
// notify_one, in random order, while when_any waits for either. Whatever
// wins, the round's notification is then either received by a task or (if
// its waiter was aborted after notify_one picked it, or nobody waited yet)
// stored as the permit: then one more notified() completes at once. Were it
// lost, that await would hang and the watchdog fail the test.
aspen::task<int> when_any_notify_body(int rounds, std::binary_semaphore* go, std::binary_semaphore* sent,
                                      std::vector<aspen::event>* events, aspen::notify* n) {
    std::atomic<int> received{0};
    int from_permit = 0;
    for (int i = 0; i < rounds; ++i) {
        go->release();
        (void)co_await aspen::when_any(take_notification(n, &received),
                                       wait_event(&(*events)[static_cast<std::size_t>(i)]));
        sent->acquire();  // both sent (blocks this worker briefly; the sender needs no worker)
        if (received.load() + from_permit == i) {
            co_await n->notified();
            ++from_permit;
        }
        if (received.load() + from_permit != i + 1) co_return -1 - i;
    }
    co_return n->waiter_count() == 0 ? 0 : 1;
}

TEST_P(Combinators, WhenAnyCancellationLosesNoNotification) {
    const int rounds = stress_rounds;
    std::vector<aspen::event> events(static_cast<std::size_t>(rounds));
    aspen::notify n;
    std::binary_semaphore go(0), sent(0);
    std::thread sender([&] {
        std::mt19937 rng(42);
        for (int i = 0; i < rounds; ++i) {
            go.acquire();
            if (rng() & 1) {
                n.notify_one();
                events[static_cast<std::size_t>(i)].set();
            } else {
                events[static_cast<std::size_t>(i)].set();
                n.notify_one();
            }
            sent.release();
        }
    });
    int r = run_on(GetParam(), when_any_notify_body(rounds, &go, &sent, &events, &n), "when_any notify");
    sender.join();
    EXPECT_EQ(r, 0);
}

aspen::task<aspen::semaphore_permit> take_permits(aspen::semaphore* s) { co_return co_await s->acquire(2); }
// Releases the permits and sets the event in one go, in the given order:
// the waiting acquire is granted and the event task finishes in the same
// instant, so the acquire often loses after its permits were granted.
aspen::task<void> release_and_set(aspen::semaphore_permit p, aspen::event* e, bool release_first) {
    co_await aspen::yield_now();
    if (release_first) p.release();
    e->set();
    p.release();
}

// A loser's permits (granted while it waited, or held in its dropped value)
// go back: the semaphore ends with all its permits and no waiter.
aspen::task<int> when_any_permit_body(int rounds, aspen::semaphore* s) {
    for (int i = 0; i < rounds; ++i) {
        aspen::event e;
        auto releaser = aspen::spawn(release_and_set(co_await s->acquire(2), &e, i % 3 != 0));
        (void)co_await aspen::when_any(take_permits(s), wait_event(&e));
        co_await releaser;
        if (s->available() != 2) co_return -1 - i;
    }
    co_return static_cast<int>(s->available() * 100 + s->waiter_count());
}

TEST_P(Combinators, WhenAnyCancellationLosesNoPermit) {
    aspen::semaphore s(2);
    EXPECT_EQ(run_on(GetParam(), when_any_permit_body(stress_rounds, &s), "when_any permits"), 200);
}

// ---- select --------------------------------------------------------------------

aspen::task<void> produce(aspen::mpsc_sender<int> tx, int base, int count) {
    for (int i = 0; i < count; ++i) (void)co_await tx.send(base + i);
}

// Two bounded channels, two producers each; one consumer selects between
// the two receivers until both streams end. Every message exactly once.
aspen::task<std::vector<int>> select_two_receivers_body(int per_producer) {
    auto [tx1, rx1] = aspen::mpsc_channel<int>(4);
    auto [tx2, rx2] = aspen::mpsc_channel<int>(4);
    std::vector<aspen::join_handle<void>> producers;
    producers.push_back(aspen::spawn(produce(tx1, 0, per_producer)));
    producers.push_back(aspen::spawn(produce(std::move(tx1), per_producer, per_producer)));
    producers.push_back(aspen::spawn(produce(tx2, 2 * per_producer, per_producer)));
    producers.push_back(aspen::spawn(produce(std::move(tx2), 3 * per_producer, per_producer)));
    std::vector<int> seen(static_cast<std::size_t>(4 * per_producer), 0);
    bool open1 = true, open2 = true;
    auto note = [&](const std::optional<int>& v, bool& open) {
        if (v) ++seen[static_cast<std::size_t>(*v)];
        else open = false;
    };
    while (open1 && open2) {
        auto r = co_await aspen::select(rx1.recv(), rx2.recv());
        static_assert(std::is_same_v<decltype(r.value), std::optional<int>>);
        note(r.value, r.index == 0 ? open1 : open2);
    }
    while (open1) note(co_await rx1.recv(), open1);
    while (open2) note(co_await rx2.recv(), open2);
    for (auto& p : producers) co_await p;
    co_return seen;
}

TEST_P(Combinators, SelectOverTwoReceiversReceivesEveryMessageExactlyOnce) {
    const int per = messages_per_producer / (GetParam() == 8 ? 2 : 1);
    auto seen = run_on(GetParam(), select_two_receivers_body(per), "select receivers");
    ASSERT_EQ(seen.size(), static_cast<std::size_t>(4 * per));
    for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "message " << i;
}

// select(acquire, acquire) on two semaphores released by other tasks: the
// losing acquire may have been granted permits while it waited; they must
// go back. Every round holds exactly one permit.
aspen::task<void> release_both(aspen::semaphore* a, aspen::semaphore* b) {
    co_await aspen::yield_now();
    a->release(1);
    b->release(1);
}
aspen::task<int> select_permits_body(int rounds, aspen::semaphore* a, aspen::semaphore* b) {
    int taken = 0;
    for (int i = 0; i < rounds; ++i) {
        auto releaser = aspen::spawn(release_both(a, b));
        {
            auto r = co_await aspen::select(a->acquire(), b->acquire());
            taken += static_cast<int>(r.value.count());
            r.value.forget();  // keep it out, so each round adds exactly one
        }
        co_await releaser;
    }
    // 2 released per round, 1 forgotten per round: rounds permits left.
    co_return taken == rounds ? static_cast<int>(a->available() + b->available()) : -1;
}

TEST_P(Combinators, SelectLoserGivesGrantedPermitsBack) {
    aspen::semaphore a(0), b(0);
    int left = run_on(GetParam(), select_permits_body(stress_rounds, &a, &b), "select permits");
    EXPECT_EQ(left, stress_rounds);
    EXPECT_EQ(a.waiter_count() + b.waiter_count(), 0u);
}

// Two notifies, one notify_one each per round from a foreign thread; the
// task selects between them twice per round. A losing notified() that was
// picked forwards its notification, so both are received every round.
aspen::task<int> select_notify_body(int rounds, aspen::notify* n1, aspen::notify* n2, std::binary_semaphore* go) {
    int got1 = 0, got2 = 0;
    for (int i = 0; i < rounds; ++i) {
        go->release();
        for (int k = 0; k < 2; ++k) {
            auto r = co_await aspen::select(n1->notified(), n2->notified());
            ++(r.index == 0 ? got1 : got2);
            // A notify of the same kind may arrive twice only if one was
            // lost and re-sent, which never happens: each is sent once.
            if (got1 > i + 1 || got2 > i + 1) co_return -1;
        }
    }
    co_return got1 == rounds && got2 == rounds ? 0 : 1;
}

TEST_P(Combinators, SelectLoserForwardsAPickedNotification) {
    const int rounds = stress_rounds;
    aspen::notify n1, n2;
    std::binary_semaphore go(0);
    std::thread sender([&] {
        std::mt19937 rng(7);
        for (int i = 0; i < rounds; ++i) {
            go.acquire();
            if (rng() & 1) {
                n1.notify_one();
                n2.notify_one();
            } else {
                n2.notify_one();
                n1.notify_one();
            }
        }
    });
    int r = run_on(GetParam(), select_notify_body(rounds, &n1, &n2, &go), "select notify");
    sender.join();
    EXPECT_EQ(r, 0);
}

// A losing lock() that was handed the lock passes it on; a losing send()
// that was granted a room passes the room on and sends nothing. Each round
// the lock is released and a message received in the same instant as the
// event is set, so the losers are often already granted.
aspen::task<void> unlock_recv_and_set(aspen::mutex_guard g, aspen::mpsc_receiver<int>* rx, std::vector<int>* got,
                                      aspen::event* e) {
    co_await aspen::yield_now();
    g.unlock();
    if (std::optional<int> v = rx->try_recv()) got->push_back(*v);
    e->set();
}
aspen::task<int> select_lock_and_send_body(int rounds) {
    aspen::mutex m;
    auto [tx, rx] = aspen::mpsc_channel<int>(1);
    constexpr int filler = 1000000;
    std::vector<int> got;  // one task at a time touches it (handed over by awaits)
    std::vector<int> won;  // the rounds whose send won
    (void)tx.try_send(filler);  // keep the channel full: a send must wait for a room
    for (int i = 0; i < rounds; ++i) {
        aspen::event e1, e2;
        auto h = aspen::spawn(unlock_recv_and_set(co_await m.lock(), &rx, &got, &e1));
        {
            auto r = co_await aspen::select(m.lock(), e1.wait());
            if (r.index == 0 && !std::get<0>(r.value).owns_lock()) co_return -1;
        }  // a winning guard unlocks here; a losing lock() passed the lock on
        co_await h;
        if (tx.try_send(filler).has_value() && rx.size() == 0) co_return -2;  // refill
        auto h2 = aspen::spawn(unlock_recv_and_set(co_await m.lock(), &rx, &got, &e2));
        auto r2 = co_await aspen::select(tx.send(i), e2.wait());
        if (r2.index == 0) {
            if (std::get<0>(r2.value).has_value()) co_return -3;  // never closed here
            won.push_back(i);
        }
        co_await h2;
        (void)tx.try_send(filler);  // refill if a room is free
    }
    while (std::optional<int> v = rx.try_recv()) got.push_back(*v);
    // No room leaked by a losing send: the empty channel takes one now.
    if (tx.try_send(filler).has_value()) co_return -4;
    // No lock leaked by a losing lock().
    if (!m.try_lock() || m.waiter_count() != 0) co_return -5;
    std::vector<int> sent_values;
    for (int v : got)
        if (v != filler) sent_values.push_back(v);
    co_return sent_values == won ? 0 : 1;  // each winning send once, in order; no loser's value
}

TEST_P(Combinators, SelectLoserPassesALockAndARoomOn) {
    EXPECT_EQ(run_on(GetParam(), select_lock_and_send_body(stress_rounds), "select lock/send"), 0);
}

aspen::task<int> select_mixed_body() {
    auto [tx, rx] = aspen::oneshot_channel<std::string>();
    aspen::event e;
    aspen::semaphore s(0);
    (void)tx.send("hi");
    auto r = co_await aspen::select(s.acquire(), std::move(rx).operator co_await(), e.wait());
    static_assert(std::is_same_v<decltype(r.value),
                                 std::variant<aspen::semaphore_permit, std::optional<std::string>, std::monostate>>);
    if (r.index != 1 || *std::get<1>(r.value) != "hi") co_return 1;
    if (s.waiter_count() != 0 || e.waiter_count() != 0) co_return 2;  // the losers left
    // A poll_fn branch, and an exception from a branch's poll.
    auto p = co_await aspen::select(e.wait(), aspen::poll_fn([](aspen::context&) -> aspen::poll<int> {
                                        return aspen::ready(9);
                                    }));
    if (p.index != 1 || std::get<1>(p.value) != 9) co_return 3;
    try {
        (void)co_await aspen::select(e.wait(), aspen::poll_fn([](aspen::context&) -> aspen::poll<int> {
                                         throw std::runtime_error("branch");
                                     }));
        co_return 4;
    } catch (const std::runtime_error&) {
    }
    co_return e.waiter_count() == 0 ? 0 : 5;
}

TEST_P(Combinators, SelectMixesOperationKindsAndRethrowsABranchError) {
    EXPECT_EQ(run_on(GetParam(), select_mixed_body(), "select mixed"), 0);
}

INSTANTIATE_TEST_SUITE_P(Kinds, Combinators, aspen_test::runtime_kinds, aspen_test::kind_name);

TEST(CombinatorsMisuse, OutsideATaskThrowsLogicError) {
    aspen::event e;
    auto s = aspen::select(e.wait());
    EXPECT_THROW((void)s.await_ready(), std::logic_error);
}

}  // namespace
