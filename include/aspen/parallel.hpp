// Parallel algorithms over the runtime's workers, as oneTBB's parallel_for,
// parallel_reduce, parallel_invoke and parallel_sort, awaited from a task:
//
//   co_await aspen::parallel_for(std::size_t{0}, n, [&](std::size_t i) { out[i] = f(in[i]); });
//   double sum = co_await aspen::parallel_reduce(
//       std::size_t{0}, n, 0.0,
//       [&](std::size_t lo, std::size_t hi) { double s = 0; while (lo < hi) s += x[lo++]; return s; },
//       std::plus<>());
//   co_await aspen::parallel_sort(v.begin(), v.end());
//   co_await aspen::parallel_invoke([&] { left(); }, [&] { right(); });
//
// From ordinary code: rt.block_on(aspen::parallel_for(...)).
//
// With g++ 12, a body whose captures own something (a shared_ptr, a
// vector moved in) must be named before the co_await line
// (`auto body = [v = std::move(v)](int i) {...}; co_await
// aspen::parallel_for(0, n, std::move(body));`): g++ 12 destroys such a
// lambda twice when it is written inside the co_await (README, "Compiler
// caveats"). Bodies capturing by reference are not affected.
//
// Chunks. An index range of n is cut into chunks of consecutive indices,
// fixed before anything runs: with a `grain` of g, ceil(n / g) chunks of at
// most g indices each (sizes differ by at most one); with grain 0 (the
// default), 16 chunks per worker, or a single chunk on a one-worker runtime.
// The awaiting task runs the first chunk; the others are spawned as
// detached tasks that split their share in halves (the upper half spawned,
// made stealable at once), so an idle worker steals the largest piece left.
// The await ends when every chunk has ended.
//
// parallel_reduce combines the chunks' results in index order, left to
// right, starting from `identity`: with an explicit grain its result is the
// same for every worker count and every run, floating point included.
// `combine` must be associative.
//
// Errors. The first exception a body (or sort's comparator) throws is
// rethrown by the await once every chunk already running has ended; chunks
// not started by then are skipped. Bodies are called on several threads at
// once (each index once), through one copy of the function object.
//
// Async bodies. A body of parallel_for, parallel_for_chunks,
// parallel_for_each or parallel_invoke, and the chunk function of
// parallel_reduce (a task<U>, U convertible to T), may return an
// aspen::task, which the chunk awaits before its next index: the body can
// then co_await anything, a nested parallel call included:
//
//   co_await aspen::parallel_for(0, rows, [&](int r) -> aspen::task<void> {
//       co_await aspen::parallel_for(0, cols, [&](int c) { cell(r, c); });
//   });
//
// A chunk that waits keeps its worker free for other tasks meanwhile.
//
// Cancellation. If the awaiting task is aborted (or destroyed by shutdown),
// chunks not started are skipped, but a chunk already running goes on (a
// plain body cannot be interrupted; an async body on another worker runs
// until it ends or the runtime shuts down; only the caller's own chunk
// stops with it). Data a body uses must outlive it, as with
// task_group::scope.
#pragma once

#include <aspen/detail/fork_block.hpp>
#include <aspen/task.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <functional>
#include <iterator>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace aspen {

// The number of worker threads of the runtime running the calling task (1
// on a current_thread_runtime). std::logic_error outside a runtime.
inline std::size_t current_worker_count() { return detail::current_parallelism(); }

namespace detail::par {

// How many chunks n indices are cut into (see "Chunks" above). At most 2^31:
// a block counts its pieces in 32 bits.
inline std::size_t chunk_count(std::size_t n, std::size_t grain) {
    if (n == 0) return 0;
    std::size_t c = 1;
    if (grain) {
        c = n / grain + (n % grain != 0);
    } else if (const std::size_t workers = current_parallelism(); workers > 1) {
        c = std::min(n, workers * 16);
    }
    return std::min<std::size_t>(c, std::size_t{1} << 31);
}

// Chunk k of n indices cut into `chunks`: [begin(k), begin(k + 1)).
struct chunking {
    std::size_t quotient, remainder;
    chunking(std::size_t n, std::size_t chunks) noexcept : quotient(n / chunks), remainder(n % chunks) {}
    std::size_t begin(std::size_t k) const noexcept { return k * quotient + std::min(k, remainder); }
};

template <class I>
using index_unsigned = std::make_unsigned_t<I>;

// The number of indices in [first, last), 0 if last <= first.
template <std::integral I>
std::size_t index_span(I first, I last) noexcept {
    if (last <= first) return 0;
    return static_cast<std::size_t>(static_cast<index_unsigned<I>>(last) - static_cast<index_unsigned<I>>(first));
}

template <std::integral I>
I index_at(I first, std::size_t offset) noexcept {
    return static_cast<I>(static_cast<index_unsigned<I>>(first) + static_cast<index_unsigned<I>>(offset));
}

// True for aspen::task<T>: a body returning one is awaited (an async body).
template <class R>
inline constexpr bool is_task_v = false;
template <class T>
inline constexpr bool is_task_v<task<T>> = true;

template <class F, class... A>
inline constexpr bool returns_task_v = is_task_v<std::invoke_result_t<F&, A...>>;

// A block whose pieces each run one chunk, by number: body(k), a plain call
// or, when it returns a task, awaited by the piece (run_piece picks run or
// run_async by what the job has).
template <class Body>
class chunk_job final : public fork_block {
public:
    static constexpr bool async = returns_task_v<Body, std::size_t>;
    using range = std::pair<std::size_t, std::size_t>;

