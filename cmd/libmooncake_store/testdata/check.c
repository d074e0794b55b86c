/*
 * check.c: a C program written against mooncake_store.h alone, run by lib_test.go against a
 * real `mooncake standalone`. Usage: check MASTER_ADDR. Prints "ok <what>" per check and
 * exits 0, or prints "FAIL ..." and exits 1.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "mooncake_store.h"

#include "checks.h"

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 131 + seed);
}

static const char *master;

/* Eight threads put and get their own keys at once on one store. */
struct worker_arg {
    mooncake_store_t store;
    int id;
    int errors;
};

static void *thread_main(void *p) {
    struct worker_arg *a = p;
    unsigned char in[8192], out[8192];
    char key[64];
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "thread-%d-%d", a->id, i);
        fill(in, sizeof in, (unsigned)(a->id * 100 + i));
        if (mooncake_store_put(a->store, key, in, sizeof in, NULL) != 0) a->errors++;
        if (mooncake_store_get_into(a->store, key, out, sizeof out) != (int64_t)sizeof in ||
            memcmp(in, out, sizeof in) != 0)
            a->errors++;
    }
    return NULL;
}

static void check_basics(mooncake_store_t s) {
    unsigned char v[100000], out[100000];
    fill(v, sizeof v, 1);
    EQ(mooncake_store_put(s, "k1", v, sizeof v, NULL), 0, "put");
    /* As Mooncake: a put of an existing key is 0 and keeps the value. */
    unsigned char other[10] = {9};
    EQ(mooncake_store_put(s, "k1", other, sizeof other, NULL), 0, "put existing");
    EQ(mooncake_store_get_into(s, "k1", out, sizeof out), sizeof v, "get_into");
    CHECK(memcmp(v, out, sizeof v) == 0, "get_into bytes differ");
    EQ(mooncake_store_get_into(s, "k1", out, sizeof v - 1), MOONCAKE_ERR_INVALID_PARAMS, "buffer one byte short");
    CHECK(strlen(mooncake_store_last_error()) > 0, "no last error text");
    EQ(mooncake_store_get_into(s, "missing", out, sizeof out), MOONCAKE_ERR_OBJECT_NOT_FOUND, "get a miss");
    EQ(mooncake_store_get_size(s, "k1"), sizeof v, "get_size");
    EQ(mooncake_store_get_size(s, "missing"), MOONCAKE_ERR_OBJECT_NOT_FOUND, "get_size of a miss");
    EQ(mooncake_store_is_exist(s, "k1"), 1, "is_exist");
    EQ(mooncake_store_is_exist(s, "missing"), 0, "is_exist of a miss");
    EQ(mooncake_store_health_check(s), 0, "health_check");

    /* Upsert replaces; put_from / upsert_from are the buffer forms. */
    EQ(mooncake_store_upsert(s, "k1", other, sizeof other, NULL), 0, "upsert");
    EQ(mooncake_store_get_into(s, "k1", out, sizeof out), sizeof other, "get after upsert");
    CHECK(memcmp(out, other, sizeof other) == 0, "upsert bytes differ");
    EQ(mooncake_store_put_from(s, "pf", v, 4096, NULL), 0, "put_from");
    EQ(mooncake_store_upsert_from(s, "pf", v + 1, 4096, NULL), 0, "upsert_from");
    EQ(mooncake_store_get_into(s, "pf", out, sizeof out), 4096, "get after upsert_from");
    CHECK(memcmp(out, v + 1, 4096) == 0, "upsert_from bytes differ");

    /* Library-owned buffer and its free. */
    void *buf = (void *)1;
    EQ(mooncake_store_get_buffer(s, "pf", &buf), 4096, "get_buffer");
    CHECK(buf != NULL && memcmp(buf, v + 1, 4096) == 0, "get_buffer bytes differ");
    mooncake_store_free_buffer(buf);
    EQ(mooncake_store_get_buffer(s, "missing", &buf), MOONCAKE_ERR_OBJECT_NOT_FOUND, "get_buffer of a miss");
    CHECK(buf == NULL, "get_buffer of a miss left a pointer");

    /* Parts. */
    const void *parts[3] = {v, v + 10, v + 500};
    size_t psizes[3] = {10, 490, 7};
    EQ(mooncake_store_put_parts(s, "parts", parts, psizes, 3, NULL), 0, "put_parts");
    EQ(mooncake_store_get_into(s, "parts", out, sizeof out), 507, "get parts");
    CHECK(memcmp(out, v, 507) == 0, "put_parts bytes differ");
    EQ(mooncake_store_upsert_parts(s, "parts", parts, psizes, 1, NULL), 0, "upsert_parts");
    EQ(mooncake_store_get_size(s, "parts"), 10, "size after upsert_parts");

    /* Replica descriptors and the config struct. */
    char *json = NULL;
    int64_t n = mooncake_store_get_replica_desc(s, "parts", &json);
    CHECK(n > 0 && json != NULL && strstr(json, "\"replicas\":[{") != NULL, "replica desc: %lld %s", (long long)n,
          json ? json : "(null)");
    mooncake_store_free_buffer(json);
    mooncake_replicate_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.replica_num = 1;
    cfg.with_hard_pin = 1;
    cfg.soft_pin_action = MOONCAKE_SOFT_PIN_ENABLE;
    cfg.has_soft_pin_ttl = 1;
    cfg.soft_pin_ttl_ms = 60000;
    cfg.persistence = MOONCAKE_PERSISTENCE_CACHE;
    EQ(mooncake_store_put(s, "pinned", v, 64, &cfg), 0, "put with a config");
    cfg.soft_pin_action = 7;
    EQ(mooncake_store_put(s, "badcfg", v, 64, &cfg), MOONCAKE_ERR_INVALID_PARAMS, "bad soft_pin_action");
    cfg.soft_pin_action = MOONCAKE_SOFT_PIN_PRESERVE;
    EQ(mooncake_store_put(s, "ttlnoenable", v, 64, &cfg), MOONCAKE_ERR_INVALID_PARAMS,
       "soft_pin_ttl_ms without ENABLE (Mooncake's master refuses it)");
    cfg.has_soft_pin_ttl = 0;
    cfg.replica_num = 2;
    EQ(mooncake_store_put(s, "tworeplicas", v, 64, &cfg), MOONCAKE_ERR_NO_AVAILABLE_HANDLE, "2 replicas on 1 worker");

    char host[256];
    EQ(mooncake_store_get_hostname(s, host, sizeof host), 0, "get_hostname");
    /* Mooncake's form: local_hostname and a port from 12300-14300 when none was given. */
    int port = strncmp(host, "localhost:", 10) == 0 ? atoi(host + 10) : 0;
    CHECK(port >= 12300 && port <= 14300, "hostname %s", host);
    EQ(mooncake_store_get_hostname(s, host, 1), MOONCAKE_ERR_INVALID_PARAMS, "get_hostname into 1 byte");
    printf("ok basics\n");
}

