/* aspen.h: the C API of aspen, for language runtimes and other C callers.
 *
 * A C task is a poll function and a data pointer. aspen calls
 * poll(data, cx) on a worker; it returns ASPEN_READY (finished) or
 * ASPEN_PENDING after it stored a waker (aspen_context_waker) somewhere
 * that will wake it. A pending task costs nothing until that waker fires;
 * then poll is called again. When the task is finished, aborted or dropped
 * at shutdown, drop(data) is called exactly once.
 *
 * Conventions (docs/c_api.md has the whole reference):
 * - Functions that can fail return an aspen_status; on failure the message
 *   is in aspen_last_error() (per thread). Nothing throws through this API.
 * - Objects come out through an `out` parameter and go back through their
 *   _free function; every _free accepts NULL.
 * - aspen_context pointers are valid only during the poll call that got
 *   them.
 * - Every function may be called from any thread unless its comment says
 *   otherwise.
 * - Cooperative budget (aspen_config.coop_budget, as in C++): each poll of
 *   a task starts with coop_budget units. aspen_recv_poll, aspen_send_poll,
 *   aspen_timer_poll, aspen_fd_poll and aspen_fd_ready_poll spend one when
 *   they complete (return anything but ASPEN_PENDING); one that has to wait
 *   spends none. Once the poll's budget is spent they do nothing at all
 *   (no message taken or sent, no syscall, no timer armed, no readiness
 *   looked at) and return ASPEN_PENDING with the
 *   task already woken: a yield, so it is polled again after the work that
 *   is ready on its worker, and a loop over always-ready operations cannot
 *   starve the rest. Poll again with the same arguments, as after any
 *   ASPEN_PENDING. aspen_join_poll and aspen_advance_poll spend nothing.
 */
#ifndef ASPEN_ASPEN_H
#define ASPEN_ASPEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes -------------------------------------------------------- */

typedef enum aspen_status {
    ASPEN_OK = 0,
    ASPEN_READY = 0,      /* a poll finished: the same value as ASPEN_OK */
    ASPEN_PENDING = 1,    /* a poll stored the waker; not an error */
    ASPEN_EINVAL = -1,    /* an argument is invalid (NULL, a bad config field) */
    ASPEN_ENOMEM = -2,    /* out of memory */
    ASPEN_SHUT_DOWN = -3, /* the runtime was shut down (spawn refused, task dropped) */
    ASPEN_CANCELLED = -4, /* the task was aborted before it finished */
    ASPEN_MISUSE = -5,    /* a call the API forbids here (joining twice, waiting on a worker) */
    ASPEN_PANIC = -6,     /* a poll function threw a C++ exception */
    ASPEN_ERROR = -7,     /* anything else (e.g. a thread could not start) */
    ASPEN_CLOSED = -8,    /* a channel's other side is gone: a send was refused (the message
                             is still the caller's), or a receive found every sender gone
                             and nothing left (end of stream) */
    ASPEN_WOULD_BLOCK = 2, /* a try_ call found the channel full (send) or empty (receive):
                              nothing changed, no waker stored; not an error */
    /* Not a status: makes every int a valid aspen_status (in C++ too), so
     * a task may return codes of its own and the ABI stays int-sized. */
    ASPEN_STATUS_INT_MAX_ = 0x7fffffff
} aspen_status;

/* A short constant name for a status ("ASPEN_OK", ...). */
const char* aspen_status_name(aspen_status status);

/* The message of the last failure on the calling thread ("" if none). Not
 * cleared by successful calls; valid until the thread's next aspen call. */
const char* aspen_last_error(void);

/* ---- opaque types --------------------------------------------------------- */

typedef struct aspen_runtime aspen_runtime;
typedef struct aspen_context aspen_context;
typedef struct aspen_waker aspen_waker;
typedef struct aspen_join aspen_join;
typedef struct aspen_timer aspen_timer;
typedef struct aspen_handle aspen_handle;

/* A task's poll function: ASPEN_READY finishes it; ASPEN_PENDING means a
 * waker was stored; any other status finishes it with that status as its
 * outcome (what aspen_join_wait returns). Must not throw. */