    explicit chunk_job(Body body) : body_(std::move(body)) {}

    // Chunks [lo, hi): spawns the upper halves, runs chunk lo.
    void run(range r) noexcept
        requires(!async)
    {
        try {
            if (std::optional<std::size_t> k = split(r)) body_(*k);
        } catch (...) {
            fail(std::current_exception());
        }
    }

    task<void> run_async(range r)
        requires async
    {
        try {
            const std::optional<std::size_t> k = split(r);
            if (k) co_await body_(*k);
        } catch (...) {
            fail(std::current_exception());
        }
    }

    Body& body() noexcept { return body_; }

private:
    // Spawns the upper halves of [lo, hi), made stealable at once; gives the
    // one chunk left to run here, unless the block is stopping.
    std::optional<std::size_t> split(range r) {
        auto [lo, hi] = r;
        const bool spawns = hi - lo > 1;
        while (hi - lo > 1 && !stopping()) {
            const std::size_t mid = lo + (hi - lo) / 2;
            spawn_piece(*this, range{mid, hi});
            hi = mid;
        }
        if (spawns) publish_local_spawns();
        if (stopping()) return std::nullopt;
        return lo;
    }

    Body body_;
};

// Runs body(k) for every chunk k < chunks, the first on the calling task,
// then gives the body back (with whatever the chunks left in it). The body
// lives in the block, not in this frame, so a piece still running after an
// abort of the caller never touches freed memory.
template <class Body>
task<Body> run_chunks(std::size_t chunks, Body body) {
    using job_type = chunk_job<Body>;
    if (chunks <= 1) {  // nothing to share: no block, no spawn
        if constexpr (job_type::async) {
            if (chunks == 1) co_await body(0);
        } else {
            if (chunks == 1) body(0);
        }
        co_return std::move(body);
    }
    auto* job = new job_type(std::move(body));
    root_guard guard(job);
    if constexpr (job_type::async)
        co_await job->run_async({0, chunks});
    else
        job->run({0, chunks});
    co_await guard.wait();
    co_return std::move(job->body());  // every piece has ended: ours alone
}

// Awaits f(i) for i in [lo, hi), one after another; f lives in the block.
template <class F, class I>
task<void> await_each(F& f, I lo, I hi) {
    for (I i = lo; i != hi; ++i) co_await f(i);
}

// Calls f(args...) and, when it returns a task, awaits it: lets one
// coroutine serve plain and async bodies.
template <class F, class... A>
task<void> call_or_await(F& f, A... args) {
    if constexpr (returns_task_v<F, A...>)
        co_await f(args...);
    else
        f(args...);
    co_return;  // a coroutine whichever branch is kept
}

// What a reduce chunk gives: its result, or what the task it returns gives.
template <class R>
struct awaited_value {
    using type = R;
};
template <class U>
struct awaited_value<task<U>> {
    using type = U;
};
template <class Chunk, class I>
using chunk_value_t = typename awaited_value<std::invoke_result_t<Chunk&, I, I>>::type;

// parallel_reduce's body: one result slot per chunk. With an async chunk
// function the body returns a task too (chunk_job then awaits it).
template <class I, class T, class Chunk>
struct reduce_body {
    I first;
    chunking cut;
    Chunk chunk;
    std::vector<std::optional<T>> partial;

