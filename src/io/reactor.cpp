// epoll reactor; the readiness protocol and the token scheme are described
// at the top of reactor.hpp.
#include "io/reactor.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace aspen::detail {

namespace {

constexpr std::size_t max_events = 1024;
constexpr std::uint64_t tick_one = std::uint64_t{1} << 32;

std::uint32_t tick_of(std::uint64_t state) noexcept { return static_cast<std::uint32_t>(state >> 32); }

std::uint32_t readiness_of(std::uint32_t events) noexcept {
    std::uint32_t r = 0;
    if (events & EPOLLIN) r |= ready::readable;
    if (events & EPOLLOUT) r |= ready::writable;
    if (events & EPOLLRDHUP) r |= ready::read_closed;
    if (events & EPOLLHUP) r |= ready::read_closed | ready::write_closed;
    if (events & EPOLLERR) r |= ready::error;
    return r;
}

[[noreturn]] void throw_errno(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

}  // namespace

registration::~registration() {
    if (owner_) owner_->deregister(*this);
}

reactor::reactor() : events_(max_events) {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) throw_errno("aspen reactor: epoll_create1");
    event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (event_fd_ < 0) {
        int err = errno;
        ::close(epoll_fd_);
        throw std::system_error(err, std::generic_category(), "aspen reactor: eventfd");
    }
    epoll_event ev{};
    // Edge-triggered like everything else; every write() is a new edge, and
    // dispatch drains the counter so it never saturates.
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u64 = wake_token;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, event_fd_, &ev) < 0) {
        int err = errno;
        ::close(event_fd_);
        ::close(epoll_fd_);
        throw std::system_error(err, std::generic_category(), "aspen reactor: epoll_ctl(eventfd)");
    }
    to_wake_.reserve(64);
}

reactor::~reactor() {
    // Registrations still alive lose their reactor; their destructors must
    // not call back into us.
    {
        std::lock_guard lock(table_mutex_);
        for (slot& s : slots_) {
            if (s.reg) s.reg->owner_ = nullptr;
        }
    }
    ::close(event_fd_);
    ::close(epoll_fd_);
}

void reactor::register_fd(int fd, registration& reg, std::uint32_t interest) {
    if (reg.owner_) throw std::logic_error("aspen reactor: registration is already registered");
    epoll_event ev{};
    ev.events = EPOLLET | EPOLLRDHUP;
    if (interest & ready::readable) ev.events |= EPOLLIN;
    if (interest & ready::writable) ev.events |= EPOLLOUT;

    std::lock_guard lock(table_mutex_);
    std::uint32_t index;
    if (!free_.empty()) {
        index = free_.back();
        free_.pop_back();
    } else {
        index = static_cast<std::uint32_t>(slots_.size());
        slots_.emplace_back();
    }
    slot& s = slots_[index];
    reg.fd_ = fd;
    reg.token_ = (std::uint64_t{s.generation} << 32) | index;
    // relaxed: nobody else can reach reg yet; table_mutex_ publishes it to
    // the dispatcher, and the owner's later polls are on its own thread or
    // ordered by however it hands the socket over.
    reg.state_.store(0, std::memory_order_relaxed);
    reg.owner_ = this;
    s.reg = &reg;
    registered_.fetch_add(1, std::memory_order_relaxed);  // a hint, see reactor.hpp
    ev.data.u64 = reg.token_;
    // Under table_mutex_: an event for this token (on a thread in
    // epoll_wait right now) can only be dispatched once we are done.
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int err = errno;
        s.reg = nullptr;
        ++s.generation;
        free_.push_back(index);
        registered_.fetch_sub(1, std::memory_order_relaxed);  // a hint, see reactor.hpp
        reg.owner_ = nullptr;
        reg.fd_ = -1;
        throw std::system_error(err, std::generic_category(), "aspen reactor: epoll_ctl(ADD)");
    }
}

void reactor::deregister(registration& reg) noexcept {
    if (reg.owner_ != this) return;
    // Errors ignored: if the fd was already closed (misuse) the kernel has
    // dropped it, or (dup'd fd) it keeps reporting under a token whose
    // generation no longer matches, which dispatch drops.
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, reg.fd_, nullptr);
    {
        std::lock_guard lock(table_mutex_);
        auto index = static_cast<std::uint32_t>(reg.token_ & 0xFFFFFFFFu);
        slot& s = slots_[index];
        s.reg = nullptr;
        ++s.generation;  // every token of the old registration is now stale
        free_.push_back(index);
        registered_.fetch_sub(1, std::memory_order_relaxed);  // a hint, see reactor.hpp
    }
    waker r, w;
    {
        std::lock_guard lock(reg.mutex_);
        r = std::move(reg.reader_);
        w = std::move(reg.writer_);
    }
    reg.owner_ = nullptr;
    reg.fd_ = -1;
    // r and w are dropped here, outside every lock.
}

