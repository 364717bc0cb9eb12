/* The C API from C: this file is compiled as C11 with -pedantic -Werror,
 * which proves aspen.h is valid C, and runs a small scenario on both kinds
 * of runtime: timers, joins, channels (with a small coop budget, and
 * closed by the receiver), a readiness-only wait on a pipe, the poll-time
 * histogram, the paused clock and aspen_block_in_place. Exits 0 on success, 1 (with the failed
 * check) otherwise. */
#define _POSIX_C_SOURCE 200809L /* pipe, read, write under -std=c11 */

#include <aspen/aspen.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int failures = 0;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n",      \
                    __FILE__, __LINE__, #cond, aspen_last_error());            \
            failures++;                                                        \
        }                                                                      \
    } while (0)

/* A task that sleeps on a timer `rounds` times, then adds its id to a sum. */
struct sleeper {
    aspen_timer* timer;
    int rounds;
    int id;
    atomic_int* sum; /* shared by tasks on several workers */
    atomic_int* drops;
};

static aspen_status sleeper_poll(void* data, aspen_context* cx) {
    struct sleeper* s = data;
    while (s->rounds > 0) {
        aspen_status st;
        if (!s->timer && aspen_timer_new(1000000, &s->timer) != ASPEN_OK) return ASPEN_ENOMEM;
        st = aspen_timer_poll(s->timer, cx);
        if (st != ASPEN_READY) return st;
        aspen_timer_free(s->timer);
        s->timer = NULL;
        s->rounds--;
    }
    /* relaxed: read after every task was joined, which orders it */
    atomic_fetch_add_explicit(s->sum, s->id, memory_order_relaxed);
    return ASPEN_READY;
}

static void sleeper_drop(void* data) {
    struct sleeper* s = data;
    aspen_timer_free(s->timer);
    atomic_fetch_add_explicit(s->drops, 1, memory_order_relaxed); /* relaxed: as sum */
    free(s);
}

/* A parent that spawns a child from inside its poll and joins it with
 * aspen_join_poll. */
struct parent {
    aspen_join* child;
    aspen_status child_outcome;
    atomic_int sum;
    atomic_int drops;
};

static aspen_status parent_poll(void* data, aspen_context* cx) {
    struct parent* p = data;
    aspen_status st;
    if (!p->child) {
        struct sleeper* s = calloc(1, sizeof *s);
        if (!s) return ASPEN_ENOMEM;
        s->rounds = 3;
        s->id = 42;
        s->sum = &p->sum;
        s->drops = &p->drops;
        st = aspen_spawn(aspen_context_runtime(cx), sleeper_poll, s, sleeper_drop, &p->child);
        if (st != ASPEN_OK) return st;
    }
    st = aspen_join_poll(p->child, cx);
    if (st == ASPEN_PENDING) return st;
    p->child_outcome = st;
    aspen_join_free(p->child);
    p->child = NULL;
    return ASPEN_READY;
}

/* Channels: producer tasks send the numbers 1..N each (as pointers to
 * heap ints, which the consumer frees), one consumer task adds them up
 * until the end of the stream. */
enum { PRODUCERS = 3, PER_PRODUCER = 200 };

struct producer {
    aspen_sender* tx;
    int next;     /* 1..PER_PRODUCER */
    int* pending; /* the message a pending send keeps (still ours) */
};

static aspen_status producer_poll(void* data, aspen_context* cx) {
    struct producer* p = data;
    while (p->next <= PER_PRODUCER) {
        aspen_status st;
        if (!p->pending) {
            p->pending = malloc(sizeof *p->pending);
            if (!p->pending) return ASPEN_ENOMEM;
            *p->pending = p->next;
        }
        st = aspen_send_poll(p->tx, p->pending, cx);
        if (st != ASPEN_READY) return st; /* pending: keep it, poll again with it */
        p->pending = NULL;                /* the channel's now */
        p->next++;
    }
    aspen_sender_free(p->tx); /* the last one ends the stream */
    p->tx = NULL;
    return ASPEN_READY;
}