    auto operator()(std::size_t k) {
        if constexpr (returns_task_v<Chunk, I, I>) return store_awaited(k);
        else partial[k].emplace(chunk(index_at(first, cut.begin(k)), index_at(first, cut.begin(k + 1))));
    }

private:
    task<void> store_awaited(std::size_t k) {
        chunk_value_t<Chunk, I> v = co_await chunk(index_at(first, cut.begin(k)), index_at(first, cut.begin(k + 1)));
        partial[k].emplace(std::move(v));
    }
};

// parallel_sort's block: a quicksort whose pieces are the upper parts of
// each partition; parts under `serial_below` elements (or past the depth
// limit, against adversarial inputs) go to std::sort.
template <class It, class Comp>
class sort_job final : public fork_block {
public:
    static constexpr std::iter_difference_t<It> serial_below = 2048;

    struct range {
        It first, last;
        int depth;  // partitions left before std::sort takes over
    };

    explicit sort_job(Comp comp) : comp_(std::move(comp)) {}

    void run(range r) noexcept {
        try {
            sort(r);
        } catch (...) {
            fail(std::current_exception());
        }
    }

private:
    void sort(range r) {
        while (r.last - r.first > serial_below && r.depth > 0 && !stopping()) {
            --r.depth;
            auto [equal_first, greater_first] = partition(r.first, r.last);
            if (r.last - greater_first > serial_below) {
                spawn_piece(*this, range{greater_first, r.last, r.depth});
                publish_local_spawns();  // the partition ahead is long
            } else {
                std::sort(greater_first, r.last, comp_);
            }
            r.last = equal_first;
        }
        if (!stopping()) std::sort(r.first, r.last, comp_);
    }

    // Partition around the median of the first, middle and last elements:
    // returns where the elements known to be equivalent to it begin and end
    // (they are in their final place). When few elements fall below the
    // pivot, many may equal it, so a second pass gathers those: all-equal
    // or few distinct keys then take few rounds; distinct keys skip the pass.
    std::pair<It, It> partition(It first, It last) {
        median_to_front(first, first + (last - first) / 2, last - 1);
        const auto& pivot = *first;  // stays put while the rest moves
        It less_end = std::partition(first + 1, last, [&](const auto& x) { return comp_(x, pivot); });
        It equal_end = less_end;
        if (less_end - first <= (last - first) / 16)
            equal_end = std::partition(less_end, last, [&](const auto& x) { return !comp_(pivot, x); });
        std::iter_swap(first, less_end - 1);
        return {less_end - 1, equal_end};
    }

    void median_to_front(It a, It b, It c) {
        It m;
        if (comp_(*a, *b))
            m = comp_(*b, *c) ? b : (comp_(*a, *c) ? c : a);
        else
            m = comp_(*a, *c) ? a : (comp_(*b, *c) ? c : b);
        std::iter_swap(a, m);
    }

    Comp comp_;
};

}  // namespace detail::par

// Calls f(lo, hi) once per chunk: [lo, hi) are consecutive indices of
// [first, last), every index in exactly one call (see "Chunks"). f may
// return a task, which is awaited ("Async bodies").
template <std::integral I, class F>
    requires std::invocable<F&, I, I>
task<void> parallel_for_chunks(I first, I last, F f, std::size_t grain = 0) {
    const std::size_t n = detail::par::index_span(first, last);
    const std::size_t chunks = detail::par::chunk_count(n, grain);
    if (chunks == 0) co_return;
    const detail::par::chunking cut(n, chunks);
    // Named, not a temporary in the co_await (README, "Compiler caveats").
    auto body = [first, cut, f = std::move(f)](std::size_t k) mutable {
        return f(detail::par::index_at(first, cut.begin(k)), detail::par::index_at(first, cut.begin(k + 1)));
    };
    co_await detail::par::run_chunks(chunks, std::move(body));
}

// Calls f(i) for every i in [first, last), in parallel. f may return a
// task, which is awaited ("Async bodies").
template <std::integral I, class F>
    requires std::invocable<F&, I>
task<void> parallel_for(I first, I last, F f, std::size_t grain = 0) {
    if constexpr (detail::par::returns_task_v<F, I>) {
        // The chunk's task refers to f where the block keeps it.
        auto chunk = [f = std::move(f)](I lo, I hi) mutable { return detail::par::await_each(f, lo, hi); };
        co_await parallel_for_chunks(first, last, std::move(chunk), grain);
    } else {
        auto chunk = [f = std::move(f)](I lo, I hi) mutable {
            for (I i = lo; i != hi; ++i) f(i);
        };
        co_await parallel_for_chunks(first, last, std::move(chunk), grain);
    }
}

// Calls f(*it) for every it in [first, last), in parallel. f may return a
// task, which is awaited ("Async bodies").
template <std::random_access_iterator It, class F>
    requires std::invocable<F&, std::iter_reference_t<It>>
