// A deterministic interleaving harness for aspen::detail::local_queue.
//
// The queue is instantiated with `stepped_atomics`: every load, store and
// CAS of its word and its slots first hands control back to a scheduler.
// Each logical thread (the owner, thieves 1..k) runs the real queue code on
// its own fiber (ucontext); the scheduler picks which thread performs its
// next atomic operation, so one run is one interleaving, fixed by the
// sequence of choices. Between two steps nothing else runs.
//
// The oracle is a sequential model of the queue (a deque of task ids, the
// batch a thief has claimed, each thief's own queue, the injector). It
// changes only at the operations' linearization points - the successful CAS
// on a word, as listed at the top of local_queue.hpp - and the harness
// applies to it the operation the CASing thread is in, not what the word
// says. After EVERY step the real queues (decoded from word and slots) must
// equal the model, a claimed batch must still sit unmodified in its slots,
// and I1/I2 must hold. When an operation returns, its result must be the one
// the model produced at its linearization point, and a failure (push full,
// pop empty, steal nothing) must be justified by the model at the thread's
// last look at the word. At the end every task is in exactly one place.
//
// Scope: the atomics are sequentially consistent here (one global order of
// steps), and compare_exchange_weak never fails spuriously; the memory
// orders are TSan's job (local_queue_test's concurrent tests).
#pragma once

#include "scheduler/local_queue.hpp"

#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LQH_ASAN 1
#endif
#endif
#if defined(LQH_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(ASPEN_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace lq_harness {

// ---------------------------------------------------------------------------
// Fibers: ucontext, annotated so ASan and TSan follow the stack switches.
// ---------------------------------------------------------------------------

class fiber_set {
public:
    static constexpr std::size_t stack_size = 64 * 1024;

    // (Re)starts fiber i at fn; fn must end with finish(), never return.
    // The stacks are kept for the next run: a run is a few dozen steps, and
    // mapping and unmapping them per run was most of the exhaustive
    // search's time under the sanitizers.
    void start(std::size_t i, void (*fn)()) {
        while (fibers_.size() <= i) fibers_.push_back(std::make_unique<fiber>());
        fiber& f = *fibers_[i];
        if (!f.stack) f.stack.reset(new char[stack_size]);
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack.get();
        f.ctx.uc_stack.ss_size = stack_size;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, fn, 0);
#if defined(ASPEN_TSAN)
        // A new TSan fiber each run: the old one's shadow call stack still
        // holds the frames of a body that never returned.
        if (f.tsan) __tsan_destroy_fiber(f.tsan);
        f.tsan = __tsan_create_fiber(0);
#endif
    }

    // Scheduler -> fiber i; returns when it yields or finishes.
    void resume(std::size_t i) {
        fiber& f = *fibers_[i];
        current_ = static_cast<int>(i);
#if defined(LQH_ASAN)
        void* fake = nullptr;
        __sanitizer_start_switch_fiber(&fake, f.stack.get(), stack_size);
#endif
#if defined(ASPEN_TSAN)
        main_tsan_ = __tsan_get_current_fiber();
        __tsan_switch_to_fiber(f.tsan, 0);
#endif
        swapcontext(&main_, &f.ctx);
#if defined(LQH_ASAN)
        __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
        current_ = -1;
    }

    // Fiber -> scheduler (the fiber continues at the next resume).
    void yield() { to_main(false); }
    // Fiber -> scheduler for good.
    [[noreturn]] void finish() {
        to_main(true);
        __builtin_unreachable();
    }
    // Called first thing on a fiber's stack (ASan bookkeeping).
    void entered() {
#if defined(LQH_ASAN)
        __sanitizer_finish_switch_fiber(nullptr, &main_bottom_, &main_size_);
#endif
    }

    int current() const { return current_; }

