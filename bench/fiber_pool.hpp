// aspen-bench: the Boost.Fiber peer's threads.
//
// fiber_pool(n) puts n threads on Boost.Fiber's work_stealing algorithm: the
// calling thread is one of them (like TBB's local arena), n - 1 helper
// threads are the others. A fiber launched on the calling thread goes to its
// queue and the helpers steal from it.
//
// work_stealing keeps its thread registry in statics sized by its first use
// (a barrier for exactly that many threads, a vector of that size) and
// cannot be set up a second time in one process. main.cpp therefore runs
// the fiber measurements of each worker count in a child process of its own.
#pragma once

#include <boost/fiber/condition_variable.hpp>
#include <boost/fiber/mutex.hpp>

#include <cstddef>
#include <thread>
#include <vector>

namespace bench {

class fiber_pool {
public:
    explicit fiber_pool(std::size_t workers);
    fiber_pool(const fiber_pool&) = delete;
    fiber_pool& operator=(const fiber_pool&) = delete;
    // Tells the helpers to stop once they have no fiber left to run, and
    // joins them.
    ~fiber_pool();

private:
    void helper(std::size_t workers);

    boost::fibers::mutex m_;
    boost::fibers::condition_variable stop_cv_;
    bool stop_ = false;
    std::vector<std::thread> helpers_;
};

// Ends the process with a message: a channel operation of a fiber peer failed
// (an exception cannot leave a fiber; Boost.Fiber would call terminate).
[[noreturn]] void fiber_failed(const char* what);

}  // namespace bench