typedef aspen_status (*aspen_poll_fn)(void* data, aspen_context* cx);
/* Called exactly once per task, on whichever thread ends it. May be NULL. */
typedef void (*aspen_drop_fn)(void* data);

/* ---- runtime -------------------------------------------------------------- */

typedef struct aspen_config {
    size_t size; /* sizeof(aspen_config) as the caller compiled it; set by aspen_config_init */
    int current_thread; /* nonzero: a single-threaded executor run by the thread in
                           aspen_block_on / aspen_join_wait, one at a time: a
                           call on another thread meanwhile waits, its task
                           running in that drive, and takes the drive over if
                           that one ends first; worker fields ignored */
    size_t workers;     /* worker threads (default: one per hardware thread) */
    uint32_t local_queue_capacity; /* ring slots per worker, a power of two */
    uint32_t steal_attempts;
    uint32_t global_queue_interval;
    uint32_t event_interval;
    uint32_t coop_budget;
    uint32_t max_next_slot_runs;
    size_t max_blocking_threads;
    uint64_t blocking_keep_alive_ns;
    const char* thread_name; /* copied; NULL: "aspen-worker" */
    /* Run on each worker thread as it starts / before it ends (e.g. to
     * register the thread with a garbage collector). May be NULL. */
    void (*on_thread_start)(void* hook_data, size_t worker_index);
    void (*on_thread_stop)(void* hook_data, size_t worker_index);
    void* hook_data;
    /* nonzero: the clock starts paused (for tests), as aspen::config::start_paused:
       it moves only by aspen_advance_poll, or by itself to the next timer when
       every worker is idle and no blocking function runs */
    int start_paused;
    /* nonzero: time every poll into the poll_time_histogram, poll_time_ns and
       longest_poll_ns of aspen_metrics, as aspen::config::poll_time_histogram
       (two clock reads a poll, so off by default). Appended after
       start_paused; on LP64 it sits where the struct had tail padding, so
       sizeof(aspen_config) did not change (see docs/c_api.md). */
    int poll_time_histogram;
    /* Appended after poll_time_histogram: run on a runtime thread just
     * before it sleeps for lack of work and just after it wakes (as
     * aspen::config::on_thread_park / on_thread_unpark; on a current_thread
     * runtime around the wait in aspen_block_on / aspen_join_wait), with
     * hook_data: where a garbage collector learns that a thread is at a
     * safe point. One pair per parks / unparks of the metrics. May be NULL. */
    void (*on_thread_park)(void* hook_data);
    void (*on_thread_unpark)(void* hook_data);
} aspen_config;

/* Fills the first `size` bytes of *cfg (the caller's sizeof(aspen_config))
 * with the defaults of aspen::config, and cfg->size with `size`; bytes of
 * fields this library does not know (a caller built against a newer
 * header) are zeroed, i.e. left at their defaults. ASPEN_EINVAL for a size
 * too small to hold the `size` and `current_thread` fields. */
aspen_status aspen_config_init_sized(aspen_config* cfg, size_t size);
/* aspen_config_init(&cfg): the same with the sizeof(aspen_config) of the
 * header the caller is compiled against, so a program built against an
 * older, shorter struct is never written past its end by a newer library.
 * (The function of that name stays for programs built before the macro;
 * it writes this library's whole struct.) */
aspen_status aspen_config_init(aspen_config* cfg);
#define aspen_config_init(cfg) aspen_config_init_sized((cfg), sizeof(aspen_config))

/* Starts a runtime. ASPEN_EINVAL with the field named in aspen_last_error()
 * for a bad value. */
aspen_status aspen_runtime_new(const aspen_config* cfg, aspen_runtime** out);

/* Shuts the runtime down: every task that has not finished is dropped (its
 * drop runs exactly once, its join reports ASPEN_SHUT_DOWN), running
 * blocking functions are waited for, and later spawns fail with
 * ASPEN_SHUT_DOWN (their drop runs). From one of rt's own tasks:
 * ASPEN_MISUSE. A second call does nothing. */
aspen_status aspen_runtime_shutdown(aspen_runtime* rt);

/* aspen_runtime_shutdown, then frees rt. Must not race with other calls on
 * rt (calls through an aspen_handle may: see "handles"). On ASPEN_MISUSE
 * nothing is freed. NULL: ASPEN_OK. */
