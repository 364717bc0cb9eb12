// Everything at once.
#pragma once

#include <aspen/async_fd.hpp>
#include <aspen/cancellation_token.hpp>
#include <aspen/config.hpp>
#include <aspen/coop.hpp>
#include <aspen/current_thread_runtime.hpp>
#include <aspen/errors.hpp>
#include <aspen/join_handle.hpp>
#include <aspen/join_set.hpp>
#include <aspen/metrics.hpp>
#include <aspen/net/all.hpp>
#include <aspen/pipe.hpp>
#include <aspen/poll.hpp>
#include <aspen/process.hpp>
#include <aspen/runtime.hpp>
#include <aspen/select.hpp>
#include <aspen/signal.hpp>
#include <aspen/spawn.hpp>
#include <aspen/spawn_blocking.hpp>
#include <aspen/sync/all.hpp>
#include <aspen/task.hpp>
#include <aspen/time.hpp>
#include <aspen/waker.hpp>
#include <aspen/when_all.hpp>
#include <aspen/when_any.hpp>
#include <aspen/yield.hpp>