static void producer_drop(void* data) {
    struct producer* p = data;
    aspen_sender_free(p->tx);
    free(p->pending);
    free(p);
}

struct consumer {
    aspen_receiver* rx;
    long sum;
    int count;
};

static aspen_status consumer_poll(void* data, aspen_context* cx) {
    struct consumer* c = data;
    for (;;) {
        void* m = NULL;
        aspen_status st = aspen_recv_poll(c->rx, cx, &m);
        if (st == ASPEN_CLOSED) return ASPEN_READY; /* end of stream */
        if (st != ASPEN_READY) return st;
        c->sum += *(int*)m;
        c->count++;
        free(m);
    }
}

static void run_channel(aspen_runtime* rt, size_t capacity) {
    aspen_sender* tx = NULL;
    struct consumer c = {NULL, 0, 0};
    aspen_join* joins[PRODUCERS];
    int i;
    CHECK(aspen_channel_new(capacity, free, &tx, &c.rx) == ASPEN_OK);
    for (i = 0; i < PRODUCERS; i++) {
        struct producer* p = calloc(1, sizeof *p);
        p->next = 1;
        CHECK(aspen_sender_clone(tx, &p->tx) == ASPEN_OK);
        CHECK(aspen_spawn(rt, producer_poll, p, producer_drop, &joins[i]) == ASPEN_OK);
    }
    aspen_sender_free(tx);
    CHECK(aspen_block_on(rt, consumer_poll, &c, NULL) == ASPEN_OK);
    for (i = 0; i < PRODUCERS; i++) {
        CHECK(aspen_join_wait(joins[i]) == ASPEN_OK);
        aspen_join_free(joins[i]);
    }
    CHECK(c.count == PRODUCERS * PER_PRODUCER);
    CHECK(c.sum == (long)PRODUCERS * PER_PRODUCER * (PER_PRODUCER + 1) / 2);
    aspen_receiver_free(c.rx);
}

/* aspen_receiver_close: senders are refused at once, the messages already
 * in the channel are still received (by a task), then the stream ends
 * although a sender is left. */
static void run_close(aspen_runtime* rt) {
    aspen_sender* tx = NULL;
    struct consumer c = {NULL, 0, 0};
    int* late = malloc(sizeof *late);
    int i;
    CHECK(aspen_channel_new(4, free, &tx, &c.rx) == ASPEN_OK);
    for (i = 1; i <= 3; i++) {
        int* m = malloc(sizeof *m);
        *m = i;
        CHECK(aspen_try_send(tx, m) == ASPEN_OK);
    }
    CHECK(aspen_receiver_close(c.rx) == ASPEN_OK);
    CHECK(aspen_try_send(tx, late) == ASPEN_CLOSED);      /* refused: still ours */
    CHECK(aspen_blocking_send(tx, late) == ASPEN_CLOSED); /* from this thread too */
    free(late);
    CHECK(aspen_block_on(rt, consumer_poll, &c, NULL) == ASPEN_OK);
    CHECK(c.count == 3);
    CHECK(c.sum == 6);
    {
        void* m = NULL;
        CHECK(aspen_blocking_recv(c.rx, &m) == ASPEN_CLOSED); /* drained: the end */
    }
    aspen_receiver_free(c.rx);
    aspen_sender_free(tx);
}

/* Readiness only, as a language runtime that does its own read(2) uses
 * it: the task waits until the pipe is readable (aspen_fd_ready_poll),
 * reads until EAGAIN, clears the readiness (aspen_fd_clear_ready) and waits
 * again. It writes each byte itself after it went pending with nothing
 * left to read, so what wakes it is the reactor's edge. */
struct own_reader {
    aspen_fd* fd;
    int write_end;
    int wrote, got, pendings, eagains;
};