aspen_status aspen_runtime_free(aspen_runtime* rt);

/* ---- metrics -------------------------------------------------------------- */

/* Buckets of aspen_metrics.poll_time_histogram: bucket 0 counts polls
 * shorter than 1 us, bucket i (1 <= i < 15) those of [2^(i-1), 2^i) us,
 * bucket 15 those of 2^14 us (16.4 ms) and longer. */
enum { ASPEN_POLL_TIME_BUCKETS = 16 };

/* Counters of a running runtime, read without stopping it (each value is
 * exact, the set is not one snapshot), as aspen::runtime_metrics: totals
 * over the workers, or one worker's. Set `size` to sizeof(aspen_metrics)
 * before the call: the library fills that many bytes (fields are only
 * ever appended), so an older caller keeps working. */
typedef struct aspen_metrics {
    size_t size;
    size_t workers;              /* worker threads (1 for current_thread) */
    uint64_t polls;              /* task polls */
    uint64_t tasks_spawned;      /* spawns from tasks on the workers */
    uint64_t remote_spawns;      /* spawns from outside (aspen_spawn on a plain thread) */
    uint64_t tasks_completed;    /* tasks that finished or were cancelled on a worker */
    uint64_t tasks_alive;        /* spawned and not yet complete, now */
    uint64_t next_slot_runs;     /* tasks taken from a worker's next slot */
    uint64_t local_pushes;       /* tasks pushed into a worker's ring */
    uint64_t injector_pops;      /* tasks taken from the shared injector */
    uint64_t injector_depth;     /* tasks waiting in the injector, now */
    uint64_t steal_operations;   /* successful steals (each takes a batch) */
    uint64_t tasks_stolen;       /* tasks those steals took */
    uint64_t failed_steals;      /* victims tried that gave nothing */
    uint64_t parks;              /* times a worker went to sleep */
    uint64_t unparks;            /* times one woke up */
    uint64_t timers_armed;       /* timers waiting, now */
    uint64_t io_registrations;   /* fds registered with the reactor, now */
    /* Appended later. Only with aspen_config.poll_time_histogram, else zero.
       A poll's time includes the tasks it ran nested (a join that ran its
       child inline); every counted poll lands in exactly one bucket. */
    uint64_t poll_time_histogram[ASPEN_POLL_TIME_BUCKETS];
    uint64_t poll_time_ns;       /* all polls together */
    uint64_t longest_poll_ns;    /* the longest single poll (totals: the longest of any worker) */
    /* Appended later, as aspen::worker_metrics / runtime_metrics. */
    uint64_t budget_forced_yields;  /* yields forced by a spent coop budget (not aspen_yield) */
    uint64_t local_queue_depth;     /* tasks waiting in a worker's ring (or the current_thread
                                       run queue), now; not its next slot or unpublished spawns */
    uint64_t blocking_threads;      /* threads of the blocking pool, now */
    uint64_t idle_blocking_threads; /* of those, waiting for a job */
    uint64_t blocking_queue_depth;  /* blocking jobs waiting for a thread, now */
    /* Appended later. */
    uint64_t io_would_block;   /* fd and socket syscalls that met EAGAIN before waiting for readiness */
    uint64_t io_ready_events;  /* readiness events the reactor delivered to fds and sockets */
    /* Appended later. */
    uint64_t busy_ns;  /* time not parked (as aspen::worker_metrics::busy_ns); totals add the workers' */
} aspen_metrics;

/* Totals over every worker (the per-runtime fields as they are). */
aspen_status aspen_runtime_metrics(aspen_runtime* rt, aspen_metrics* out);

/* One worker's counters (index < out->workers of the totals); the fields
 * that belong to the runtime as a whole (remote_spawns, tasks_alive,
 * injector_depth, timers_armed, io_registrations, the blocking pool's
 * three, io_would_block and io_ready_events) are the runtime's. An
 * index out of range: ASPEN_EINVAL. */
aspen_status aspen_runtime_worker_metrics(aspen_runtime* rt, size_t index, aspen_metrics* out);

/* ---- tasks ---------------------------------------------------------------- */

