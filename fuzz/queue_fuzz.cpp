// libFuzzer target: the run queues against sequential models.
//
// Input byte 0 picks the mode:
//   even: a local_queue program (push, pop, pop_oldest, push_oldest) and its
//         interleaving for the stepped harness
//         (tests/local_queue_harness.hpp): the owner's operations, the
//         thieves, and then one byte per scheduling decision (which enabled
//         thread takes the next atomic step; when the bytes run out the
//         running thread goes on). Every step is compared with the model.
//   odd:  a sequential run of the injector, fed directly and by a 4-slot
//         local_queue overflowing into it, against a deque.
// Any disagreement prints what and aborts.
#include "local_queue_harness.hpp"
#include "scheduler/injector.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <vector>

namespace {

struct reader {
    const std::uint8_t* p;
    std::size_t n;
    bool empty() const { return n == 0; }
    std::uint8_t next() {
        if (n == 0) return 0;
        --n;
        return *p++;
    }
};

[[noreturn]] void die(const char* what, const std::string& detail = {}) {
    std::fprintf(stderr, "queue_fuzz: %s %s\n", what, detail.c_str());
    std::abort();
}

void fuzz_interleaving(reader in) {
    using namespace lq_harness;
    program p;
    const std::uint8_t shape = in.next();
    p.cap = std::uint32_t{2} << (shape % 3);                  // 2, 4, 8
    p.dst_cap = std::uint32_t{2} << ((shape >> 2) % 2);       // 2, 4
    p.start_index = (shape >> 3) & 1 ? (std::uint32_t{1} << 21) - ((shape >> 4) & 7) : 0;
    p.prefill = in.next() % (p.cap + 1);
    const std::uint8_t threads = in.next();
    for (int k = 0; k < 1 + threads % 3; ++k) p.steals.push_back(1 + (threads >> (2 + 2 * k)) % 3);
    const int n_ops = 1 + in.next() % 10;
    for (int i = 0; i < n_ops; ++i) p.owner.push_back(static_cast<owner_op>(in.next() % 4));
    const run_result r = run_once(p, [&in](const std::vector<int>& enabled, int prev) {
        if (in.empty()) {
            for (int t : enabled)
                if (t == prev) return t;
            return enabled.front();
        }
        return enabled[in.next() % enabled.size()];
    });
    if (!r.ok) die(r.error.c_str(), p.describe());
}

struct node {
    node* queue_next = nullptr;
    std::uint32_t id = 0;
};

void fuzz_injector(reader in) {
    aspen::detail::injector<node> inj;
    aspen::detail::local_queue<node> local(4);
    std::deque<node*> model, local_model;
    std::vector<node> nodes(in.n * 8 + 8);
    std::size_t next = 0;
    node* out[16];
    auto fresh = [&] {
        node* t = &nodes[next];
        t->id = static_cast<std::uint32_t>(next++);
        return t;
    };
    while (!in.empty()) {
        const std::uint8_t op = in.next();
        const std::size_t k = (op >> 3) % 8;
        switch (op % 7) {
            case 0:
                model.push_back(fresh());
                inj.push(model.back());
                break;
            case 1: {  // a pre-linked batch of k+1
                node* first = fresh();
                node* last = first;
                model.push_back(first);
                for (std::size_t i = 0; i < k; ++i) {
                    last->queue_next = fresh();
                    last = last->queue_next;
                    model.push_back(last);
                }
                inj.push_batch(first, last, k + 1);
                break;
            }
            case 2: {
                node* t = inj.pop();
                if (model.empty() ? t != nullptr : t != model.front()) die("injector pop: not the oldest");
                if (t) model.pop_front();
                break;
            }
            case 3: {
                const std::size_t got = inj.pop_batch(out, k + 1);
                if (got != std::min(k + 1, model.size())) die("injector pop_batch: wrong count");
                for (std::size_t i = 0; i < got; ++i) {
                    if (out[i] != model.front()) die("injector pop_batch: wrong order");
                    model.pop_front();
                }
                break;
            }
            case 4: {
                std::size_t n = 0;
                node* t = inj.take_all(n);
                if (n != model.size()) die("injector take_all: wrong count");
                for (; t != nullptr; t = t->queue_next) {
                    if (model.empty() || t != model.front()) die("injector take_all: wrong list");
                    model.pop_front();
                }
                if (!model.empty()) die("injector take_all: list too short");
                break;
            }
            case 5: {  // the owner pushes; a full ring overflows half + 1 into the injector
                node* t = fresh();
                if (local.push(t)) {
                    local_model.push_back(t);
                } else if (local.push_overflow(t, inj) != 3) {
                    die("local_queue push_overflow: expected capacity/2 + 1 tasks moved");
                } else {
                    for (int i = 0; i < 2; ++i) {
                        model.push_back(local_model.front());
                        local_model.pop_front();
                    }
                    model.push_back(t);
                }
                break;
            }
            default: {
                node* t = local.pop();
                if (local_model.empty() ? t != nullptr : t != local_model.back()) die("local_queue pop: not the newest");
                if (t) local_model.pop_back();
                break;
            }
        }
        if (inj.len() != model.size() || inj.is_empty() != model.empty()) die("injector len disagrees");
        if (local.len() != local_model.size()) die("local_queue len disagrees");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    reader in{data + 1, size - 1};
    if (data[0] % 2 == 0) {
        fuzz_interleaving(in);
    } else {
        fuzz_injector(in);
    }
    return 0;
}