static aspen_status own_reader_poll(void* data, aspen_context* cx) {
    struct own_reader* r = data;
    for (;;) {
        char c;
        ssize_t n;
        aspen_status st = aspen_fd_ready_poll(r->fd, ASPEN_FD_READ, cx);
        if (st == ASPEN_PENDING) {
            r->pendings++;
            if (r->wrote == r->got && r->wrote < 2) {
                if (write(r->write_end, "x", 1) != 1) return ASPEN_ERROR;
                r->wrote++;
            }
            return st;
        }
        if (st != ASPEN_OK) return st;
        n = read(aspen_fd_native(r->fd), &c, 1);
        if (n == 1) {
            if (++r->got == 2) return ASPEN_READY;
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            r->eagains++;
            st = aspen_fd_clear_ready(r->fd, ASPEN_FD_READ);
            if (st != ASPEN_OK) return st;
            continue;
        }
        return ASPEN_ERROR;
    }
}

static void run_ready(aspen_runtime* rt) {
    int p[2];
    struct own_reader r = {NULL, -1, 0, 0, 0, 0};
    CHECK(pipe(p) == 0);
    r.write_end = p[1];
    CHECK(aspen_fd_adopt(p[0], &r.fd) == ASPEN_OK);
    CHECK(aspen_fd_ready_poll(r.fd, 2, NULL) == ASPEN_EINVAL);
    CHECK(aspen_fd_clear_ready(r.fd, ASPEN_FD_READ) == ASPEN_OK); /* nothing reported yet */
    CHECK(aspen_block_on(rt, own_reader_poll, &r, NULL) == ASPEN_OK);
    CHECK(r.got == 2);
    CHECK(r.pendings >= 2); /* before each byte */
    CHECK(r.eagains == 1);  /* between them, once: the clear made the next poll wait */
    aspen_fd_free(r.fd);
    close(p[1]);
}

/* With aspen_config.poll_time_histogram, after shutdown every poll is in
 * exactly one bucket. */
static void check_histogram(aspen_runtime* rt) {
    aspen_metrics m;
    uint64_t sum = 0;
    int i;
    m.size = sizeof m;
    CHECK(aspen_runtime_shutdown(rt) == ASPEN_OK);
    CHECK(aspen_runtime_metrics(rt, &m) == ASPEN_OK);
    for (i = 0; i < ASPEN_POLL_TIME_BUCKETS; i++) sum += m.poll_time_histogram[i];
    CHECK(m.polls > 0);
    CHECK(sum == m.polls);
    CHECK(m.longest_poll_ns <= m.poll_time_ns);
}

/* The paused clock: a one-hour sleep ends at once, an hour later on the
 * task's clock. */
struct hour {
    aspen_timer* timer;
    uint64_t start, end;
};

static aspen_status hour_poll(void* data, aspen_context* cx) {
    struct hour* h = data;
    aspen_status st;
    if (!h->timer) {
        h->start = aspen_now_ns();
        if (aspen_timer_new(3600ull * 1000000000ull, &h->timer) != ASPEN_OK) return ASPEN_ENOMEM;
    }
    st = aspen_timer_poll(h->timer, cx);
    if (st != ASPEN_READY) return st;
    h->end = aspen_now_ns();
    aspen_timer_free(h->timer);
    h->timer = NULL;
    return ASPEN_READY;
}

static void run_paused(int current_thread) {
    aspen_config cfg;
    aspen_runtime* rt = NULL;
    struct hour h = {NULL, 0, 0};
    CHECK(aspen_config_init(&cfg) == ASPEN_OK);
    cfg.current_thread = current_thread;
    cfg.workers = 2;
    cfg.start_paused = 1;
    CHECK(aspen_runtime_new(&cfg, &rt) == ASPEN_OK);
    if (!rt) return;
    CHECK(aspen_block_on(rt, hour_poll, &h, NULL) == ASPEN_OK);
    CHECK(h.end - h.start >= 3600ull * 1000000000ull);
    CHECK(aspen_runtime_free(rt) == ASPEN_OK);
}