private:
    struct fiber {
        ucontext_t ctx{};
        std::unique_ptr<char[]> stack;
        void* tsan = nullptr;

        fiber() = default;
        fiber(const fiber&) = delete;  // getcontext points ctx into itself
        fiber& operator=(const fiber&) = delete;
        ~fiber() {
#if defined(ASPEN_TSAN)
            if (tsan) __tsan_destroy_fiber(tsan);
#endif
        }
    };
    // One pool per thread: harnesses on a thread run one after another.
    static std::vector<std::unique_ptr<fiber>>& pool() {
        thread_local std::vector<std::unique_ptr<fiber>> fibers;
        return fibers;
    }

    void to_main(bool last) {
        fiber& f = *fibers_[static_cast<std::size_t>(current_)];
#if defined(LQH_ASAN)
        void* fake = nullptr;
        __sanitizer_start_switch_fiber(last ? nullptr : &fake, main_bottom_, main_size_);
#endif
#if defined(ASPEN_TSAN)
        __tsan_switch_to_fiber(main_tsan_, 0);
#endif
        swapcontext(&f.ctx, &main_);
#if defined(LQH_ASAN)
        __sanitizer_finish_switch_fiber(fake, &main_bottom_, &main_size_);
#endif
        (void)last;
        (void)f;
    }

    std::vector<std::unique_ptr<fiber>>& fibers_ = pool();
    ucontext_t main_{};
    int current_ = -1;
#if defined(ASPEN_TSAN)
    void* main_tsan_ = nullptr;
#endif
#if defined(LQH_ASAN)
    const void* main_bottom_ = nullptr;
    std::size_t main_size_ = 0;
#endif
};

// The one harness running on this thread (the stepped atomics find it here).
class harness;
inline harness* active = nullptr;
void before_step();
void after_cas(const void* object, bool ok);
void after_load(const void* object);

// Test of the test: when set, a CAS compares in one step and writes in the
// next (not atomic), and the harness must find the damage.
inline bool torn_cas = false;

// ---------------------------------------------------------------------------
// The stepped atomic: std::atomic's interface as local_queue uses it.
// Outside a fiber (setup, inspection) it is a plain variable.
// ---------------------------------------------------------------------------

template <class U>
class stepped_atomic {
public:
    stepped_atomic() = default;
    explicit stepped_atomic(U v) : v_(v) {}
    stepped_atomic(const stepped_atomic&) = delete;
    stepped_atomic& operator=(const stepped_atomic&) = delete;

    U load(std::memory_order) const {
        before_step();
        const U v = v_;
        after_load(this);
        return v;
    }
    void store(U v, std::memory_order) {
        before_step();
        v_ = v;
    }
    bool compare_exchange_weak(U& expected, U desired, std::memory_order, std::memory_order) {
        before_step();
        const bool ok = v_ == expected;
        if (ok) {
            if (torn_cas) before_step();  // the deliberately broken variant
            v_ = desired;
        } else {
            expected = v_;
        }
        after_cas(this, ok);
        return ok;
    }
    U peek() const { return v_; }

private:
    U v_{};
};

struct stepped_atomics {
    template <class U>
    using atomic = stepped_atomic<U>;
};

struct node {
    node* queue_next = nullptr;
    std::uint32_t id = 0;
};

using queue = aspen::detail::local_queue<node, stepped_atomics>;

}  // namespace lq_harness

namespace aspen::detail {
// Raw view of a stepped queue, read by the scheduler between steps.
template <>
struct local_queue_inspector<lq_harness::queue> {
    using queue = lq_harness::queue;
    struct view {
        std::uint32_t steal, head, tail;
    };
    static view fields(const queue& q) {
        const auto f = queue::unpack(q.word_.peek());
        return {f.steal, f.head, f.tail};
    }
    static std::uint32_t dist(std::uint32_t a, std::uint32_t b) { return queue::dist(a, b); }
    static lq_harness::node* slot(const queue& q, std::uint32_t index) { return q.slots_[index & q.mask_].peek(); }
    static const void* word(const queue& q) { return &q.word_; }
};
}  // namespace aspen::detail

