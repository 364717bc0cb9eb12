// Every sync primitive and channel at once: mutex, shared_mutex, semaphore,
// notify, once_cell, barrier, oneshot_channel, mpsc_channel / unbounded_channel,
// broadcast_channel, watch_channel, event, latch. Each header documents its
// semantics and its cancel safety at its top.
#pragma once

#include <aspen/sync/barrier.hpp>
#include <aspen/sync/broadcast.hpp>
#include <aspen/sync/event.hpp>
#include <aspen/sync/latch.hpp>
#include <aspen/sync/mpsc.hpp>
#include <aspen/sync/mutex.hpp>
#include <aspen/sync/notify.hpp>
#include <aspen/sync/once_cell.hpp>
#include <aspen/sync/oneshot.hpp>
#include <aspen/sync/semaphore.hpp>
#include <aspen/sync/shared_mutex.hpp>
#include <aspen/sync/watch.hpp>
