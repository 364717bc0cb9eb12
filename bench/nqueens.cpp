// nqueens: count the placements of 12 non-attacking queens. One task per
// safe partial placement; each gets its own copy of the board.
#include "bench.hpp"

#include <oneapi/tbb/task_group.h>

#include <array>

namespace bench {
namespace {

constexpr int max_n = 12;
constexpr int queens = 12;
constexpr std::int64_t solutions_12 = 14200;

// board[r] = column of the queen in row r, for rows < the current row.
using board = std::array<char, max_n>;

bool safe(const board& b, int row, int col) {
    for (int r = 0; r < row; ++r) {
        const int c = b[r];
        if (c == col || c - col == row - r || col - c == row - r) return false;
    }
    return true;
}

aspen::task<std::int64_t> solve(board b, int row, int n) {
    if (row == n) co_return 1;
    std::array<aspen::join_handle<std::int64_t>, max_n> children;
    int count = 0;
    for (int col = 0; col < n; ++col) {
        if (!safe(b, row, col)) continue;
        board next = b;
        next[row] = static_cast<char>(col);
        children[count++] = aspen::spawn(solve(next, row + 1, n));
    }
    std::int64_t total = 0;
    for (int i = 0; i < count; ++i) total += co_await children[i];
    co_return total;
}

// The same search with every spawn replaced by an inline co_await (see
// "inline" in bench.hpp).
aspen::task<std::int64_t> solve_inline(board b, int row, int n) {
    if (row == n) co_return 1;
    std::int64_t total = 0;
    for (int col = 0; col < n; ++col) {
        if (!safe(b, row, col)) continue;
        board next = b;
        next[row] = static_cast<char>(col);
        total += co_await solve_inline(next, row + 1, n);
    }
    co_return total;
}

std::int64_t tbb_solve(board b, int row, int n) {
    if (row == n) return 1;
    std::array<std::int64_t, max_n> results{};
    tbb::task_group tg;
    for (int col = 0; col < n; ++col) {
        if (!safe(b, row, col)) continue;
        board next = b;
        next[row] = static_cast<char>(col);
        tg.run([&results, next, row, col, n] { results[col] = tbb_solve(next, row + 1, n); });
    }
    tg.wait();
    std::int64_t total = 0;
    for (std::int64_t r : results) total += r;
    return total;
}

std::int64_t serial_solve(board b, int row, int n) {
    if (row == n) return 1;
    std::int64_t total = 0;
    for (int col = 0; col < n; ++col) {
        if (!safe(b, row, col)) continue;
        board next = b;
        next[row] = static_cast<char>(col);
        total += serial_solve(next, row + 1, n);
    }
    return total;
}

std::int64_t run_aspen(aspen::runtime& rt) { return rt.block_on(solve(board{}, 0, queens)); }

std::int64_t run_aspen_inline(aspen::runtime& rt) { return rt.block_on(solve_inline(board{}, 0, queens)); }

std::int64_t run_tbb(tbb_arenas& arenas) {
    return arenas.local.execute([] { return tbb_solve(board{}, 0, opaque(queens)); });
}

std::int64_t run_serial() { return serial_solve(board{}, 0, opaque(queens)); }

}  // namespace

workload nqueens_workload() {
    workload w{"nqueens", std::to_string(queens), solutions_12, &run_aspen, &run_tbb, &run_serial};
    w.aspen_inline = &run_aspen_inline;
    return w;
}

}  // namespace bench