namespace lq_harness {

using inspect = aspen::detail::local_queue_inspector<queue>;

// What the threads do. The owner runs `owner` (a push that finds the ring
// full goes on with push_overflow, as the scheduler does); thief k makes
// `steals[k]` steal_into calls into its own queue. A push_oldest (a yield)
// that is refused goes to the injector, as the scheduler does.
enum class owner_op : std::uint8_t { push, pop, pop_oldest, push_oldest };

struct program {
    std::uint32_t cap = 4;
    std::uint32_t dst_cap = 4;
    std::uint32_t start_index = 0;  // all indices of all queues start here
    std::uint32_t prefill = 0;      // tasks pushed before the threads start
    std::vector<owner_op> owner;
    std::vector<int> steals;  // one entry per thief
    std::string describe() const;
};

// Picks the thread for the next step among `enabled` (ascending ids);
// `prev` is the thread of the previous step (-1 at the start).
using chooser = std::function<int(const std::vector<int>& enabled, int prev)>;

// How often the interesting paths were taken (to show they were).
struct coverage {
    std::uint64_t steals = 0, failed_steals = 0;
    std::uint64_t overflows = 0;            // push_overflow moved half the ring
    std::uint64_t overflow_singles = 0;     // ... pushed one task: steal in progress
    std::uint64_t overflow_room = 0;        // ... found room after all
    std::uint64_t pop_oldest_in_steal = 0;  // pop_oldest between a claim and its release
    std::uint64_t oldest_pushes = 0;        // push_oldest took effect
    std::uint64_t oldest_refusals = 0;      // ... refused: full, or a steal in progress
    void add(const coverage& o) {
        oldest_pushes += o.oldest_pushes;
        oldest_refusals += o.oldest_refusals;
        steals += o.steals;
        failed_steals += o.failed_steals;
        overflows += o.overflows;
        overflow_singles += o.overflow_singles;
        overflow_room += o.overflow_room;
        pop_oldest_in_steal += o.pop_oldest_in_steal;
    }
};

struct step_record {
    std::vector<int> enabled;
    int chosen;
    int prev;
};

struct run_result {
    bool ok = true;
    std::string error;               // first violation, with the step
    std::vector<step_record> trace;  // every scheduling decision
    coverage seen;
};

class harness {
public:
    explicit harness(const program& p) : p_(p) {}
    run_result run(const chooser& choose);

    // Hooks from the stepped atomics.
    void on_before_step() {
        if (fibers_.current() >= 0) fibers_.yield();
    }
    void on_cas(const void* object, bool ok);
    void on_load(const void* object);

private:
    enum class op_kind : std::uint8_t { none, push, push_overflow, pop, pop_oldest, push_oldest, steal };
    struct thread_state {
        op_kind op = op_kind::none;
        node* arg = nullptr;
        int phase = 0;          // steal: 0 before claim, 1 claimed, 2 released
        bool linearized = false;
        node* expected = nullptr;
        std::uint32_t expected_n = 0;
        // the model at this thread's last look at the victim word
        bool saw_full = false, saw_empty = false, saw_other_claim = false;
        std::vector<node*> batch;  // steal: what the claim took, oldest first
        bool published = false;    // steal: batch minus its newest is in dst
        bool done = false;
    };

    static void fiber_main();
    void body(int self);
    void owner_body();
    void thief_body(int k);
    void begin(int self, op_kind op, node* arg);
    void fail(const std::string& what);
    void check_state();
    void check_end();
    std::uint32_t occupancy() const { return static_cast<std::uint32_t>(mq_.size()) + claim_span_; }
    void note_observation(int self);
    void linearize_owner(thread_state& t);
    void linearize_steal(int self, thread_state& t);

    const program& p_;
    fiber_set fibers_;
    std::unique_ptr<queue> q_;
    std::vector<std::unique_ptr<queue>> dst_;
    std::vector<node> nodes_;
    std::uint32_t next_node_ = 0;
    std::vector<thread_state> th_;
    int starting_ = -1;

    // The model.
    std::deque<node*> mq_;
    std::vector<std::deque<node*>> md_;
    int claimer_ = -1;
    std::uint32_t claim_span_ = 0;  // claim + owner's pop_oldest during it
    std::vector<node*> minj_;       // what push_overflow must have handed over
    std::vector<node*> taken_;      // returned to some thread
    std::vector<node*> injected_;   // what the injector really got
    struct recording_injector {
        harness* h;
        void push(node* t) { h->injected_.push_back(t); }
        void push_batch(node* first, node* last, std::size_t n) {
            std::size_t k = 0;
            for (node* p = first;; p = p->queue_next) {
                h->injected_.push_back(p);
                ++k;
                if (p == last || k > n) break;
            }
            if (k != n) h->fail("push_overflow: batch length differs from n");
        }
    };
    run_result res_;
    std::size_t step_ = 0;
};

// Runs one interleaving of p chosen by `choose`.
inline run_result run_once(const program& p, const chooser& choose) {
    harness h(p);
    return h.run(choose);
}

// Explores every interleaving with at most `preemption_bound` preemptions
// (switching away from a thread that could go on; < 0: no bound) by depth-
// first search over the choice points, each run replaying its prefix. `run`
// performs one run with the given chooser. Stops at the first failing run.
struct explore_result {
    std::uint64_t runs = 0;
    std::uint64_t steps = 0;
    coverage seen;
    bool ok = true;
    std::string error;
};
using run_fn = std::function<run_result(const chooser&)>;
explore_result explore(const run_fn& run, int preemption_bound);

inline explore_result explore(const program& p, int preemption_bound) {
    return explore([&p](const chooser& c) { return run_once(p, c); }, preemption_bound);
}

}  // namespace lq_harness

