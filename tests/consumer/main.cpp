// The README's example shape: a runtime, block_on, spawn and join; then
// deep chains of synchronous completions, which stay off the stack only if
// this program's own coroutines make symmetric transfer a tail call (the
// flag aspen::aspen passes to g++: see CMakeLists.txt). run.cmake builds it
// as Release and, with g++, as Debug (-O0), where g++ alone would not.
#include <aspen/aspen.hpp>

#include <cstdint>
#include <cstdio>

aspen::task<std::int64_t> fib(int n) {
    if (n < 2) co_return n;
    aspen::join_handle<std::int64_t> h = aspen::spawn(fib(n - 1));
    std::int64_t b = co_await fib(n - 2);
    co_return co_await h + b;
}

aspen::task<std::int64_t> one() { co_return 1; }

aspen::task<std::int64_t> in_a_loop(int count) {
    std::int64_t sum = 0;
    for (int i = 0; i < count; ++i) sum += co_await one();
    co_return sum;
}

aspen::task<std::int64_t> nested(int depth) {
    if (depth == 0) co_return 0;
    co_return 1 + co_await nested(depth - 1);
}

int main() {
    aspen::runtime rt;
    std::printf("consumer: fib(25) = %lld\n", static_cast<long long>(rt.block_on(fib(25))));
    std::printf("consumer: chains %lld %lld\n", static_cast<long long>(rt.block_on(in_a_loop(1'000'000))),
                static_cast<long long>(rt.block_on(nested(1'000'000))));
}