/* Starts a task. From a task running on rt it goes to the current worker
 * (as aspen::spawn), elsewhere to rt's injector. aspen takes ownership of
 * data in every case: if the spawn fails, drop(data) has run before this
 * returns. out may be NULL (the task is detached). */
aspen_status aspen_spawn(aspen_runtime* rt, aspen_poll_fn poll, void* data, aspen_drop_fn drop, aspen_join** out);

/* aspen_spawn + aspen_join_wait: runs the task and returns its outcome.
 * Not from a runtime's thread (ASPEN_MISUSE; drop still runs). */
aspen_status aspen_block_on(aspen_runtime* rt, aspen_poll_fn poll, void* data, aspen_drop_fn drop);

/* ---- joins ---------------------------------------------------------------- */

/* Blocks until the task ended and returns its outcome: ASPEN_OK, the
 * status its poll returned, ASPEN_CANCELLED or ASPEN_SHUT_DOWN. Its drop
 * has run by then. Not from a runtime's thread; once per join. */
aspen_status aspen_join_wait(aspen_join* join);

/* From inside a task: ASPEN_PENDING (cx's waker will be woken when the
 * joined task ends), or the outcome as aspen_join_wait gives it. Misuse
 * (NULL, already joined) returns its error status rather than pending.
 * Spends no coop budget (as awaiting a C++ join_handle): an outcome is
 * taken once, so a loop of joins is bounded by the tasks it joins. */
aspen_status aspen_join_poll(aspen_join* join, aspen_context* cx);

/* Cancels the task: a pending one is dropped now (drop may run on this
 * thread), a running one after its current poll. No-op once it ended. */
aspen_status aspen_join_abort(aspen_join* join);

/* 1 once the task ended (its drop has run), 0 before, -1 for NULL. */
int aspen_join_is_finished(const aspen_join* join);

/* The task's id, as aspen::task_id (C++ join_handle::id): never 0, unique
 * among the process's tasks while this join lives; 0 for NULL. */
uint64_t aspen_join_id(const aspen_join* join);

/* Detaches: the task runs on. Joins and wakers may outlive the runtime. */
void aspen_join_free(aspen_join* join);

/* ---- wakers --------------------------------------------------------------- */

/* The runtime running the task that polls with cx (to spawn from a task). */
aspen_runtime* aspen_context_runtime(const aspen_context* cx);

/* The id of the task that polls with cx (aspen_join_id of its join gives the
 * same); 0 for NULL. */
uint64_t aspen_context_task_id(const aspen_context* cx);

/* Yields, as aspen::yield_now: returns ASPEN_PENDING for the poll function
 * to return, and the task is polled again after the work that is ready on
 * its worker now (the oldest end of the worker's queue, where thieves take
 * first). For a long-running task (an interpreter's loop) to let others run.
 * A plain wake of its own waker is not a yield on a multi-threaded runtime:
 * it puts the task where its worker looks first. ASPEN_MISUSE outside a
 * poll. */
aspen_status aspen_yield(aspen_context* cx);

/* A new reference to the waker of the task polling with cx. */
aspen_status aspen_context_waker(const aspen_context* cx, aspen_waker** out);
aspen_status aspen_waker_clone(const aspen_waker* waker, aspen_waker** out);
/* Wakes the task and frees the waker. A no-op on a task that ended. */
aspen_status aspen_waker_wake(aspen_waker* waker);
/* Wakes the task; the waker stays valid. */
aspen_status aspen_waker_wake_by_ref(const aspen_waker* waker);
void aspen_waker_free(aspen_waker* waker);

/* ---- time ----------------------------------------------------------------- */

/* The clock in nanoseconds (steady; its epoch is unspecified): inside a
 * task, its runtime's clock (which stands still while paused, see
 * aspen_advance_poll); elsewhere the real steady clock. */
uint64_t aspen_now_ns(void);

/* A one-shot timer that fires delay_ns after now. It is armed by its first
 * aspen_timer_poll on the runtime of the polling task. */
aspen_status aspen_timer_new(uint64_t delay_ns, aspen_timer** out);
/* ASPEN_READY once the deadline passed (never early), else ASPEN_PENDING
 * with cx's waker stored, or a coop yield (see the top of this file:
 * ready spends a unit of budget). One task polls a timer at a time. */
