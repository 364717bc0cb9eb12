/* c_embed: a tiny "language runtime" written in C that schedules its green
 * processes on aspen through the C API (include/aspen/aspen.h).
 *
 * Each process is a C task with a one-slot mailbox. A token travels round a
 * ring of processes: whoever receives it decrements its hop count and sends
 * it to the next one; the process that receives it with 0 hops left sends
 * a stop message round the ring instead, and every process exits after
 * forwarding it. A receiver with an empty mailbox stores its waker there
 * and returns ASPEN_PENDING: it costs nothing until a message arrives.
 * A ticker process sleeps on a timer until the ring has stopped. The
 * supervisor (run with aspen_block_on) spawns them all from inside its own
 * poll and joins each with aspen_join_poll.
 *
 * Pure C11: the mailbox lock is a spin lock on an atomic_flag. */
#include <aspen/aspen.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

enum { PROCESSES = 1000, LAPS = 100, STOP = -1 };

struct mailbox {
    atomic_flag lock;
    int full;
    long msg;
    aspen_waker* waiter; /* the owner's waker while it waits */
};

struct process {
    int id;
    struct mailbox box;
    struct process* next;
    int initiated; /* sent the stop round */
};

/* Counters read by main after the runtime ended (which orders them), and a
 * flag that only tells the ticker to stop at its next tick: all relaxed. */
static atomic_long hops = 0;
static atomic_int ring_stopped = 0;
static atomic_int dropped = 0;

/* acquire / release: the mailbox's fields pass from one holder to the next. */
static void lock(struct mailbox* b) {
    while (atomic_flag_test_and_set_explicit(&b->lock, memory_order_acquire)) {
    }
}
static void unlock(struct mailbox* b) { atomic_flag_clear_explicit(&b->lock, memory_order_release); }

/* One message in flight per mailbox (a single token, then a single stop). */
static void send(struct process* to, long msg) {
    aspen_waker* w;
    lock(&to->box);
    if (to->box.full) {
        unlock(&to->box);
        fprintf(stderr, "c_embed: mailbox %d overflow\n", to->id);
        exit(1);
    }
    to->box.full = 1;
    to->box.msg = msg;
    w = to->box.waiter;
    to->box.waiter = NULL;
    unlock(&to->box);
    if (w) aspen_waker_wake(w); /* outside the lock; consumes the waker */
}

/* 1 and the message, or 0 after storing cx's waker in the mailbox. */
static int receive(struct process* p, aspen_context* cx, long* msg) {
    aspen_waker* w = NULL;
    int got;
    lock(&p->box);
    got = p->box.full;
    if (got) {
        *msg = p->box.msg;
        p->box.full = 0;
    } else if (!p->box.waiter) {
        aspen_context_waker(cx, &w);
        p->box.waiter = w;
    }
    unlock(&p->box);
    return got;
}

static aspen_status process_poll(void* data, aspen_context* cx) {
    struct process* p = data;
    long msg;
    while (receive(p, cx, &msg)) {
        if (msg == STOP) {
            if (!p->initiated) send(p->next, STOP);
            return ASPEN_READY;
        }
        atomic_fetch_add_explicit(&hops, 1, memory_order_relaxed);
        if (msg == 0) { /* the last hop: start the stop round */
            atomic_store_explicit(&ring_stopped, 1, memory_order_relaxed);
            if (p->next == p) return ASPEN_READY; /* a ring of one */
            p->initiated = 1;
            send(p->next, STOP);
            continue; /* exit when the stop has come round */
        }
        send(p->next, msg - 1);
    }
    return ASPEN_PENDING;
}

static void process_drop(void* data) {
    struct process* p = data;
    aspen_waker_free(p->box.waiter); /* set only if dropped while waiting */
    p->box.waiter = NULL;
    atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
}

struct ticker {
    aspen_timer* timer;
    int ticks;
};

static aspen_status ticker_poll(void* data, aspen_context* cx) {
    struct ticker* t = data;
    for (;;) {
        aspen_status s;
        if (!t->timer && aspen_timer_new(1000000, &t->timer) != ASPEN_OK) return ASPEN_ENOMEM; /* 1 ms */
        s = aspen_timer_poll(t->timer, cx);
        if (s != ASPEN_READY) return s;
        t->ticks++;
        if (atomic_load_explicit(&ring_stopped, memory_order_relaxed)) return ASPEN_READY;
        aspen_timer_reset(t->timer, 1000000);
    }
}

