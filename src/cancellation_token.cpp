// cancellation_token's shared state. The tree (a token and its children)
// is cancelled top-down without recursion, so a long chain of children
// cannot overflow the stack. A state's lock guards `cancelled`, its
// children and its stop_source; waking waiters, cancelling children and
// requesting stop happen after the lock is released (user stop callbacks
// may call back into the token).
#include <aspen/cancellation_token.hpp>

#include <mutex>
#include <utility>
#include <vector>

namespace aspen::detail {

struct cancel_state {
    // Cancels the state and, breadth-first, every child still alive.
    static void cancel_tree(cancel_state* root) noexcept {
        std::vector<std::shared_ptr<cancel_state>> work;
        cancel_one(root, work);
        while (!work.empty()) {
            std::shared_ptr<cancel_state> s = std::move(work.back());
            work.pop_back();
            cancel_one(s.get(), work);
        }
    }

    // Children nobody holds any more are dropped when the list has doubled
    // since the last sweep, so adding children costs amortized O(1).
    void add_child(std::shared_ptr<cancel_state> c) {
        bool now;
        {
            std::lock_guard g(lock);
            now = cancelled;
            if (!now) {
                if (children.size() >= sweep_at) {
                    std::erase_if(children, [](const std::weak_ptr<cancel_state>& w) { return w.expired(); });
                    sweep_at = 2 * children.size() + 8;
                }
                children.push_back(c);
            }
        }
        if (now) cancel_tree(c.get());
    }

#if ASPEN_HAS_STOP_TOKEN
    std::stop_token get_stop_token() {
        // Empty until it copies the shared source below: a default-made
        // stop_source allocates a stop state of its own, for nothing (and
        // g++ 12 at -Os warned about that state's construction, which
        // failed a MinSizeRel build under -Werror).
        std::stop_source s(std::nostopstate);
        bool now;
        {
            std::lock_guard g(lock);
            if (!source) source.emplace();
            s = *source;
            now = cancelled;
        }
        if (now) s.request_stop();  // the cancel may have run before the source existed
        return s.get_token();
    }

    struct on_stop {
        cancel_state* s;
        void operator()() const noexcept { cancel_tree(s); }
    };
#endif

    std::mutex lock;
    bool cancelled = false;  // under lock; decides who cancels the children
    sync::gate gate;         // open once cancelled: what waiters and is_cancelled() see
    std::vector<std::weak_ptr<cancel_state>> children;
    std::size_t sweep_at = 8;
#if ASPEN_HAS_STOP_TOKEN
    std::optional<std::stop_source> source;  // made on demand by stop_token()
    // Last, so it is destroyed first: its destructor waits for a callback
    // running on another thread, which still uses the members above.
    std::optional<std::stop_callback<on_stop>> from_std;
#endif

private:
    static void cancel_one(cancel_state* s, std::vector<std::shared_ptr<cancel_state>>& work) noexcept {
        std::vector<std::weak_ptr<cancel_state>> kids;
#if ASPEN_HAS_STOP_TOKEN
        std::optional<std::stop_source> src;
#endif
        {
            std::lock_guard g(s->lock);
            if (s->cancelled) return;
            s->cancelled = true;
            kids.swap(s->children);
#if ASPEN_HAS_STOP_TOKEN
            src = s->source;
#endif
        }
        s->gate.open();
        for (auto& k : kids)
            if (auto c = k.lock()) work.push_back(std::move(c));
#if ASPEN_HAS_STOP_TOKEN
        if (src) src->request_stop();
#endif
    }
};

task<bool> complete_or_cancelled(task_header* t, const cancellation_token& token) {
    cancelled_awaitable c = token.cancelled();
    co_return co_await poll_fn([&](context& cx) -> poll<bool> {
        if (!register_join_waker(t, cx.waker())) return ready(true);
        if (c.poll_as_branch(cx)) return ready(false);
        return pending;
    });
}

}  // namespace aspen::detail

namespace aspen {

cancelled_awaitable::cancelled_awaitable(std::shared_ptr<detail::cancel_state> s) noexcept
    : state_(std::move(s)), wait_(state_->gate.wait()) {}

cancellation_token::cancellation_token() : state_(std::make_shared<detail::cancel_state>()) {}

#if ASPEN_HAS_STOP_TOKEN
cancellation_token::cancellation_token(std::stop_token st) : cancellation_token() {
    if (st.stop_possible()) state_->from_std.emplace(std::move(st), detail::cancel_state::on_stop{state_.get()});
}
#endif

void cancellation_token::cancel() noexcept { detail::cancel_state::cancel_tree(state_.get()); }

bool cancellation_token::is_cancelled() const noexcept { return state_->gate.is_open(); }

cancellation_token cancellation_token::child() const {
    cancellation_token c;
    state_->add_child(c.state_);
    return c;
}

#if ASPEN_HAS_STOP_TOKEN
std::stop_token cancellation_token::stop_token() const { return state_->get_stop_token(); }
#endif

std::size_t cancellation_token::waiter_count() const { return state_->gate.waiter_count(); }

}  // namespace aspen
