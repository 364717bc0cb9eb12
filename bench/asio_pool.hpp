// The Asio peer's runtime: one io_context per thread (Asio's recommended
// multi-core layout), each kept running by a work guard, created once per
// worker count outside the timed region like aspen's runtime.
#pragma once

// Asio 1.22 recognises C++20 coroutines on clang only through the old
// __cpp_coroutines macro, which clang 19 no longer defines; it supports
// them (and <coroutine>) all the same.
#if defined(__clang__) && !defined(ASIO_HAS_CO_AWAIT) && defined(__cpp_impl_coroutine)
#define ASIO_HAS_CO_AWAIT 1
#endif

#include <asio.hpp>

#include <atomic>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

namespace bench {

class asio_pool {
public:
    explicit asio_pool(std::size_t threads) {
        for (std::size_t i = 0; i < threads; ++i) {
            contexts_.push_back(std::make_unique<asio::io_context>(1));  // hint: one thread runs it
            guards_.emplace_back(asio::make_work_guard(*contexts_.back()));
        }
        for (auto& ctx : contexts_) threads_.emplace_back([c = ctx.get()] { c->run(); });
    }
    ~asio_pool() {
        guards_.clear();  // let run() return once the contexts are idle
        for (auto& ctx : contexts_) ctx->stop();
        for (auto& t : threads_) t.join();
    }
    asio_pool(const asio_pool&) = delete;
    asio_pool& operator=(const asio_pool&) = delete;

    // Round-robin over the contexts (any thread).
    asio::io_context& next() noexcept {
        // relaxed: only spreads work; no data is published through it.
        return *contexts_[next_.fetch_add(1, std::memory_order_relaxed) % contexts_.size()];
    }

private:
    std::vector<std::unique_ptr<asio::io_context>> contexts_;
    std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
    std::vector<std::thread> threads_;
    std::atomic<std::size_t> next_{0};
};

}  // namespace bench
