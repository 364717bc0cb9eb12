#include "scheduler/thread_cache.hpp"

#include "blocking/keep_alive.hpp"

#include <algorithm>
#include <utility>

namespace aspen::detail {

void thread_cache::start(job& j) {
    std::lock_guard lock(m_);
    join_exited();
    if (!idle_.empty()) {
        slot* s = idle_.back();
        idle_.pop_back();
        s->next = &j;
        s->cv.notify_one();
        return;
    }
    // Everything that may throw comes before the new thread is listed.
    idle_.reserve(slots_.size() + 1);
    slots_.reserve(slots_.size() + 1);
    auto s = std::make_unique<slot>();
    s->next = &j;
    // It waits for m_ (held) before it reads anything of the slot.
    s->thread = std::thread(&thread_cache::thread_main, this, s.get());
    slots_.push_back(std::move(s));
}

bool thread_cache::retract(job& j) noexcept {
    std::lock_guard lock(m_);
    for (auto& s : slots_) {
        if (s->next != &j) continue;
        s->next = nullptr;
        idle_.push_back(s.get());  // within the reserved capacity
        return true;
    }
    return false;
}

void thread_cache::thread_main(slot* s) {
    std::unique_lock lock(m_);
    for (;;) {
        if (job* j = std::exchange(s->next, nullptr)) {
            lock.unlock();
            j->fn(j->arg);
            lock.lock();
            // Listed before the owner hears of the end, so that the owner's
            // next start() finds this thread (within the reserved capacity).
            if (!closed_) idle_.push_back(s);
            lock.unlock();
            j->done.release();  // the job's last touch: its owner may free it
            lock.lock();
            continue;
        }
        if (closed_) break;
        if (s->cv.wait_for(lock, bounded_keep_alive(keep_alive_), [&] { return s->next || closed_; })) continue;
        // Idle for keep_alive with no job given: leave (start() can no
        // longer pick this slot once it is off idle_).
        idle_.erase(std::find(idle_.begin(), idle_.end(), s));
        break;
    }
    s->exited = true;
}

void thread_cache::join_exited() {
    // A thread marks itself exited under m_ and then only returns.
    auto ended = std::partition(slots_.begin(), slots_.end(), [](const auto& s) { return !s->exited; });
    for (auto it = ended; it != slots_.end(); ++it) (*it)->thread.join();
    slots_.erase(ended, slots_.end());
}

void thread_cache::close() noexcept {
    std::vector<std::unique_ptr<slot>> all;
    {
        std::lock_guard lock(m_);
        closed_ = true;
        for (auto& s : slots_) s->cv.notify_one();
        all = std::move(slots_);
        slots_.clear();
        idle_.clear();
    }
    for (auto& s : all) s->thread.join();
}

}  // namespace aspen::detail