aspen_status aspen_timer_poll(aspen_timer* timer, aspen_context* cx);
/* A new deadline delay_ns after now; re-armed by the next poll. */
aspen_status aspen_timer_reset(aspen_timer* timer, uint64_t delay_ns);
/* Disarms and frees it. Free armed timers before their runtime (in the
 * task's drop, typically). */
void aspen_timer_free(aspen_timer* timer);

/* Paused clock only (aspen_config.start_paused), as aspen::advance: a leaf
 * that moves the clock of the polling task's runtime forward by ns, fires
 * the timers that became due (their tasks are woken) and yields once, so
 * those tasks can run before it reports ASPEN_READY. Its first poll moves
 * the clock and returns ASPEN_PENDING (the yield); the next one
 * ASPEN_READY. On a runtime whose clock is not paused: ASPEN_MISUSE, and
 * the clock is left alone. One task polls it; free it when done. It spends
 * no coop budget (as aspen::advance): every advance yields once anyway. */
typedef struct aspen_advance aspen_advance;
aspen_status aspen_advance_new(uint64_t ns, aspen_advance** out);
aspen_status aspen_advance_poll(aspen_advance* advance, aspen_context* cx);
void aspen_advance_free(aspen_advance* advance);

/* ---- channels ------------------------------------------------------------- */

/* A multi-producer, single-consumer FIFO channel of void* messages (as
 * aspen::mpsc_channel / aspen::unbounded_channel). Ownership of a message:
 * the caller's until a send returns ASPEN_READY / ASPEN_OK, then the
 * channel's, then the receiver's once a receive hands it out. Messages
 * still in the channel when the receiver is freed go to the channel's drop
 * (exactly once each, on the thread freeing the receiver). */
typedef struct aspen_sender aspen_sender;
typedef struct aspen_receiver aspen_receiver;

/* capacity 0: unbounded (a send never waits); otherwise at most capacity
 * messages wait in the channel. drop may be NULL. */
aspen_status aspen_channel_new(size_t capacity, aspen_drop_fn drop, aspen_sender** tx, aspen_receiver** rx);

/* Another sender of the same channel (one per producer task or thread).
 * The stream ends when every sender was freed and the messages are
 * received. */
aspen_status aspen_sender_clone(const aspen_sender* tx, aspen_sender** out);

/* Sends now if there is room (and no sender is waiting for it): ASPEN_OK,
 * the message is the channel's; ASPEN_WOULD_BLOCK (full) or ASPEN_CLOSED
 * (the receiver is gone), the message is still the caller's. Never waits,
 * needs no task: this is how a foreign thread hands a message in. */
aspen_status aspen_try_send(aspen_sender* tx, void* msg);

/* From a task: ASPEN_READY (sent: the message is the channel's),
 * ASPEN_PENDING (full: cx's waker is stored and the message is still the
 * caller's; poll again with the same msg until it is not pending, or free
 * the sender to give up; another msg is ASPEN_MISUSE), or ASPEN_CLOSED
 * (the receiver is gone or closed the channel; the message is still the
 * caller's). Waiting senders are served in order. A send that completes
 * spends a unit of coop budget; with none left it is ASPEN_PENDING as a
 * yield, with nothing sent (see the top of this file). On an unbounded
 * channel that yield is the only pending. */
aspen_status aspen_send_poll(aspen_sender* tx, void* msg, aspen_context* cx);

/* For a thread outside the runtime (a foreign thread, or an
 * aspen_spawn_blocking function), as aspen::mpsc_sender::blocking_send:
 * sends, sleeping the thread while the channel is full. ASPEN_OK (the
 * message is the channel's) or ASPEN_CLOSED (the receiver is gone or
 * closed the channel; the message is still the caller's). On a runtime's
 * thread, or while a send polled by a task is pending on tx: ASPEN_MISUSE,
 * nothing sent. */
aspen_status aspen_blocking_send(aspen_sender* tx, void* msg);

/* Frees this sender (a pending send is given up; its message stays the
 * caller's). The last one ends the stream. */
void aspen_sender_free(aspen_sender* tx);

