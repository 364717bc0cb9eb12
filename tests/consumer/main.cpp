// The README's example shape: a runtime, block_on, spawn and join.
#include <aspen/aspen.hpp>

#include <cstdint>
#include <cstdio>

aspen::task<std::int64_t> fib(int n) {
    if (n < 2) co_return n;
    aspen::join_handle<std::int64_t> h = aspen::spawn(fib(n - 1));
    std::int64_t b = co_await fib(n - 2);
    co_return co_await h + b;
}

int main() {
    aspen::runtime rt;
    std::printf("consumer: fib(25) = %lld\n", static_cast<long long>(rt.block_on(fib(25))));
}