ready_event reactor::poll_ready(registration& reg, direction d, const waker& w) {
    std::uint32_t mask = d == direction::read ? ready::read_mask : ready::write_mask;
    // relaxed: the bits describe kernel state, nothing is published through
    // them; the no-lost-wake argument rests on mutex_ and coherence (below).
    std::uint64_t s = reg.state_.load(std::memory_order_relaxed);
    if (auto bits = static_cast<std::uint32_t>(s) & mask) return {bits, tick_of(s)};

    waker old;
    {
        std::lock_guard lock(reg.mutex_);
        waker& stored = d == direction::read ? reg.reader_ : reg.writer_;
        if (!stored.will_wake(w)) old = std::exchange(stored, w);
    }
    // Re-check after storing: a dispatch whose locked section came before
    // ours did its state_ RMW before unlocking mutex_, which happens-before
    // our lock; read-after coherence makes this load see it (relaxed is
    // enough for that). A dispatch after ours finds the waker.
    s = reg.state_.load(std::memory_order_relaxed);
    if (auto bits = static_cast<std::uint32_t>(s) & mask) return {bits, tick_of(s)};
    return {};
    // `old` (a waker we replaced) is dropped here, outside the lock.
}

ready_event reactor::peek_ready(const registration& reg, direction d) noexcept {
    std::uint32_t mask = d == direction::read ? ready::read_mask : ready::write_mask;
    // relaxed: as poll_ready's first load (kernel-state flags, nothing is
    // published through them).
    std::uint64_t s = reg.state_.load(std::memory_order_relaxed);
    if (auto bits = static_cast<std::uint32_t>(s) & mask) return {bits, tick_of(s)};
    return {};
}

void reactor::clear_readiness(registration& reg, ready_event ev) noexcept {
    std::uint64_t clear = ev.ready & ~ready::sticky;
    // relaxed: only the modification order of state_ matters. The dispatch
    // bumps the tick in the same RMW that sets bits, so if it is ordered
    // before our CAS, the CAS sees another tick and leaves the bits alone.
    std::uint64_t cur = reg.state_.load(std::memory_order_relaxed);
    while (tick_of(cur) == ev.tick && (cur & clear) != 0) {
        if (reg.state_.compare_exchange_weak(cur, cur & ~clear, std::memory_order_relaxed,
                                             std::memory_order_relaxed))
            return;
    }
}

void reactor::drop_waker(registration& reg, direction d) noexcept {
    waker old;
    {
        std::lock_guard lock(reg.mutex_);
        old = std::move(d == direction::read ? reg.reader_ : reg.writer_);
    }
    // `old` is dropped here, outside the lock (see the thread rules).
}

void reactor::wake_waiters(registration& reg) noexcept {
    waker r, w;
    {
        std::lock_guard lock(reg.mutex_);
        r = std::move(reg.reader_);
        w = std::move(reg.writer_);
    }
    r.wake();  // outside the lock (see the thread rules)
    w.wake();
}

std::size_t reactor::wait(int timeout_ms) {
    int n = ::epoll_wait(epoll_fd_, events_.data(), static_cast<int>(events_.size()), timeout_ms);
    if (n < 0) {
        if (errno == EINTR) return 0;
        throw_errno("aspen reactor: epoll_wait");
    }
    return dispatch(events_.data(), n);
}

std::size_t reactor::dispatch(const epoll_event* events, int count) {
    if (count == 0) return 0;  // a poll that found nothing: no lock to take
    std::size_t delivered = 0;
    {
        std::lock_guard table(table_mutex_);
        for (int i = 0; i < count; ++i) {
            std::uint64_t token = events[i].data.u64;
            if (token == wake_token) {
                drain_eventfd();
                continue;
            }
            auto index = static_cast<std::uint32_t>(token & 0xFFFFFFFFu);
            auto generation = static_cast<std::uint32_t>(token >> 32);
            if (index >= slots_.size()) continue;
            slot& s = slots_[index];
            if (s.generation != generation || !s.reg) continue;  // stale: deregistered (maybe reused)
            registration& reg = *s.reg;
            std::uint32_t bits = readiness_of(events[i].events);
            // relaxed: see clear_readiness; the waker hand-off below is
            // ordered by mutex_, and this RMW is sequenced before it.
            std::uint64_t cur = reg.state_.load(std::memory_order_relaxed);
            while (!reg.state_.compare_exchange_weak(cur, (cur | bits) + tick_one,  // tick wraps mod 2^32
                                                     std::memory_order_relaxed, std::memory_order_relaxed)) {
            }
            {
                std::lock_guard lock(reg.mutex_);
                if ((bits & ready::read_mask) && reg.reader_) to_wake_.push_back(std::move(reg.reader_));
                if ((bits & ready::write_mask) && reg.writer_) to_wake_.push_back(std::move(reg.writer_));
            }
            ++delivered;
        }
    }
    // relaxed: a statistic; nothing is published through it. Once a
    // dispatch, not once an event.
    if (delivered != 0) ready_events_.fetch_add(delivered, std::memory_order_relaxed);
    for (waker& w : to_wake_) w.wake();
    to_wake_.clear();
    return delivered;
}

void reactor::wake() noexcept {
    std::uint64_t one = 1;
    // EAGAIN means the counter is saturated: a wake-up is pending anyway.
    while (::write(event_fd_, &one, sizeof one) < 0 && errno == EINTR) {
    }
}

void reactor::drain_eventfd() noexcept {
    std::uint64_t value;
    while (::read(event_fd_, &value, sizeof value) < 0 && errno == EINTR) {
    }
}

}  // namespace aspen::detail
