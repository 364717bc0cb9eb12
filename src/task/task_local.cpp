// Where task_local bindings live (aspen/task_local.hpp explains them).
#include "scheduler/scheduler.hpp"

#include <aspen/task_local.hpp>

#include <utility>

namespace aspen::detail {

namespace {
// Outside any task (a plain thread, a blocking-pool job, block_on's
// caller): sync_scope binds here.
thread_local constinit local_binding* thread_bindings = nullptr;
}  // namespace

local_binding** current_bindings() noexcept {
    // Only a spawned task's header is ever current (inline-awaited frames
    // run as part of the task that awaits them), and build_spawned_header
    // gave it an empty list.
    if (task_header* t = tls_context.current) return &t->locals;
    return &thread_bindings;
}

local_binding* exchange_thread_bindings(local_binding* head) noexcept {
    return std::exchange(thread_bindings, head);
}

void* find_local(const void* key) noexcept {
    for (local_binding* b = *current_bindings(); b; b = b->prev)
        if (b->key == key) return b->value;
    return nullptr;
}

}  // namespace aspen::detail