/* A batch call over the limit, on its own thread: its text must stay there. */
static void *batch_fail_main(void *s) {
    const char *k[1] = {"x"};
    void *b[1] = {NULL};
    size_t n[1] = {1};
    int64_t r[1];
    EQ(mooncake_store_batch_get_into(s, k, b, n, 5000, r), MOONCAKE_ERR_INVALID_PARAMS, "count 5000 on a thread");
    CHECK(strstr(mooncake_store_last_error(), "5000") != NULL, "thread last error: %s", mooncake_store_last_error());
    return NULL;
}

static void check_batches(mooncake_store_t s) {
    enum { N = 4, SZ = 65536 };
    static unsigned char in[N][SZ], out[N][SZ];
    const char *keys[N] = {"b0", "b1", "b2", "b3"};
    void *bufs[N];
    size_t sizes[N];
    int results[N];
    int64_t got[N];
    for (int i = 0; i < N; i++) {
        fill(in[i], SZ, (unsigned)i);
        bufs[i] = in[i];
        sizes[i] = SZ;
    }
    EQ(mooncake_store_batch_put_from(s, keys, bufs, sizes, N, NULL, results), 0, "batch_put_from");
    for (int i = 0; i < N; i++) EQ(results[i], 0, "batch_put_from item");
    EQ(mooncake_store_batch_upsert_from(s, keys, bufs, sizes, 2, NULL, results), 0, "batch_upsert_from");
    EQ(results[0], 0, "batch_upsert_from item");

    const char *gkeys[N] = {"b0", "missing", "b2", "b3"};
    for (int i = 0; i < N; i++) bufs[i] = out[i];
    sizes[3] = SZ - 1; /* too small */
    EQ(mooncake_store_batch_get_into(s, gkeys, bufs, sizes, N, got), 0, "batch_get_into");
    EQ(got[0], SZ, "batch_get_into item 0");
    EQ(got[1], MOONCAKE_ERR_OBJECT_NOT_FOUND, "batch_get_into miss");
    EQ(got[2], SZ, "batch_get_into item 2");
    EQ(got[3], MOONCAKE_ERR_INVALID_PARAMS, "batch_get_into short buffer");
    CHECK(memcmp(out[0], in[0], SZ) == 0 && memcmp(out[2], in[2], SZ) == 0, "batch_get_into bytes differ");
    /* Again, the lookups now cached: items 0 and 2 are read by the first pass on this thread
     * (shared memory, no wait) and the miss by the second. The second pass must not touch
     * what the first wrote, and nothing may write into the buffer of a miss. */
    memset(out, 0xEE, sizeof out);
    EQ(mooncake_store_batch_get_into(s, gkeys, bufs, sizes, N, got), 0, "batch_get_into, cached");
    CHECK(memcmp(out[0], in[0], SZ) == 0 && memcmp(out[2], in[2], SZ) == 0, "batch_get_into bytes differ, cached");
    int untouched = 1;
    for (int i = 0; i < SZ; i++) untouched &= out[1][i] == 0xEE;
    CHECK(untouched, "batch_get_into wrote into the buffer of a miss");
    /* Batches run on a goroutine while this thread waits (offthread.go): the first failed
     * item's text must still become this thread's last error, and a failed call's too. */
    CHECK(strstr(mooncake_store_last_error(), "missing") != NULL, "batch last error: %s", mooncake_store_last_error());
    EQ(mooncake_store_batch_get_into(s, gkeys, NULL, sizes, N, got), MOONCAKE_ERR_INVALID_PARAMS, "batch_get_into NULL buffers");
    CHECK(strstr(mooncake_store_last_error(), "buffers") != NULL, "batch call last error: %s", mooncake_store_last_error());
    pthread_t th; /* another thread's failure stays that thread's */
    pthread_create(&th, NULL, batch_fail_main, s);
    pthread_join(th, NULL);
    CHECK(strstr(mooncake_store_last_error(), "buffers") != NULL, "last error moved threads: %s", mooncake_store_last_error());

    int ex[N];
    EQ(mooncake_store_batch_is_exist(s, gkeys, N, ex), 0, "batch_is_exist");
    CHECK(ex[0] == 1 && ex[1] == 0 && ex[2] == 1, "batch_is_exist: %d %d %d", ex[0], ex[1], ex[2]);

    void *lbufs[N];
    EQ(mooncake_store_batch_get_buffer(s, gkeys, N, lbufs, got), 0, "batch_get_buffer");
    CHECK(got[0] == SZ && lbufs[0] && memcmp(lbufs[0], in[0], SZ) == 0, "batch_get_buffer item 0");
    CHECK(got[1] == MOONCAKE_ERR_OBJECT_NOT_FOUND && lbufs[1] == NULL, "batch_get_buffer miss");
    for (int i = 0; i < N; i++) mooncake_store_free_buffer(lbufs[i]);

    /* Multi-buffer forms: object 0 from 3 parts, object 1 from 1. */
    const char *mkeys[2] = {"m0", "m1"};
    void *mparts[4] = {in[0], in[1], in[2], in[3]};
    size_t msizes[4] = {100, 200, 300, 4000};
    size_t counts[2] = {3, 1};
    EQ(mooncake_store_batch_put_from_multi_buffers(s, mkeys, 2, mparts, msizes, counts, NULL, results), 0,
       "batch_put_from_multi_buffers");
    CHECK(results[0] == 0 && results[1] == 0, "multi put items: %d %d", results[0], results[1]);
    void *mouts[4] = {out[0], out[1], out[2], out[3]};
    EQ(mooncake_store_batch_get_into_multi_buffers(s, mkeys, 2, mouts, msizes, counts, got), 0,
       "batch_get_into_multi_buffers");
    CHECK(got[0] == 600 && got[1] == 4000, "multi get sizes: %lld %lld", (long long)got[0], (long long)got[1]);
    CHECK(memcmp(out[0], in[0], 100) == 0 && memcmp(out[1], in[1], 200) == 0 && memcmp(out[2], in[2], 300) == 0 &&
              memcmp(out[3], in[3], 4000) == 0,
          "multi get bytes differ");

    /* Ranges: into a registered buffer; an unregistered destination is refused. */
    static unsigned char rbuf[1024];
    EQ(mooncake_store_register_buffer(s, rbuf, sizeof rbuf), 0, "register_buffer");
    const char *rkeys[3] = {"b0", "b2", "b0"};
    void *dsts[3] = {rbuf, rbuf + 100, out[0]};
    uint64_t offs[3] = {10, 60000, 0};
    size_t rsizes[3] = {50, 5000, 8};
    EQ(mooncake_store_get_into_ranges(s, 3, rkeys, dsts, offs, rsizes, got), 0, "get_into_ranges");
    EQ(got[0], 50, "range 0");
    EQ(got[1], MOONCAKE_ERR_INVALID_PARAMS, "range past the end");
    EQ(got[2], MOONCAKE_ERR_INVALID_PARAMS, "range into an unregistered buffer");
    CHECK(memcmp(rbuf, in[0] + 10, 50) == 0, "range bytes differ");
    EQ(mooncake_store_unregister_buffer(s, rbuf), 0, "unregister_buffer");
    EQ(mooncake_store_unregister_buffer(s, rbuf), MOONCAKE_ERR_INVALID_PARAMS, "unregister twice");

    /* Removes. */
    EQ(mooncake_store_remove(s, "b3", 0), 0, "remove");
    EQ(mooncake_store_remove(s, "b3", 1), MOONCAKE_ERR_OBJECT_NOT_FOUND, "remove a miss");
    const char *rm[2] = {"b2", "missing"};
    EQ(mooncake_store_batch_remove(s, rm, 2, 0, results), 0, "batch_remove");
    CHECK(results[0] == 0 && results[1] == MOONCAKE_ERR_OBJECT_NOT_FOUND, "batch_remove items %d %d", results[0],
          results[1]);
    EQ(mooncake_store_remove_by_regex(s, "^m[0-9]$", 0), 2, "remove_by_regex");
    EQ(mooncake_store_remove_by_regex(s, "([", 0), MOONCAKE_ERR_INVALID_PARAMS, "bad regex");
    printf("ok batches\n");
}

