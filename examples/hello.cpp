// hello: the smallest aspen program. block_on runs a task from main();
// inside a task, spawn starts another task in parallel and co_await joins it.
#include <aspen/aspen.hpp>

#include <cstdio>

aspen::task<int> square(int x) { co_return x * x; }

aspen::task<int> hello() {
    std::puts("hello from a task");
    aspen::join_handle<int> h = aspen::spawn(square(7));  // runs in parallel
    int here = co_await square(6);                        // runs inline, right here
    int there = co_await h;                               // waits for the spawned task
    co_return here + there;
}

int main() {
    aspen::runtime rt;  // one worker thread per hardware thread
    int sum = rt.block_on(hello());
    std::printf("6*6 + 7*7 = %d\n", sum);
    return sum == 85 ? 0 : 1;
}