task<void> parallel_for_each(It first, It last, F f, std::size_t grain = 0) {
    using diff = std::iter_difference_t<It>;
    auto each = [first, f = std::move(f)](diff i) mutable { return f(first[i]); };
    co_await parallel_for(diff{0}, last - first, std::move(each), grain);
}

// Folds chunk(lo, hi) -> T over the chunks of [first, last) with combine,
// in index order, starting from identity (see "Chunks"):
// combine(...combine(combine(identity, r0), r1)..., r_last).
template <std::integral I, class T, class Chunk, class Combine>
    requires std::invocable<Chunk&, I, I> && std::convertible_to<detail::par::chunk_value_t<Chunk, I>, T> &&
             std::invocable<Combine&, T, T>
task<T> parallel_reduce(I first, I last, T identity, Chunk chunk, Combine combine, std::size_t grain = 0) {
    const std::size_t n = detail::par::index_span(first, last);
    const std::size_t chunks = detail::par::chunk_count(n, grain);
    if (chunks == 0) co_return identity;
    detail::par::reduce_body<I, T, Chunk> body{first, detail::par::chunking(n, chunks), std::move(chunk),
                                               std::vector<std::optional<T>>(chunks)};
    auto done = co_await detail::par::run_chunks(chunks, std::move(body));
    T result = std::move(identity);
    for (std::optional<T>& p : done.partial) result = combine(std::move(result), std::move(*p));
    co_return result;
}

// std::transform_reduce in parallel: reduce(init, transform(*it)...) over
// [first, last), folded in index order (reduce must be associative).
template <std::random_access_iterator It, class T, class Reduce, class Transform>
task<T> parallel_transform_reduce(It first, It last, T init, Reduce reduce, Transform transform,
                                  std::size_t grain = 0) {
    using diff = std::iter_difference_t<It>;
    auto chunk = [first, reduce, transform](diff lo, diff hi) {
        T acc = transform(first[lo]);
        for (diff i = lo + 1; i < hi; ++i) acc = reduce(std::move(acc), transform(first[i]));
        return acc;
    };
    co_return co_await parallel_reduce(diff{0}, last - first, std::move(init), std::move(chunk), std::move(reduce),
                                       grain);
}

namespace detail::par {

// parallel_invoke's async body: awaits fns' k-th function (a plain one is
// called).
template <std::size_t J, class Fns>
task<void> invoke_nth(Fns& fns, std::size_t k) {
    if (k == J) {
        co_await call_or_await(std::get<J>(fns));
    } else if constexpr (J + 1 < std::tuple_size_v<Fns>) {
        co_await invoke_nth<J + 1>(fns, k);
    }
}

}  // namespace detail::par

// Runs every f() in parallel (the first on the calling task); returns when
// all have returned. An f may return a task, which is awaited.
template <class... F>
    requires(std::invocable<F&> && ...)
task<void> parallel_invoke(F... fs) {
    using fns_type = std::tuple<F...>;
    if constexpr ((detail::par::returns_task_v<F> || ...)) {
        auto body = [fns = fns_type(std::move(fs)...)](std::size_t k) mutable {
            return detail::par::invoke_nth<0>(fns, k);
        };
        co_await detail::par::run_chunks(sizeof...(F), std::move(body));
    } else {
        auto body = [fns = fns_type(std::move(fs)...)](std::size_t k) mutable {
            [&]<std::size_t... J>(std::index_sequence<J...>) {
                ((k == J ? (void)std::get<J>(fns)() : void()), ...);
            }(std::index_sequence_for<F...>{});
        };
        co_await detail::par::run_chunks(sizeof...(F), std::move(body));
    }
}

// Sorts [first, last) by comp, in parallel (not stable; as std::sort).
// If comp throws, the exception is rethrown once every running piece has
// ended; the range is then in a valid but unspecified state, as std::sort
// leaves it (which may have lost the element it was moving).
template <std::random_access_iterator It, class Comp = std::less<>>
    requires std::sortable<It, Comp>
task<void> parallel_sort(It first, It last, Comp comp = {}) {
    using job = detail::par::sort_job<It, Comp>;
    const auto n = last - first;
    if (n <= job::serial_below || detail::current_parallelism() == 1) {
        std::sort(first, last, comp);
        co_return;
    }
    int depth = 0;
    for (auto m = n; m > 1; m /= 2) depth += 2;  // 2 log2(n), as introsort
    auto* j = new job(std::move(comp));
    detail::root_guard guard(j);
    j->run({first, last, depth});
    co_await guard.wait();
}

}  // namespace aspen