// ===========================================================================
// Implementation
// ===========================================================================

namespace lq_harness {

inline void before_step() {
    if (active) active->on_before_step();
}
inline void after_cas(const void* object, bool ok) {
    if (active) active->on_cas(object, ok);
}
inline void after_load(const void* object) {
    if (active) active->on_load(object);
}

inline std::string program::describe() const {
    std::string s = "cap=" + std::to_string(cap) + " dst_cap=" + std::to_string(dst_cap) +
                    " start=" + std::to_string(start_index) + " prefill=" + std::to_string(prefill) + " owner=[";
    for (owner_op o : owner)
        s += o == owner_op::push          ? "push "
             : o == owner_op::pop         ? "pop "
             : o == owner_op::push_oldest ? "push_oldest "
                                          : "pop_oldest ";
    s += "] steals=[";
    for (int n : steals) s += std::to_string(n) + " ";
    return s + "]";
}

inline void harness::fail(const std::string& what) {
    if (!res_.ok) return;
    res_.ok = false;
    const int self = fibers_.current();
    res_.error = self < 0 ? "after step " + std::to_string(step_) + ": " + what
                          : "step " + std::to_string(step_) + " (thread " + std::to_string(self) + "): " + what;
}

inline void harness::begin(int self, op_kind op, node* arg) {
    thread_state& t = th_[static_cast<std::size_t>(self)];
    t.op = op;
    t.arg = arg;
    t.phase = 0;
    t.linearized = false;
    t.expected = nullptr;
    t.expected_n = 0;
    t.saw_full = t.saw_empty = t.saw_other_claim = false;
    t.batch.clear();
    t.published = false;
}

// The thread just looked at the victim word (a load or a failed CAS): what
// the model says it saw, to justify a failure it may decide on.
inline void harness::note_observation(int self) {
    thread_state& t = th_[static_cast<std::size_t>(self)];
    t.saw_empty = mq_.empty();
    t.saw_full = occupancy() == p_.cap;
    t.saw_other_claim = claimer_ != -1 && claimer_ != self;
}

inline void harness::on_load(const void* object) {
    const int self = fibers_.current();
    if (self >= 0 && object == inspect::word(*q_)) note_observation(self);
}

inline void harness::on_cas(const void* object, bool ok) {
    const int self = fibers_.current();
    if (self < 0) return;  // setup
    thread_state& t = th_[static_cast<std::size_t>(self)];
    if (object == inspect::word(*q_)) {
        if (!ok) {
            note_observation(self);
        } else if (self == 0) {
            linearize_owner(t);
        } else {
            linearize_steal(self, t);
        }
        return;
    }
    for (std::size_t k = 0; k < dst_.size(); ++k) {
        if (object != inspect::word(*dst_[k])) continue;
        // Only thief k+1 touches its own queue, only to publish its batch.
        if (self != static_cast<int>(k) + 1 || t.op != op_kind::steal || t.phase != 2 || t.published)
            return fail("unexpected CAS on a thief's own queue");
        if (!ok) return fail("the publishing CAS on an uncontended queue failed");
        md_[k].insert(md_[k].end(), t.batch.begin(), t.batch.end() - 1);
        t.published = true;
        return;
    }
}

// A successful CAS of the owner on its word: the linearization point of the
// operation it is in.
inline void harness::linearize_owner(thread_state& t) {
    if (t.linearized) return fail("a second successful CAS in one owner operation");
    t.linearized = true;
    switch (t.op) {
        case op_kind::push:
            if (occupancy() >= p_.cap) return fail("push took effect on a full ring");
            mq_.push_back(t.arg);
            return;
        case op_kind::push_overflow:
            if (occupancy() < p_.cap) {
                mq_.push_back(t.arg);  // room again: a plain push
                t.expected_n = 0;
                return;
            }
            if (claimer_ != -1) return fail("overflow moved tasks while a steal was in progress");
            for (std::uint32_t i = 0; i < p_.cap / 2; ++i) {
                minj_.push_back(mq_.front());
                mq_.pop_front();
            }
            minj_.push_back(t.arg);
            t.expected_n = p_.cap / 2 + 1;
            return;
        case op_kind::push_oldest:
            if (occupancy() >= p_.cap) return fail("push_oldest took effect on a full ring");
            if (claimer_ != -1) return fail("push_oldest took effect while a steal was in progress");
            mq_.push_front(t.arg);
            return;
        case op_kind::pop:
            if (mq_.empty()) return fail("pop took effect on an empty queue");
            t.expected = mq_.back();
            mq_.pop_back();
            return;
        case op_kind::pop_oldest:
            if (mq_.empty()) return fail("pop_oldest took effect on an empty queue");
            t.expected = mq_.front();
            mq_.pop_front();
            if (claimer_ != -1) {
                ++claim_span_;  // steal stays behind until the release
                ++res_.seen.pop_oldest_in_steal;
            }
            return;
        default:
            return fail("unexpected owner CAS");
    }
}

// A successful CAS of a thief on the victim word: its claim, then its release.
inline void harness::linearize_steal(int self, thread_state& t) {
    if (t.op != op_kind::steal) return fail("unexpected thief CAS");
    if (t.phase == 0) {
        if (claimer_ != -1) return fail("two steals in progress at once");
        const std::size_t k = static_cast<std::size_t>(self) - 1;
        const std::uint32_t avail = static_cast<std::uint32_t>(mq_.size());
        std::uint32_t n = avail - avail / 2;
        n = std::min<std::uint32_t>(n, p_.dst_cap - static_cast<std::uint32_t>(md_[k].size()) + 1);
        if (n == 0) return fail("a claim of zero tasks");
        for (std::uint32_t i = 0; i < n; ++i) {
            t.batch.push_back(mq_.front());
            mq_.pop_front();
        }
        claimer_ = self;
        claim_span_ = n;
        t.expected = t.batch.back();
        t.expected_n = n;
        t.phase = 1;
        t.linearized = true;
    } else if (t.phase == 1) {
        if (claimer_ != self) return fail("release without a claim");
        claimer_ = -1;
        claim_span_ = 0;
        t.phase = 2;
    } else {
        fail("a third successful CAS in one steal");
    }
}

inline void harness::owner_body() {
    thread_state& t = th_[0];
    recording_injector inj{this};
    for (owner_op op : p_.owner) {
        if (op == owner_op::push) {
            node* n = &nodes_[next_node_++];
            begin(0, op_kind::push, n);
            if (q_->push(n)) {
                if (!t.linearized) fail("push returned true without taking effect");
                continue;
            }
            if (t.linearized || !t.saw_full) fail("push returned false but the ring was not full");
            begin(0, op_kind::push_overflow, n);
            const std::uint32_t moved = q_->push_overflow(n, inj);
            if (moved == 1) {
                if (t.linearized || !t.saw_other_claim)
                    fail("push_overflow pushed one task to the injector without a steal in progress");
                minj_.push_back(n);
                ++res_.seen.overflow_singles;
            } else if (!t.linearized || moved != t.expected_n) {
                fail("push_overflow returned " + std::to_string(moved) + ", the model says " +
                     std::to_string(t.linearized ? t.expected_n : 1));
            } else {
                ++(moved == 0 ? res_.seen.overflow_room : res_.seen.overflows);
            }
            if (injected_ != minj_) fail("the injector did not get the oldest half plus the new task, in order");
        } else if (op == owner_op::push_oldest) {
            node* n = &nodes_[next_node_++];
            begin(0, op_kind::push_oldest, n);
            if (q_->push_oldest(n)) {
                if (!t.linearized) fail("push_oldest returned true without taking effect");
                ++res_.seen.oldest_pushes;
                continue;
            }
            if (t.linearized || !(t.saw_full || t.saw_other_claim))
                fail("push_oldest refused with room and no steal in progress");
            inj.push(n);
            minj_.push_back(n);
            ++res_.seen.oldest_refusals;
        } else {
            const bool newest = op == owner_op::pop;
            begin(0, newest ? op_kind::pop : op_kind::pop_oldest, nullptr);
            node* got = newest ? q_->pop() : q_->pop_oldest();
            if (got == nullptr) {
                if (t.linearized || !t.saw_empty) fail("pop returned nothing from a non-empty queue");
            } else if (!t.linearized || got != t.expected) {
                fail(std::string(newest ? "pop" : "pop_oldest") + " returned a task other than the model's");
            } else {
                taken_.push_back(got);
            }
        }
    }
}

inline void harness::thief_body(int k) {
    const int self = k + 1;
    thread_state& t = th_[static_cast<std::size_t>(self)];
    for (int i = 0; i < p_.steals[static_cast<std::size_t>(k)]; ++i) {
        begin(self, op_kind::steal, nullptr);
        std::uint32_t n = 99;
        node* got = q_->steal_into(*dst_[static_cast<std::size_t>(k)], n);
        if (got == nullptr) {
            ++res_.seen.failed_steals;
            if (n != 0 || t.linearized) fail("a failed steal took tasks");
            if (!t.saw_empty && !t.saw_other_claim) fail("a steal failed with tasks there and no steal in progress");
            continue;
        }
        ++res_.seen.steals;
        if (t.phase != 2) fail("steal returned before releasing its claim");
        if (got != t.expected || n != t.expected_n) fail("steal returned other tasks than the model's");
        if (n > 1 && !t.published) fail("steal returned before publishing its batch");
        taken_.push_back(got);
    }
}

inline void harness::body(int self) {
    if (self == 0) {
        owner_body();
    } else {
        thief_body(self - 1);
    }
}

inline void harness::fiber_main() {
    harness* h = active;
    const int self = h->starting_;
    h->fibers_.entered();
    h->body(self);
    h->th_[static_cast<std::size_t>(self)].done = true;
    h->fibers_.finish();
}

// Compares the real queues (word and slots) with the model.
inline void harness::check_state() {
    const auto f = inspect::fields(*q_);
    const std::uint32_t claimed = inspect::dist(f.steal, f.head), live = inspect::dist(f.head, f.tail);
    if (claimed + live != inspect::dist(f.steal, f.tail)) return fail("I1 broken: steal <= head <= tail");
    if (inspect::dist(f.steal, f.tail) > p_.cap) return fail("I2 broken: more than capacity slots in use");
    if (live != mq_.size()) {
        return fail("the queue holds " + std::to_string(live) + " tasks, the model " + std::to_string(mq_.size()));
    }
    for (std::uint32_t i = 0; i < live; ++i)
        if (inspect::slot(*q_, f.head + i) != mq_[i]) return fail("the queue's tasks differ from the model's");
    if (claimer_ == -1) {
        if (claimed != 0) return fail("steal != head with no steal in progress");
    } else {
        if (claimed != claim_span_) return fail("the claimed range differs from the model's");
        const auto& batch = th_[static_cast<std::size_t>(claimer_)].batch;
        for (std::uint32_t i = 0; i < batch.size(); ++i)
            if (inspect::slot(*q_, f.steal + i) != batch[i]) return fail("a claimed slot was overwritten");
    }
    for (std::size_t k = 0; k < dst_.size(); ++k) {
        const auto d = inspect::fields(*dst_[k]);
        if (d.steal != d.head) return fail("steal != head in a thief's own queue");
        if (inspect::dist(d.head, d.tail) != md_[k].size()) return fail("a thief's queue differs from the model's");
        for (std::uint32_t i = 0; i < md_[k].size(); ++i)
            if (inspect::slot(*dst_[k], d.head + i) != md_[k][i]) return fail("a thief's queue differs from the model's");
    }
    if (injected_.size() > minj_.size() || !std::equal(injected_.begin(), injected_.end(), minj_.begin()))
        return fail("the injector got tasks the model did not hand over");
}

// Every task pushed is in exactly one place.
inline void harness::check_end() {
    std::vector<int> seen(nodes_.size(), 0);
    auto count = [&](node* n) { ++seen[n->id]; };
    for (node* n : mq_) count(n);
    for (auto& d : md_)
        for (node* n : d) count(n);
    for (node* n : taken_) count(n);
    for (node* n : injected_) count(n);
    for (std::size_t i = 0; i < next_node_; ++i)
        if (seen[i] != 1) return fail("task " + std::to_string(i) + " is in " + std::to_string(seen[i]) + " places");
}

inline run_result harness::run(const chooser& choose) {
    active = this;
    const std::size_t threads = 1 + p_.steals.size();
    const std::size_t pushes = static_cast<std::size_t>(std::count_if(
        p_.owner.begin(), p_.owner.end(), [](owner_op o) { return o == owner_op::push || o == owner_op::push_oldest; }));
    nodes_.resize(p_.prefill + pushes);
    for (std::size_t i = 0; i < nodes_.size(); ++i) nodes_[i].id = static_cast<std::uint32_t>(i);
    q_ = std::make_unique<queue>(p_.cap, p_.start_index);
    for (std::size_t k = 1; k < threads; ++k) dst_.push_back(std::make_unique<queue>(p_.dst_cap, p_.start_index));
    md_.resize(threads - 1);
    for (std::uint32_t i = 0; i < p_.prefill; ++i) {  // no fiber yet: plain accesses
        node* n = &nodes_[next_node_++];
        if (!q_->push(n)) fail("prefill beyond capacity");
        mq_.push_back(n);
    }
    th_.assign(threads, {});
    // Run each thread up to its first atomic operation (nothing shared yet).
    for (std::size_t i = 0; i < threads; ++i) {
        starting_ = static_cast<int>(i);
        fibers_.start(i, &harness::fiber_main);
        fibers_.resume(i);
    }
    check_state();
    std::vector<int> enabled;
    int prev = -1;
    while (res_.ok) {
        enabled.clear();
        for (std::size_t i = 0; i < threads; ++i)
            if (!th_[i].done) enabled.push_back(static_cast<int>(i));
        if (enabled.empty()) break;
        const int chosen = choose(enabled, prev);
        if (std::find(enabled.begin(), enabled.end(), chosen) == enabled.end()) {
            fail("the chooser picked a thread that cannot run");
            break;
        }
        res_.trace.push_back({enabled, chosen, prev});
        ++step_;
        fibers_.resume(static_cast<std::size_t>(chosen));
        check_state();
        prev = chosen;
        if (step_ > 100000) fail("no end after 100000 steps (livelock?)");
    }
    if (res_.ok) check_end();
    active = nullptr;
    return res_;
}

inline explore_result explore(const run_fn& run, int preemption_bound) {
    struct frame {
        std::vector<int> enabled;
        int prev;
        int chosen;
        std::uint32_t tried;  // bit per thread
        int preemptions_before;
    };
    auto is_preemption = [](const std::vector<int>& enabled, int prev, int pick) {
        return prev >= 0 && pick != prev && std::find(enabled.begin(), enabled.end(), prev) != enabled.end();
    };
    explore_result out;
    std::vector<frame> stack;
    std::vector<int> prefix;
    for (;;) {
        std::size_t depth = 0;
        bool diverged = false;
        const chooser choose = [&](const std::vector<int>& enabled, int prev) {
            int pick;
            if (depth < prefix.size()) {
                pick = prefix[depth];
                if (stack[depth].enabled != enabled) diverged = true;
            } else {
                // Default: keep running the previous thread (no preemption).
                const bool can_continue = std::find(enabled.begin(), enabled.end(), prev) != enabled.end();
                pick = can_continue ? prev : enabled.front();
                int before = 0;
                if (depth > 0) {
                    const frame& last = stack[depth - 1];
                    before = last.preemptions_before + (is_preemption(last.enabled, last.prev, last.chosen) ? 1 : 0);
                }
                stack.push_back({enabled, prev, pick, std::uint32_t{1} << pick, before});
            }
            ++depth;
            return pick;
        };
        const run_result r = run(choose);
        ++out.runs;
        out.steps += r.trace.size();
        out.seen.add(r.seen);
        if (diverged || !r.ok) {
            out.ok = false;
            out.error = diverged ? "a replay took another path: the runs are not deterministic" : r.error;
            out.error += "\n  schedule:";
            for (const auto& s : r.trace) {
                out.error += ' ';  // not operator+: g++ 12 -O3 warns falsely
                out.error += std::to_string(s.chosen);
            }
            return out;
        }
        // Backtrack to the deepest choice point with an untried alternative.
        while (!stack.empty()) {
            frame& f = stack.back();
            bool found = false;
            for (int cand : f.enabled) {
                if (f.tried & (std::uint32_t{1} << cand)) continue;
                f.tried |= std::uint32_t{1} << cand;
                const int cost = is_preemption(f.enabled, f.prev, cand) ? 1 : 0;
                if (preemption_bound >= 0 && f.preemptions_before + cost > preemption_bound) continue;
                f.chosen = cand;
                found = true;
                break;
            }
            if (found) break;
            stack.pop_back();
        }
        if (stack.empty()) return out;
        prefix.clear();
        for (const frame& f : stack) prefix.push_back(f.chosen);
    }
}

}  // namespace lq_harness
