/*
 * A client process of issue 18's churn check, in C over mooncake_store.h alone
 * (churn_test.go drives it; internal/testutil/churn.go documents the line protocol and
 * python/tests/churn_client.py is the same program in Python):
 *
 *   churn long|short MASTER NAME OBJECT_SIZE SEGMENT_BYTES
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mooncake_store.h"

#define WINDOW 64 /* objects a long-lived client keeps before it reads back the oldest */
#define KEYLEN 96

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;
static mooncake_store_t st;
static size_t size;

static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&out_mu);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    pthread_mutex_unlock(&out_mu);
    va_end(ap);
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The bytes of key: any process recomputes them from the key alone. */
static void value(const char *key, unsigned char *v) {
    uint64_t x = 1469598103934665603ULL;
    for (const char *p = key; *p; p++) x = (x ^ (unsigned char)*p) * 1099511628211ULL;
    for (size_t i = 0; i < size; i++) {
        x += 0x9E3779B97F4A7C15ULL;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        v[i] = (unsigned char)(z ^ (z >> 31));
    }
}

/* The error text without newlines, for one output line. */
static const char *last_error(void) {
    static __thread char buf[1024];
    const char *e = mooncake_store_last_error();
    snprintf(buf, sizeof buf, "%s", e ? e : "");
    for (char *p = buf; *p; p++)
        if (*p == '\n') *p = ' ';
    return buf;
}

/* "ok", "empty" or "wrong": what a get of key returns; got is a buffer of size + 1 bytes. */
static const char *check(const char *key, unsigned char *want, unsigned char *got, int64_t *n) {
    value(key, want);
    *n = mooncake_store_get_into(st, key, got, size + 1);
    if (*n == (int64_t)size && memcmp(want, got, size) == 0) return "ok";
    if (*n < 0) *n = 0;
    return *n == 0 ? "empty" : "wrong";
}

/* The address of key's first replica, from its descriptor's JSON, or "?". */
static void replica_addr(const char *key, char *addr, size_t n) {
    char *json = NULL;
    snprintf(addr, n, "?");
    if (mooncake_store_get_replica_desc(st, key, &json) < 0 || json == NULL) return;
    const char *p = strstr(json, "\"address\":\"");
    if (p) {
        p += strlen("\"address\":\"");
        const char *q = strchr(p, '"');
        if (q && (size_t)(q - p) < n) snprintf(addr, n, "%.*s", (int)(q - p), p);
    }
    mooncake_store_free_buffer(json);
}

static void connect_store(const char *master, uint64_t segment) {
    st = mooncake_store_create();
    int rc = mooncake_store_setup(st, "127.0.0.1", "P2PHANDSHAKE", segment, 16 << 20, "tcp", "", master);
    if (rc != 0) {
        fprintf(stderr, "setup(%s) = %d: %s\n", master, rc, last_error());
        exit(1);
    }
}

/* ---- long-lived ---- */

static const char *name;
static volatile int stopping;
static char live[WINDOW + 1][KEYLEN];
static int nlive;
static long puts_n, gets_n;

static void read_back(const char *key, unsigned char *want, unsigned char *got) {
    int64_t n;
    gets_n++;
    const char *s = check(key, want, got, &n);
    if (strcmp(s, "ok") != 0)
        say("getfail %s %lld %d %lld %s", key, now_ns(), mooncake_store_is_exist(st, key), (long long)n, s);
}

static void *loop(void *arg) {
    (void)arg;
    unsigned char *v = malloc(size), *got = malloc(size + 1);
    char addr[256];
    for (long i = 1; !stopping; i++) {
        char key[KEYLEN];
        snprintf(key, sizeof key, "%s-%d-%ld", name, (int)getpid(), i);
        value(key, v);
        int rc = mooncake_store_put(st, key, v, size, NULL);
        long long t = now_ns();
        puts_n++;
        if (rc != 0) {
            say("putfail %s %lld %d %s", key, t, rc, last_error());
            continue;
        }
        replica_addr(key, addr, sizeof addr);
        say("ack %s %s %lld", key, addr, t);
        memcpy(live[nlive++], key, KEYLEN);
        read_back(key, v, got);
        if (nlive > WINDOW) {
            read_back(live[0], v, got);
            mooncake_store_remove(st, live[0], 0);
            memmove(live[0], live[1], sizeof live[0] * (size_t)(--nlive));
        }
    }
    free(v);
    free(got);
    return NULL;
}

static int long_lived(void) {
    say("ready");
    pthread_t th;
    pthread_create(&th, NULL, loop, NULL);
    unsigned char *want = malloc(size), *got = malloc(size + 1);
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) > 0) {
        if (strncmp(line, "stop", 4) == 0) break;
        if (strncmp(line, "exist ", 6) != 0) continue;
        static char reply[1 << 16];
        size_t o = (size_t)snprintf(reply, sizeof reply, "exist");
        for (char *k = strtok(line + 6, " \n"); k; k = strtok(NULL, " \n")) {
            int64_t n;
            int e = mooncake_store_is_exist(st, k);
            const char *s = check(k, want, got, &n);
            o += (size_t)snprintf(reply + o, sizeof reply - o, " %d/%s", e, s);
        }
        say("%s", reply);
    }
    stopping = 1;
    pthread_join(th, NULL);
    for (int i = 0; i < nlive; i++) read_back(live[i], want, got);
    say("done puts=%ld gets=%ld", puts_n, gets_n);
    /* The driver closes stdin once every long-lived client has read back. */
    while (getline(&line, &cap, stdin) > 0) {
    }
    mooncake_store_destroy(st);
    free(line);
    return 0;
}

/* ---- short-lived ---- */

static int short_lived(void) {
    char me[256], addr[256] = "?", keys[20 * KEYLEN] = "";
    mooncake_store_get_hostname(st, me, sizeof me);
    const char *pref[1] = {me};
    mooncake_replicate_config_t cfg = {.replica_num = 1, .preferred_segments = pref, .preferred_segments_count = 1};
    unsigned char *v = malloc(size);
    for (int i = 0; i < 20; i++) {
        char key[KEYLEN];
        snprintf(key, sizeof key, "%s-%d-%d", name, (int)getpid(), i);
        value(key, v);
        int rc = mooncake_store_put(st, key, v, size, &cfg);
        if (rc != 0) {
            say("putfail %s %lld %d %s", key, now_ns(), rc, last_error());
            continue;
        }
        if (keys[0]) strcat(keys, ",");
        strcat(keys, key);
        if (addr[0] == '?') replica_addr(key, addr, sizeof addr);
    }
    free(v);
    say("ready %s %s", addr, keys);
    char how[32] = "";
    if (!fgets(how, sizeof how, stdin)) return 0;
    if (strncmp(how, "close", 5) == 0) {
        say("closed %d", mooncake_store_close(st));
        while (fgets(how, sizeof how, stdin)) {
        } /* until the driver closes stdin */
        mooncake_store_destroy(st);
        return 0;
    }
    if (strncmp(how, "exit", 4) == 0) exit(0); /* the store is left open */
    while (fgets(how, sizeof how, stdin)) {
    } /* killed meanwhile */
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: churn long|short MASTER NAME OBJECT_SIZE SEGMENT_BYTES\n");
        return 2;
    }
    name = argv[3];
    size = (size_t)strtoull(argv[4], NULL, 10);
    connect_store(argv[2], strtoull(argv[5], NULL, 10));
    return strcmp(argv[1], "long") == 0 ? long_lived() : short_lived();
}