/* Layer-wise sessions: 2 objects of 4 layers written a layer per call (last layer first),
 * invisible until the end, then read back by ranges in a get session; a revoked session
 * leaves nothing. */
static void check_sessions(mooncake_store_t s) {
    enum { L = 4, PAGE = 1000, N = 2 };
    static unsigned char src[N][L * PAGE], dst[N][L * PAGE];
    const char *keys[N] = {"sess0", "sess1"};
    size_t objsz[N] = {L * PAGE, L * PAGE};
    int results[N];
    int64_t got[N];
    for (int i = 0; i < N; i++) fill(src[i], sizeof src[i], 40 + i);
    EQ(mooncake_store_batch_put_session_start(s, keys, objsz, N, NULL, results), 0, "put_session_start");
    CHECK(results[0] == 0 && results[1] == 0, "put_session_start items %d %d", results[0], results[1]);
    for (int layer = L - 1; layer >= 0; layer--) {
        void *bufs[N] = {src[0] + layer * PAGE, src[1] + layer * PAGE};
        size_t sizes[N] = {PAGE, PAGE}, counts[N] = {1, 1};
        uint64_t offs[N] = {(uint64_t)layer * PAGE, (uint64_t)layer * PAGE};
        EQ(mooncake_store_batch_put_from_multi_buffer_ranges(s, keys, N, bufs, sizes, offs, counts, got), 0, "ranges");
        CHECK(got[0] == PAGE && got[1] == PAGE, "put ranges layer %d: %lld %lld", layer, (long long)got[0],
              (long long)got[1]);
        EQ(mooncake_store_is_exist(s, "sess0"), 0, "visible before the end");
    }
    EQ(mooncake_store_batch_put_session_end(s, keys, N, results), 0, "put_session_end");
    CHECK(results[0] == 0 && results[1] == 0, "put_session_end items %d %d", results[0], results[1]);
    EQ(mooncake_store_batch_get_session_start(s, keys, N, results), 0, "get_session_start");
    CHECK(results[0] == 0 && results[1] == 0, "get_session_start items %d %d", results[0], results[1]);
    /* Key 0 in one range, key 1 in two (the second half first). */
    void *gbufs[3] = {dst[0], dst[1] + 2 * PAGE, dst[1]};
    size_t gsizes[3] = {L * PAGE, 2 * PAGE, 2 * PAGE}, gcounts[N] = {1, 2};
    uint64_t goffs[3] = {0, 2 * PAGE, 0};
    EQ(mooncake_store_batch_get_into_multi_buffer_ranges(s, keys, N, gbufs, gsizes, goffs, gcounts, got), 0, "get ranges");
    CHECK(got[0] == L * PAGE && got[1] == L * PAGE, "get ranges: %lld %lld", (long long)got[0], (long long)got[1]);
    CHECK(memcmp(src, dst, sizeof src) == 0, "session bytes differ");
    EQ(mooncake_store_batch_get_session_end(s, keys, N), 0, "get_session_end");

    const char *rk[1] = {"sess-revoked"};
    EQ(mooncake_store_batch_put_session_start(s, rk, objsz, 1, NULL, results), 0, "start to revoke");
    EQ(results[0], 0, "start to revoke item");
    EQ(mooncake_store_batch_put_session_revoke(s, rk, 1, results), 0, "revoke");
    EQ(results[0], 0, "revoke item");
    EQ(mooncake_store_batch_put_session_end(s, rk, 1, results), 0, "end after revoke");
    EQ(results[0], MOONCAKE_ERR_INVALID_PARAMS, "end after revoke item");
    EQ(mooncake_store_is_exist(s, "sess-revoked"), 0, "revoked key visible");
    printf("ok sessions\n");
}

