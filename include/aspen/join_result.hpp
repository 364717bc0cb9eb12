// join_result<T>: how a child task ended, as a value, as Tokio's
// Result<T, JoinError>: the child's id and its value, its exception or its
// cancellation, without throwing until the value is asked for. What
// join_set::next_result() gives:
//
//   while (std::optional<aspen::join_result<int>> r = co_await set.next_result()) {
//       if (r->ok()) use(r->id(), r->value());
//       else log(r->id(), r->is_cancelled() ? "aborted" : "failed");
//   }
//
// ok(): the child returned; value() gives it (std::monostate for void).
// is_error(): the child threw (Tokio's is_panic); error() is the exception.
// is_cancelled(): the child was aborted before it finished; error() is null.
// value() on a failed result rethrows the child's exception, on a cancelled
// one it throws task_cancelled: what next() would have thrown.
#pragma once

#include <aspen/detail/combinator.hpp>
#include <aspen/errors.hpp>
#include <aspen/task_id.hpp>

#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

namespace aspen {

template <class T>
class join_result {
public:
    using value_type = detail::or_monostate<T>;

    join_result(task_id id, std::optional<value_type> value, std::exception_ptr error,
                bool cancelled) noexcept(std::is_nothrow_move_constructible_v<value_type>)
        : id_(id), value_(std::move(value)), error_(std::move(error)), cancelled_(cancelled) {}

    task_id id() const noexcept { return id_; }
    bool ok() const noexcept { return !cancelled_ && !error_; }
    bool is_error() const noexcept { return !cancelled_ && error_; }
    bool is_cancelled() const noexcept { return cancelled_; }
    std::exception_ptr error() const noexcept { return cancelled_ ? nullptr : error_; }

    value_type& value() & {
        check();
        return *value_;
    }
    const value_type& value() const& {
        check();
        return *value_;
    }
    value_type&& value() && {
        check();
        return std::move(*value_);
    }

private:
    void check() const {
        if (cancelled_) throw task_cancelled();
        if (error_) std::rethrow_exception(error_);
    }

    task_id id_;
    std::optional<value_type> value_;
    std::exception_ptr error_;
    bool cancelled_;
};

}  // namespace aspen
