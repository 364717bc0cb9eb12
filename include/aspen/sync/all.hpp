// Every sync primitive and channel at once: mutex, semaphore, notify,
// oneshot_channel, mpsc_channel / unbounded_channel, event, latch. Each header documents
// its semantics and its cancel safety at its top.
#pragma once

#include <aspen/sync/event.hpp>
#include <aspen/sync/latch.hpp>
#include <aspen/sync/mpsc.hpp>
#include <aspen/sync/mutex.hpp>
#include <aspen/sync/notify.hpp>
#include <aspen/sync/oneshot.hpp>
#include <aspen/sync/semaphore.hpp>