/* From a task: ASPEN_READY with the next message in *out (now the
 * caller's), ASPEN_PENDING (cx's waker stored: a send or the last sender's
 * free wakes it; or a coop yield with nothing taken, see the top of this
 * file), or ASPEN_CLOSED: every sender is gone or the receiver closed the
 * channel, and every message was received (end of stream). A message or
 * the end spends a unit of coop budget. */
aspen_status aspen_recv_poll(aspen_receiver* rx, aspen_context* cx, void** out);

/* The next message if one is there now: ASPEN_OK with it in *out,
 * ASPEN_WOULD_BLOCK (empty, senders left, not closed) or ASPEN_CLOSED (end
 * of stream). Needs no task; spends no budget. */
aspen_status aspen_try_recv(aspen_receiver* rx, void** out);

/* For a thread outside the runtime, as aspen::mpsc_receiver::blocking_recv:
 * ASPEN_OK with the next message in *out (now the caller's), sleeping the
 * thread while the channel is empty, or ASPEN_CLOSED at the end of the
 * stream. On a runtime's thread, or while a receive polled by a task is
 * pending on rx: ASPEN_MISUSE, nothing taken. Spends no budget. */
aspen_status aspen_blocking_recv(aspen_receiver* rx, void** out);

/* Closes the channel for sending, as aspen::mpsc_receiver::close: later
 * sends give ASPEN_CLOSED, and senders waiting for room are woken and get
 * it too; their messages stay theirs. The messages already in the channel
 * can still be received; then receives give ASPEN_CLOSED (end of stream),
 * even while senders are left. A second close does nothing. rx stays
 * valid: free it as usual (what is left in it then goes to drop). */
aspen_status aspen_receiver_close(aspen_receiver* rx);

/* Closes the channel (later sends give ASPEN_CLOSED, waiting senders are
 * woken and get it too) and passes every message still in it to drop.
 * Senders may outlive it. */
void aspen_receiver_free(aspen_receiver* rx);

/* ---- file descriptors ----------------------------------------------------- */

typedef struct aspen_fd aspen_fd;

/* One non-blocking attempt on the fd: a syscall's result (>= 0), or -1
 * with errno set (EAGAIN: not ready after all; EINTR: try again). */
typedef long long (*aspen_fd_fn)(void* arg, int fd);

enum { ASPEN_FD_READ = 0, ASPEN_FD_WRITE = 1 };

/* Takes ownership of fd (a pipe, socket, eventfd, tty...: anything epoll
 * watches) and makes it non-blocking. It registers with the runtime of the
 * first task that polls it. A regular file or a negative fd is
 * ASPEN_EINVAL, a closed one ASPEN_ERROR; the fd then stays the caller's. */
aspen_status aspen_fd_adopt(int fd, aspen_fd** out);

/* Once the fd is ready for `direction` (ASPEN_FD_READ / ASPEN_FD_WRITE),
 * calls fn(arg, fd): ASPEN_READY with fn's result in *result, ASPEN_PENDING
 * with cx's waker stored (poll again with the same fn and arg: the
 * operation keeps the first ones until it completes), or ASPEN_ERROR with
 * -errno in *result. One operation per direction at a time; fn runs only
 * inside the poll that completes it, so a single syscall is never lost.
 * Completing spends a unit of coop budget; with none left it is
 * ASPEN_PENDING as a yield and fn is not called (see the top of this
 * file). */
aspen_status aspen_fd_poll(aspen_fd* fd, int direction, aspen_fd_fn fn, void* arg, long long* result,
                           aspen_context* cx);

/* Readiness only, for a caller that does its own read() / write() (as
 * Tokio's AsyncFd::readable / writable): ASPEN_OK once the fd is ready for
 * `direction` as aspen last saw it, ASPEN_PENDING with cx's waker stored
 * (woken at the next readiness edge) otherwise, or a coop yield. No
 * syscall on the fd. The report can be stale: if the caller's syscall then
 * says EAGAIN, it calls aspen_fd_clear_ready and polls again. ASPEN_OK
 * spends a unit of coop budget, as aspen_fd_poll completing. One wait per
 * direction at a time, polled by one task; while an aspen_fd_poll is
 * pending in that direction (or a wait while it is), or called outside
 * the poll cx belongs to: ASPEN_MISUSE. The fd registers with the polling
 * task's runtime on the first poll; if epoll refuses it: ASPEN_ERROR. */