static void run_scenario(int current_thread, size_t workers) {
    aspen_config cfg;
    aspen_runtime* rt = NULL;
    atomic_int sum = 0;
    atomic_int drops = 0;
    int i;
    aspen_join* joins[8];
    CHECK(aspen_config_init(&cfg) == ASPEN_OK);
    cfg.current_thread = current_thread;
    cfg.workers = workers;
    cfg.coop_budget = 4; /* the channel loops below yield often */
    cfg.poll_time_histogram = 1;
    CHECK(aspen_runtime_new(&cfg, &rt) == ASPEN_OK);
    if (!rt) return;
    for (i = 0; i < 8; i++) {
        struct sleeper* s = calloc(1, sizeof *s);
        s->rounds = 2;
        s->id = i + 1;
        s->sum = &sum;
        s->drops = &drops;
        CHECK(aspen_spawn(rt, sleeper_poll, s, sleeper_drop, &joins[i]) == ASPEN_OK);
    }
    for (i = 0; i < 8; i++) {
        CHECK(aspen_join_wait(joins[i]) == ASPEN_OK);
        CHECK(aspen_join_is_finished(joins[i]) == 1);
        CHECK(aspen_join_wait(joins[i]) == ASPEN_MISUSE);
        aspen_join_free(joins[i]);
    }
    CHECK(sum == 36);
    CHECK(drops == 8);
    {
        struct parent p = {NULL, ASPEN_ERROR, 0, 0}; /* atomics: plain initialisation is fine */
        CHECK(aspen_block_on(rt, parent_poll, &p, NULL) == ASPEN_OK);
        CHECK(p.child_outcome == ASPEN_OK);
        CHECK(p.sum == 42);
        CHECK(p.drops == 1);
    }
    run_channel(rt, 1);
    run_channel(rt, 16);
    run_channel(rt, 0);
    run_close(rt);
    run_ready(rt);
    check_histogram(rt);
    CHECK(aspen_runtime_free(rt) == ASPEN_OK);
}

/* aspen_block_in_place from C: inside a task of a multi-threaded runtime
 * the function's status comes back; on a current-thread one, ASPEN_MISUSE
 * and the function does not run. */
static aspen_status count_call(void* data) {
    ++*(int*)data;
    return ASPEN_EINVAL; /* any status: it is the call's result */
}

struct in_place {
    int calls;
    aspen_status got;
};

static aspen_status in_place_poll(void* data, aspen_context* cx) {
    struct in_place* p = data;
    (void)cx;
    p->got = aspen_block_in_place(count_call, &p->calls);
    return ASPEN_READY;
}

static void run_block_in_place(int current_thread) {
    aspen_config cfg;
    aspen_runtime* rt = NULL;
    struct in_place p = {0, ASPEN_OK};
    CHECK(aspen_config_init(&cfg) == ASPEN_OK);
    cfg.current_thread = current_thread;
    cfg.workers = 1;
    CHECK(aspen_runtime_new(&cfg, &rt) == ASPEN_OK);
    CHECK(aspen_block_on(rt, in_place_poll, &p, NULL) == ASPEN_OK);
    CHECK(p.got == (current_thread ? ASPEN_MISUSE : ASPEN_EINVAL));
    CHECK(p.calls == (current_thread ? 0 : 1));
    CHECK(aspen_runtime_free(rt) == ASPEN_OK);
}

int main(void) {
    aspen_config cfg;
    aspen_runtime* rt = NULL;
    CHECK(aspen_config_init(&cfg) == ASPEN_OK);
    cfg.local_queue_capacity = 3;
    CHECK(aspen_runtime_new(&cfg, &rt) == ASPEN_EINVAL);
    CHECK(rt == NULL);
    printf("invalid config: %s\n", aspen_last_error());
    run_scenario(1, 1);
    run_scenario(0, 2);
    run_paused(1);
    run_paused(0);
    run_block_in_place(0);
    run_block_in_place(1);
    if (failures) return 1;
    puts("capi_c_test: ok");
    return 0;
}
