// task_local<T>: a value bound for the run of some code of one task, as
// Tokio's task_local! (a request id, a tracing span, a deadline that deep
// callees read without passing it down).
//
//   inline aspen::task_local<std::string> request_id;   // a key: one per program
//
//   aspen::task<void> handle(aspen::tcp_stream s) {
//       aspen::task<void> scoped = request_id.scope(next_id(), serve(std::move(s)));
//       co_await std::move(scoped);   // serve() and all it awaits inline see it
//   }
//   ... deep inside serve():  log(request_id.get());
//
// scope(value, body) gives a task that runs body with the key bound to
// value, in the task that awaits it: body and every task it awaits inline
// see the value through get(), also after they waited and resumed on
// another worker. The value lives in the scope's frame and is destroyed
// when body ends. Scopes nest: an inner scope of the same key hides the
// outer one until it ends. sync_scope(value, f) binds it around a plain
// call, in a task or on any thread.
//
// Not inherited: a spawned task starts with no bindings, as in Tokio. In
// aspen that includes what runs its operands as tasks of their own:
// when_all, when_any, join_set, task_group, the parallel algorithms,
// spawn_blocking, and timeout(d, task) (a child task, aborted on
// time-out; a child that could read its parent's bindings would race with
// the parent's frame going away when the parent is aborted). Bind in the
// child instead: `aspen::spawn(request_id.scope(id, work()))`, or
// `timeout(1s, request_id.scope(request_id.get(), work()))` (a copy).
// A block_in_place function is no child: it runs within its task's poll
// and sees the task's bindings, as in Tokio.
// Only tasks are scoped; a leaf operation (a read, a sleep) reads no
// bindings.
//
// get() outside any scope of the key throws std::logic_error; try_get()
// gives nullptr there. A binding belongs to one task, which runs on one
// thread at a time, so get() needs no lock, and T& may be changed in place.
//
// How it works: a binding is a node in the scope's frame, pushed on a list
// whose head is in the current task's header (outside tasks: a thread's
// head), and popped when the scope's frame ends or is destroyed (abort,
// shutdown). A task's awaits are strictly nested, so the list is a stack.
// get() walks it: cheap for the few bindings a task has.
#pragma once

#include <aspen/task.hpp>

#include <stdexcept>
#include <type_traits>
#include <utility>

namespace aspen {

namespace detail {

struct local_binding {
    const void* key;
    void* value;
    local_binding* prev;
};

// The list head of the running task (its header's), or of this thread
// outside tasks.
local_binding** current_bindings() noexcept;
void* find_local(const void* key) noexcept;

// Binds for its own lifetime. Pops from the head it pushed on, not from
// whatever task is current then: a frame destroyed by abort or shutdown
// runs this with no current task.
class local_scope {
public:
    local_scope(const void* key, void* value) noexcept : head_(current_bindings()), binding_{key, value, *head_} {
        *head_ = &binding_;
    }
    ~local_scope() { *head_ = binding_.prev; }
    local_scope(const local_scope&) = delete;
    local_scope& operator=(const local_scope&) = delete;

private:
    local_binding** head_;
    local_binding binding_;
};

}  // namespace detail

template <class T>
class task_local {
    static_assert(std::is_object_v<T> && !std::is_const_v<T>, "task_local<T> needs a non-const object type");

public:
    constexpr task_local() noexcept = default;
    task_local(const task_local&) = delete;
    task_local& operator=(const task_local&) = delete;

    // Runs body with this key bound to value, in the awaiting task.
    template <class U>
    task<U> scope(T value, task<U> body) const {
        return run_scoped(this, std::move(value), std::move(body));
    }

    // Calls f() with this key bound to value.
    template <class F>
    decltype(auto) sync_scope(T value, F&& f) const {
        detail::local_scope bound(this, std::addressof(value));
        return std::forward<F>(f)();
    }

    T& get() const {
        if (T* v = try_get()) return *v;
        throw std::logic_error("aspen::task_local: get() outside a scope of this key (not set in this task; "
                               "spawned tasks do not inherit bindings)");
    }
    T* try_get() const noexcept { return static_cast<T*>(detail::find_local(this)); }

private:
    template <class U>
    static task<U> run_scoped(const task_local* key, T value, task<U> body) {
        // Bound before body moves into a local, so that when this frame is
        // destroyed mid-way (abort, shutdown) body's frame, and the scopes
        // inside it, go first: the list is popped in reverse push order.
        detail::local_scope bound(key, std::addressof(value));
        task<U> inner = std::move(body);
        co_return co_await std::move(inner);
    }
};

}  // namespace aspen