aspen_status aspen_fd_ready_poll(aspen_fd* fd, int direction, aspen_context* cx);

/* The caller's syscall said EAGAIN after the last ASPEN_OK of
 * aspen_fd_ready_poll for `direction`: forgets the readiness that poll
 * reported, so the next aspen_fd_ready_poll waits for a new edge. An edge
 * that arrived after that poll (before the EAGAIN or after it) is kept:
 * the next poll is ASPEN_OK at once. Call it after a syscall that came
 * after that poll; with nothing reported since the last clear it does
 * nothing. Any thread, not concurrently with that direction's ready
 * poll; no task needed, no budget. */
aspen_status aspen_fd_clear_ready(aspen_fd* fd, int direction);

/* The descriptor, or -1 for NULL. */
int aspen_fd_native(const aspen_fd* fd);

/* Deregisters and closes the fd (free it before its runtime). */
void aspen_fd_free(aspen_fd* fd);

/* ---- blocking pool -------------------------------------------------------- */

/* Runs fn(data) on rt's blocking pool (a thread that may block: a syscall,
 * a C library); its return value is the outcome. Abort before it starts
 * means it never runs; a running one cannot be interrupted. drop(data)
 * runs exactly once, after fn returned or instead of it. */
aspen_status aspen_spawn_blocking(aspen_runtime* rt, aspen_status (*fn)(void* data), void* data, aspen_drop_fn drop,
                                  aspen_join** out);

/* As aspen::block_in_place: called inside a task's poll on a
 * multi-threaded runtime, runs fn(data) on the calling thread while a
 * stand-in thread takes over the worker and runs its other tasks (none of
 * them waits for fn, also with one worker); fn may block, and it runs as
 * on a foreign thread (aspen_blocking_send / recv, aspen_block_on,
 * aspen_join_wait are allowed there). Returns fn's status. The stand-in
 * threads are kept for the next call (for blocking_keep_alive_ns), and a
 * call that returns before its stand-in began takes the hand-off back, so
 * short calls cost little; still, it is meant for calls that may block
 * for long. Elsewhere (a foreign thread, an
 * aspen_spawn_blocking function, inside another aspen_block_in_place) it
 * just calls fn. On a current-thread runtime: ASPEN_MISUSE, fn not run; a
 * stand-in that cannot start: ASPEN_ERROR, fn not run. */
aspen_status aspen_block_in_place(aspen_status (*fn)(void* data), void* data);

/* ---- handles -------------------------------------------------------------- */

/* A handle on a runtime, for threads that do not own it (as
 * aspen::runtime_handle, Tokio's Handle). Unlike rt itself, a handle may be
 * used while, and after, another thread frees the runtime:
 * aspen_runtime_free waits for the handle calls in flight, and later ones
 * fail with ASPEN_SHUT_DOWN after their drop ran. A handle is freed on its
 * own, before or after its runtime. Each call takes a shared lock: not for
 * a hot path (inside a task, aspen_spawn on aspen_context_runtime is
 * cheaper). A drop function must not free the handle's runtime (the free
 * would wait for the call that runs the drop). */
aspen_status aspen_runtime_handle(aspen_runtime* rt, aspen_handle** out);
aspen_status aspen_handle_clone(const aspen_handle* h, aspen_handle** out);

/* aspen_spawn and aspen_spawn_blocking on the handle's runtime: the same
 * outcomes, and ASPEN_SHUT_DOWN once it is shut down or freed. aspen takes
 * ownership of data in every case, as aspen_spawn. */
aspen_status aspen_handle_spawn(aspen_handle* h, aspen_poll_fn poll, void* data, aspen_drop_fn drop, aspen_join** out);
aspen_status aspen_handle_spawn_blocking(aspen_handle* h, aspen_status (*fn)(void* data), void* data, aspen_drop_fn drop,
                                         aspen_join** out);

/* NULL: nothing. */
void aspen_handle_free(aspen_handle* h);

#ifdef __cplusplus
}
#endif

#endif /* ASPEN_ASPEN_H */