static void check_bad_input(mooncake_store_t s) {
    unsigned char out[64] = {0};
    mooncake_store_t bogus = (mooncake_store_t)(uintptr_t)123456;
    EQ(mooncake_store_put(bogus, "k", out, 1, NULL), MOONCAKE_ERR_INVALID_PARAMS, "bad handle");
    EQ(mooncake_store_put(s, NULL, out, 1, NULL), MOONCAKE_ERR_INVALID_PARAMS, "NULL key");
    EQ(mooncake_store_put(s, "", out, 1, NULL), MOONCAKE_ERR_INVALID_KEY, "empty key");
    char *long_key = malloc(5000);
    memset(long_key, 'a', 4999);
    long_key[4999] = 0;
    EQ(mooncake_store_put(s, long_key, out, 1, NULL), MOONCAKE_ERR_INVALID_KEY, "key over 4096 bytes");
    free(long_key);
    EQ(mooncake_store_put(s, "k", NULL, 10, NULL), MOONCAKE_ERR_INVALID_PARAMS, "NULL value");
    EQ(mooncake_store_put(s, "k", out, 0, NULL), MOONCAKE_ERR_INVALID_PARAMS, "empty value");
    EQ(mooncake_store_put(s, "k", (void *)16, 10, NULL), MOONCAKE_ERR_INVALID_PARAMS, "pointer 16");
    EQ(mooncake_store_get_into(s, "k1", (void *)16, 10), MOONCAKE_ERR_INVALID_PARAMS, "get into pointer 16");
    /* A mapped page with no access: the probe faults and the call fails cleanly. */
    void *noaccess = mmap(NULL, 1 << 16, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(noaccess != MAP_FAILED, "mmap");
    EQ(mooncake_store_put(s, "k", noaccess, 1 << 16, NULL), MOONCAKE_ERR_INVALID_PARAMS, "put from PROT_NONE");
    EQ(mooncake_store_get_into(s, "k1", noaccess, 1 << 16), MOONCAKE_ERR_INVALID_PARAMS, "get into PROT_NONE");
    const char *keys[2] = {"k1", "pf"};
    void *bufs[2] = {out, noaccess};
    size_t sizes[2] = {64, 1 << 16};
    int64_t got[2];
    EQ(mooncake_store_batch_get_into(s, keys, bufs, sizes, 2, got), MOONCAKE_ERR_INVALID_PARAMS,
       "batch get into PROT_NONE");
    munmap(noaccess, 1 << 16);
    /* A read-only page: a put reads it, a get must not write it (the write probe faults). */
    void *readonly = mmap(NULL, 1 << 16, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(readonly != MAP_FAILED, "mmap");
    EQ(mooncake_store_get_into(s, "k1", readonly, 1 << 16), MOONCAKE_ERR_INVALID_PARAMS, "get into PROT_READ");
    bufs[1] = readonly;
    EQ(mooncake_store_batch_get_into(s, keys, bufs, sizes, 2, got), MOONCAKE_ERR_INVALID_PARAMS,
       "batch get into PROT_READ");
    munmap(readonly, 1 << 16);
    EQ(mooncake_store_batch_get_into(s, keys, NULL, sizes, 2, got), MOONCAKE_ERR_INVALID_PARAMS, "NULL buffers");
    EQ(mooncake_store_batch_get_into(s, keys, bufs, sizes, 5000, got), MOONCAKE_ERR_INVALID_PARAMS, "count 5000");
    EQ(mooncake_store_register_buffer(s, NULL, 10), MOONCAKE_ERR_INVALID_PARAMS, "register NULL");
    CHECK(strcmp(mooncake_store_error_name(MOONCAKE_ERR_OBJECT_NOT_FOUND), "OBJECT_NOT_FOUND") == 0, "error_name");
    CHECK(strcmp(mooncake_store_error_name(12345), "UNKNOWN") == 0, "error_name unknown");
    printf("ok bad input\n");
}

static void check_threads(mooncake_store_t s) {
    pthread_t th[8];
    struct worker_arg args[8];
    for (int i = 0; i < 8; i++) {
        args[i] = (struct worker_arg){s, i, 0};
        pthread_create(&th[i], NULL, thread_main, &args[i]);
    }
    int errors = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        errors += args[i].errors;
    }
    EQ(errors, 0, "errors in 8 threads");
    printf("ok threads\n");
}

/* close, then setup again with an embedded worker that holds a put made to prefer it. */
static void check_embedded(mooncake_store_t s) {
    EQ(mooncake_store_close(s), 0, "close");
    unsigned char v[4096], out[4096];
    fill(v, sizeof v, 7);
    EQ(mooncake_store_put(s, "k", v, sizeof v, NULL), MOONCAKE_ERR_UNAVAILABLE_IN_CURRENT_STATUS, "put after close");
    EQ(mooncake_store_health_check(s), 1, "health_check after close");
    mooncake_store_set_etcd_tls_config(s, NULL, NULL, NULL); /* Mooncake's call: accepted, no etcd here */
    mooncake_store_set_etcd_tls_config(s, "/no/ca.pem", "", "/no/key.pem");
    EQ(mooncake_store_setup(s, "127.0.0.1", "http://ignored", 32 << 20, 0, "tcp", "", master), 0,
       "setup with a segment");
    char host[256];
    EQ(mooncake_store_get_hostname(s, host, sizeof host), 0, "get_hostname");
    CHECK(strncmp(host, "127.0.0.1:", 10) == 0 && atoi(host + 10) >= 12300 && atoi(host + 10) <= 14300, "hostname %s", host);
    const char *pref[1] = {host};
    mooncake_replicate_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.preferred_segments = pref;
    cfg.preferred_segments_count = 1;
    EQ(mooncake_store_put(s, "embedded", v, sizeof v, &cfg), 0, "put preferring the embedded worker");
    char *json = NULL;
    CHECK(mooncake_store_get_replica_desc(s, "embedded", &json) > 0 && strstr(json, host) != NULL,
          "replica not on the embedded worker %s: %s", host, json ? json : "(null)");
    mooncake_store_free_buffer(json);
    EQ(mooncake_store_get_into(s, "embedded", out, sizeof out), sizeof v, "get from the embedded worker");
    CHECK(memcmp(v, out, sizeof v) == 0, "embedded bytes differ");
    EQ(mooncake_store_setup(s, "127.0.0.1", "", 0, 0, "tcp", "", master), MOONCAKE_ERR_INVALID_PARAMS,
       "setup twice");
    printf("ok embedded\n");
}

/*
 * "check MASTER serve": an embedded worker holding one object for another process. Prints
 * "served <host>" and waits for a line on stdin: "exit" ends the process without closing the
 * store; anything else destroys the store, prints "closed", waits for stdin to close and exits.
 */
static int serve(void) {
    mooncake_store_t s = mooncake_store_create();
    if (mooncake_store_setup(s, "127.0.0.1", "", 32 << 20, 0, "tcp", "", master) != 0) {
        printf("FAIL setup: %s\n", mooncake_store_last_error());
        return 1;
    }
    char host[256];
    mooncake_store_get_hostname(s, host, sizeof host);
    unsigned char v[300000];
    fill(v, sizeof v, 42);
    const char *pref[1] = {host};
    mooncake_replicate_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.preferred_segments = pref;
    cfg.preferred_segments_count = 1;
    if (mooncake_store_put(s, "served", v, sizeof v, &cfg) != 0) {
        printf("FAIL put: %s\n", mooncake_store_last_error());
        return 1;
    }
    printf("served %s\n", host);
    fflush(stdout);
    char line[64];
    if (fgets(line, sizeof line, stdin) == NULL) return 1;
    if (strncmp(line, "exit", 4) == 0) exit(0);
    mooncake_store_destroy(s);
    printf("closed\n");
    fflush(stdout);
    while (fgets(line, sizeof line, stdin) != NULL) {
    }
    return 0;
}

/*
 * "check MASTER bench": the C side of BenchmarkGoClient. Reads commands from stdin, answers
 * each with "ok" (or "FAIL ..." and exits):
 *   prep KEY SIZE          upsert KEY with SIZE bytes
 *   get_into KEY SIZE N    N get_into calls into one SIZE-byte buffer
 *   batch PREFIX M SIZE N  N batch_get_into calls of keys PREFIX0..PREFIX<M-1>, SIZE bytes each
 *   get_buffer KEY N       N get_buffer calls, each buffer freed
 */
static int bench(void) {
    mooncake_store_t s = mooncake_store_create();
    if (mooncake_store_setup(s, "127.0.0.1", "", 0, 0, "tcp", "", master) != 0) {
        printf("FAIL setup: %s\n", mooncake_store_last_error());
        return 1;
    }
    char line[512], key[256];
    unsigned long long size, n, m;
    while (fgets(line, sizeof line, stdin) != NULL) {
        int ok = 1;
        if (sscanf(line, "prep %255s %llu", key, &size) == 2) {
            unsigned char *v = malloc(size);
            fill(v, size, 3);
            ok = mooncake_store_upsert(s, key, v, size, NULL) == 0;
            free(v);
        } else if (sscanf(line, "get_into %255s %llu %llu", key, &size, &n) == 3) {
            unsigned char *b = malloc(size);
            for (unsigned long long i = 0; ok && i < n; i++) ok = mooncake_store_get_into(s, key, b, size) == (int64_t)size;
            free(b);
        } else if (sscanf(line, "batch %200s %llu %llu %llu", key, &m, &size, &n) == 4) {
            char **keys = calloc(m, sizeof *keys);
            void **bufs = calloc(m, sizeof *bufs);
            size_t *sizes = calloc(m, sizeof *sizes);
            int64_t *res = calloc(m, sizeof *res);
            for (unsigned long long j = 0; j < m; j++) {
                keys[j] = malloc(300); /* a prefix of up to 200 bytes and a number */
                snprintf(keys[j], 300, "%s%llu", key, j);
                bufs[j] = malloc(size);
                sizes[j] = size;
            }
            for (unsigned long long i = 0; ok && i < n; i++) {
                ok = mooncake_store_batch_get_into(s, (const char **)keys, bufs, sizes, m, res) == 0 &&
                     res[0] == (int64_t)size && res[m - 1] == (int64_t)size;
            }
            for (unsigned long long j = 0; j < m; j++) {
                free(keys[j]);
                free(bufs[j]);
            }
            free(keys), free(bufs), free(sizes), free(res);
        } else if (sscanf(line, "get_buffer %255s %llu", key, &n) == 2) {
            for (unsigned long long i = 0; ok && i < n; i++) {
                void *b = NULL;
                ok = mooncake_store_get_buffer(s, key, &b) > 0;
                mooncake_store_free_buffer(b);
            }
        } else {
            ok = 0;
        }
        if (!ok) {
            printf("FAIL %s: %s\n", line, mooncake_store_last_error());
            return 1;
        }
        printf("ok\n");
        fflush(stdout);
    }
    mooncake_store_destroy(s);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: check MASTER_ADDR [serve|bench]\n");
        return 2;
    }
    master = argv[1];
    if (argc == 3 && strcmp(argv[2], "serve") == 0) return serve();
    if (argc == 3 && strcmp(argv[2], "bench") == 0) return bench();
    mooncake_store_t s = mooncake_store_create();
    CHECK(s != NULL, "create");
    EQ(mooncake_store_put(s, "k", "v", 1, NULL), MOONCAKE_ERR_UNAVAILABLE_IN_CURRENT_STATUS, "put before setup");
    EQ(mooncake_store_setup(s, "localhost", "", 0, 0, "rdma", "mlx5_0", master), 0, "setup");
    EQ(mooncake_store_remove_all(s, 0) >= 0, 1, "remove_all");
    check_basics(s);
    check_batches(s);
    check_sessions(s);
    check_bad_input(s);
    check_threads(s);
    check_embedded(s);
    mooncake_store_destroy(s);
    EQ(mooncake_store_is_exist(s, "k1"), MOONCAKE_ERR_INVALID_PARAMS, "a destroyed handle");
    if (failures) {
        printf("FAIL %d checks failed\n", failures);
        return 1;
    }
    printf("ok all\n");
    return 0;
}