static void ticker_drop(void* data) {
    struct ticker* t = data;
    aspen_timer_free(t->timer);
    t->timer = NULL;
}

struct supervisor {
    struct process* procs;
    struct ticker ticker;
    aspen_join* joins[PROCESSES + 1];
    int started;
    int joined;
};

static aspen_status supervisor_poll(void* data, aspen_context* cx) {
    struct supervisor* s = data;
    aspen_runtime* rt = aspen_context_runtime(cx);
    int i;
    if (!s->started) {
        s->started = 1;
        for (i = 0; i < PROCESSES; i++) {
            aspen_status st = aspen_spawn(rt, process_poll, &s->procs[i], process_drop, &s->joins[i]);
            if (st != ASPEN_OK) return st;
        }
        if (aspen_spawn(rt, ticker_poll, &s->ticker, ticker_drop, &s->joins[PROCESSES]) != ASPEN_OK)
            return ASPEN_ERROR;
        send(&s->procs[0], (long)PROCESSES * LAPS - 1);
    }
    for (; s->joined <= PROCESSES; s->joined++) {
        aspen_status st = aspen_join_poll(s->joins[s->joined], cx);
        if (st == ASPEN_PENDING) return st;
        aspen_join_free(s->joins[s->joined]);
        if (st != ASPEN_OK) return st;
    }
    return ASPEN_READY;
}

int main(void) {
    aspen_config cfg;
    aspen_runtime* rt = NULL;
    aspen_metrics metrics;
    struct supervisor* sup = calloc(1, sizeof *sup);
    struct process* procs = calloc(PROCESSES, sizeof *procs);
    uint64_t start, elapsed_us;
    aspen_status st;
    int i;
    if (!sup || !procs) return 1;
    for (i = 0; i < PROCESSES; i++) {
        procs[i].id = i;
        atomic_flag_clear(&procs[i].box.lock);
        procs[i].next = &procs[(i + 1) % PROCESSES];
    }
    sup->procs = procs;

    aspen_config_init(&cfg);
    cfg.thread_name = "green-vm";
    if (aspen_runtime_new(&cfg, &rt) != ASPEN_OK) {
        fprintf(stderr, "c_embed: %s\n", aspen_last_error());
        return 1;
    }
    start = aspen_now_ns();
    st = aspen_block_on(rt, supervisor_poll, sup, NULL);
    elapsed_us = (aspen_now_ns() - start) / 1000;
    if (st != ASPEN_OK) {
        fprintf(stderr, "c_embed: %s: %s\n", aspen_status_name(st), aspen_last_error());
        return 1;
    }
    metrics.size = sizeof metrics;
    if (aspen_runtime_metrics(rt, &metrics) != ASPEN_OK) {
        fprintf(stderr, "c_embed: %s\n", aspen_last_error());
        return 1;
    }
    aspen_runtime_free(rt);

    printf("%d green processes on %zu workers passed a token %ld times round the ring (%d laps)\n", PROCESSES,
           cfg.workers, atomic_load_explicit(&hops, memory_order_relaxed), LAPS);
    printf("then a stop message went round; every process exited (%d dropped exactly once)\n",
           atomic_load_explicit(&dropped, memory_order_relaxed));
    printf("a ticker process slept on a 1 ms timer %d times meanwhile; %llu us in all\n", sup->ticker.ticks,
           (unsigned long long)elapsed_us);
    printf("the runtime's metrics: %llu polls, %llu steals taking %llu tasks, %llu parks\n",
           (unsigned long long)metrics.polls, (unsigned long long)metrics.steal_operations,
           (unsigned long long)metrics.tasks_stolen, (unsigned long long)metrics.parks);
    st = atomic_load_explicit(&hops, memory_order_relaxed) == (long)PROCESSES * LAPS &&
                 atomic_load_explicit(&dropped, memory_order_relaxed) == PROCESSES
             ? ASPEN_OK
             : ASPEN_ERROR;
    free(procs);
    free(sup);
    return st == ASPEN_OK ? 0 : 1;
}
