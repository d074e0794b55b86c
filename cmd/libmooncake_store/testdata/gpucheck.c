/*
 * gpucheck.c: the C library's GPU memory paths against testdata/fakecuda.c, a fake CUDA driver
 * whose device memory faults when touched from the host (see there), run by cuda_test.go
 * against a real `mooncake standalone`. It proves the detection and staging logic, not a GPU.
 *
 * Usage: gpucheck MASTER MODE, MODE one of
 *   nodriver  the fake libcuda.so.1 is on the library path but the process never loads it:
 *             host calls work and the library loads no driver (checked in /proc/self/maps);
 *   preload   the process loads libcuda.so.1 itself first (as torch does): device ranges are
 *             classified and staged in every call that takes a caller's address;
 *   override  MOONCAKE_CUDA_DRIVER_PATH names the fake: the library loads it on its first
 *             classification, then as preload.
 * Prints "ok all" and exits 0, or "FAIL ..." lines and exits 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake_store.h"

#include "checks.h"

static void *(*dev_alloc)(size_t, int);
static void (*dev_write)(void *, const void *, size_t);
static void (*dev_read)(void *, const void *, size_t);
static int (*dev_inits)(void);
static int (*dev_copies)(void);
static int (*dev_pinned_allocs)(void);

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 131 + seed + (i >> 12));
}

static int mapped(const char *name) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, name)) found = 1;
    if (f) fclose(f);
    return found;
}

static void bind(void *h) {
    dev_alloc = (void *(*)(size_t, int))dlsym(h, "fake_alloc");
    dev_write = (void (*)(void *, const void *, size_t))dlsym(h, "fake_write");
    dev_read = (void (*)(void *, const void *, size_t))dlsym(h, "fake_read");
    dev_inits = (int (*)(void))dlsym(h, "fake_inits");
    dev_copies = (int (*)(void))dlsym(h, "fake_copies");
    dev_pinned_allocs = (int (*)(void))dlsym(h, "fake_pinned_allocs");
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    if (!dev_alloc || !init || init(0) != 0) {
        printf("FAIL the fake driver: %s\n", dlerror());
        exit(1);
    }
}

/* host_only: a put and a get of host memory. */
static void host_only(mooncake_store_t s) {
    unsigned char a[5000], b[5000];
    fill(a, sizeof a, 1);
    EQ(mooncake_store_put_from(s, "h", a, sizeof a, NULL), 0, "host put_from");
    EQ(mooncake_store_get_into(s, "h", b, sizeof b), sizeof a, "host get_into");
    CHECK(memcmp(a, b, sizeof a) == 0, "host bytes");
}

/* round_trips: put_from and upsert_from from device memory at odd offsets, read back into
 * host memory and into device memory. */
static void round_trips(mooncake_store_t s) {
    size_t sizes[] = {1024, 1027, (1 << 20) + 1, 8 << 20};
    size_t offs[] = {0, 3, 1, 4096 + 7};
    for (int i = 0; i < 4; i++) {
        size_t n = sizes[i], off = offs[i];
        unsigned char *src = malloc(n), *back = malloc(n);
        unsigned char *d1 = (unsigned char *)dev_alloc(n + off, 0) + off, *d2 = (unsigned char *)dev_alloc(n + off, 0) + off;
        fill(src, n, (unsigned)i);
        dev_write(d1, src, n);
        char key[64];
        snprintf(key, sizeof key, "dev-%zu", n);
        EQ(mooncake_store_put_from(s, key, d1, n, NULL), 0, "device put_from");
        memset(back, 0, n);
        EQ(mooncake_store_get_into(s, key, back, n), n, "get_into host");
        CHECK(memcmp(src, back, n) == 0, "device -> host bytes (%zu at +%zu)", n, off);
        EQ(mooncake_store_get_into(s, key, d2, n), n, "get_into device");
        memset(back, 0, n);
        dev_read(back, d2, n);
        CHECK(memcmp(src, back, n) == 0, "device -> device bytes (%zu at +%zu)", n, off);
        fill(src, n, 77);
        dev_write(d1, src, n);
        EQ(mooncake_store_upsert_from(s, key, d1, n, NULL), 0, "device upsert_from");
        EQ(mooncake_store_get_into(s, key, d2, n), n, "get_into device after upsert");
        dev_read(back, d2, n);
        CHECK(memcmp(src, back, n) == 0, "upserted bytes");
        free(src), free(back);
    }
    /* A get into a device buffer larger than the object writes the object's bytes only. */
    unsigned char *d = dev_alloc(8192, 0), mark[8192], got[8192];
    memset(mark, 0xee, sizeof mark);
    dev_write(d, mark, sizeof mark);
    EQ(mooncake_store_get_into(s, "dev-1024", d, 8192), 1024, "get_into a larger device buffer");
    dev_read(got, d, sizeof got);
    CHECK(got[1024] == 0xee && got[8191] == 0xee, "bytes past the object are untouched");
}

/* batches: batch_put_from, batch_upsert_from and batch_get_into with host and device buffers
 * mixed; the multi-buffer forms with device parts; get_into_ranges into a registered device
 * buffer. */
static void batches(mooncake_store_t s) {
    enum { N = 6, SZ = 70000 };
    const char *keys[N] = {"b0", "b1", "b2", "b3", "b4", "b5"};
    void *bufs[N], *outs[N];
    size_t sizes[N];
    unsigned char src[N][SZ], host_out[N][SZ], back[SZ];
    int res[N];
    int64_t res64[N];
    for (int i = 0; i < N; i++) {
        fill(src[i], SZ, 10 + i);
        sizes[i] = SZ - i;
        if (i % 2) {
            bufs[i] = (unsigned char *)dev_alloc(SZ + 1, 0) + 1;
            dev_write(bufs[i], src[i], SZ);
            outs[i] = (unsigned char *)dev_alloc(SZ + 1, 0) + 1;
        } else {
            bufs[i] = src[i];
            outs[i] = host_out[i];
        }
    }
    EQ(mooncake_store_batch_put_from(s, keys, bufs, sizes, N, NULL, res), 0, "batch_put_from");
    for (int i = 0; i < N; i++) EQ(res[i], 0, "batch_put_from item");
    EQ(mooncake_store_batch_upsert_from(s, keys, bufs, sizes, N, NULL, res), 0, "batch_upsert_from");
    for (int i = 0; i < N; i++) EQ(res[i], 0, "batch_upsert_from item");
    EQ(mooncake_store_batch_get_into(s, keys, outs, sizes, N, res64), 0, "batch_get_into");
    for (int i = 0; i < N; i++) {
        EQ(res64[i], sizes[i], "batch_get_into item");
        if (i % 2) dev_read(back, outs[i], sizes[i]);
        else memcpy(back, outs[i], sizes[i]);
        CHECK(memcmp(back, src[i], sizes[i]) == 0, "batch item %d bytes", i);
    }
    /* A second batch_get_into of the same keys (cached lookups: the no-wait first pass). */
    EQ(mooncake_store_batch_get_into(s, keys, outs, sizes, N, res64), 0, "batch_get_into again");
    for (int i = 1; i < N; i += 2) {
        dev_read(back, outs[i], sizes[i]);
        CHECK(res64[i] == (int64_t)sizes[i] && memcmp(back, src[i], sizes[i]) == 0, "batch again item %d", i);
    }

    /* Multi-buffer: object "m" is a device part, a host part and a device part. */
    const char *mkeys[1] = {"m"};
    unsigned char host_part[3000];
    void *parts[3] = {dev_alloc(5000, 0), host_part, (unsigned char *)dev_alloc(7001, 0) + 1};
    size_t psizes[3] = {5000, 3000, 7000}, pcount[1] = {3};
    unsigned char whole[15000], got[15000];
    fill(whole, sizeof whole, 99);
    dev_write(parts[0], whole, 5000);
    memcpy(host_part, whole + 5000, 3000);
    dev_write(parts[2], whole + 8000, 7000);
    EQ(mooncake_store_batch_put_from_multi_buffers(s, mkeys, 1, parts, psizes, pcount, NULL, res), 0, "multi put");
    EQ(res[0], 0, "multi put item");
    EQ(mooncake_store_get_into(s, "m", got, sizeof got), sizeof whole, "multi get_into host");
    CHECK(memcmp(got, whole, sizeof whole) == 0, "multi put bytes");
    void *oparts[3] = {dev_alloc(5000, 0), malloc(3000), (unsigned char *)dev_alloc(7001, 0) + 1};
    EQ(mooncake_store_batch_get_into_multi_buffers(s, mkeys, 1, oparts, psizes, pcount, res64), 0, "multi get");
    EQ(res64[0], sizeof whole, "multi get item");
    memset(got, 0, sizeof got);
    dev_read(got, oparts[0], 5000);
    memcpy(got + 5000, oparts[1], 3000);
    dev_read(got + 8000, oparts[2], 7000);
    CHECK(memcmp(got, whole, sizeof whole) == 0, "multi get bytes");
    free(oparts[1]);

    /* get_into_ranges: two fragments into a registered device buffer. */
    unsigned char *reg = dev_alloc(65536, 0);
    EQ(mooncake_store_register_buffer(s, reg, 65536), 0, "register_buffer device");
    const char *rkeys[2] = {"b1", "b2"};
    void *rdst[2] = {reg + 5, reg + 40000};
    uint64_t roffs[2] = {100, 7};
    size_t rsizes[2] = {1000, 2000};
    EQ(mooncake_store_get_into_ranges(s, 2, rkeys, rdst, roffs, rsizes, res64), 0, "get_into_ranges");
    EQ(res64[0], 1000, "range 0");
    EQ(res64[1], 2000, "range 1");
    dev_read(back, reg + 5, 1000);
    CHECK(memcmp(back, src[1] + 100, 1000) == 0, "range 0 bytes");
    dev_read(back, reg + 40000, 2000);
    CHECK(memcmp(back, src[2] + 7, 2000) == 0, "range 1 bytes");
    EQ(mooncake_store_unregister_buffer(s, reg), 0, "unregister_buffer device");
}

/* errors: a range crossing its allocation, device memory with no context: INVALID_PARAMS. */
static void errors(mooncake_store_t s) {
    unsigned char *d = dev_alloc(4096, 0);
    EQ(mooncake_store_put_from(s, "x", d + 4000, 200, NULL), MOONCAKE_ERR_INVALID_PARAMS, "put_from crossing");
    CHECK(strstr(mooncake_store_last_error(), "runs past its device allocation") != NULL, "crossing message");
    EQ(mooncake_store_get_into(s, "dev-1024", d + 4000, 1024), MOONCAKE_ERR_INVALID_PARAMS, "get_into crossing");
    EQ(mooncake_store_register_buffer(s, d + 1, 4096), MOONCAKE_ERR_INVALID_PARAMS, "register_buffer crossing");
    unsigned char *other = dev_alloc(4096, 1);
    EQ(mooncake_store_put_from(s, "x", other, 100, NULL), MOONCAKE_ERR_INVALID_PARAMS, "put_from, no context");
    CHECK(strstr(mooncake_store_last_error(), "no context") != NULL, "no-context message");
    const char *keys[2] = {"e0", "e1"};
    unsigned char host[100];
    void *bufs[2] = {host, d + 4000};
    size_t sizes[2] = {100, 200};
    int res[2];
    CHECK(mooncake_store_batch_put_from(s, keys, bufs, sizes, 2, NULL, res) == MOONCAKE_ERR_INVALID_PARAMS,
          "batch_put_from crossing");
    EQ(mooncake_store_is_exist(s, "x"), 0, "nothing stored by a failed call");
}

/* sessions: a layer-wise put session written from device ranges (one small range per layer,
 * as a layer-wise connector writes) and a get session read into device ranges, byte-exact. */
static void sessions(mooncake_store_t s) {
    enum { L = 28, PAGE = 8192 + 3 };
    static unsigned char src[L * PAGE], back[L * PAGE];
    unsigned char *d = dev_alloc(L * PAGE, 0), *o = dev_alloc(L * PAGE, 0);
    fill(src, sizeof src, 91);
    dev_write(d, src, sizeof src);
    const char *keys[1] = {"dev-sess"};
    size_t objsz[1] = {L * PAGE};
    int res[1];
    int64_t got[1];
    EQ(mooncake_store_batch_put_session_start(s, keys, objsz, 1, NULL, res), 0, "put_session_start");
    EQ(res[0], 0, "put_session_start item");
    for (int layer = 0; layer < L; layer += 2) { /* two layers a call, as two ranges */
        void *bufs[2] = {d + layer * PAGE, d + (layer + 1) * PAGE};
        size_t sizes[2] = {PAGE, PAGE}, counts[1] = {2};
        uint64_t offs[2] = {(uint64_t)layer * PAGE, (uint64_t)(layer + 1) * PAGE};
        EQ(mooncake_store_batch_put_from_multi_buffer_ranges(s, keys, 1, bufs, sizes, offs, counts, got), 0, "device ranges");
        EQ(got[0], 2 * PAGE, "device ranges written");
    }
    EQ(mooncake_store_batch_put_session_end(s, keys, 1, res), 0, "put_session_end");
    EQ(res[0], 0, "put_session_end item");
    EQ(mooncake_store_get_into(s, "dev-sess", back, sizeof back), sizeof back, "session object get_into host");
    CHECK(memcmp(src, back, sizeof src) == 0, "session put from device bytes");
    EQ(mooncake_store_batch_get_session_start(s, keys, 1, res), 0, "get_session_start");
    void *gbufs[L];
    size_t gsizes[L], gcounts[1] = {L};
    uint64_t goffs[L];
    for (int layer = 0; layer < L; layer++) /* layers in reverse into the device buffer */
        gbufs[layer] = o + layer * PAGE, gsizes[layer] = PAGE, goffs[layer] = (uint64_t)(L - 1 - layer) * PAGE;
    EQ(mooncake_store_batch_get_into_multi_buffer_ranges(s, keys, 1, gbufs, gsizes, goffs, gcounts, got), 0, "get ranges");
    EQ(got[0], L * PAGE, "get ranges read");
    dev_read(back, o, sizeof back);
    int same = 1;
    for (int layer = 0; layer < L; layer++)
        same &= memcmp(back + layer * PAGE, src + (L - 1 - layer) * PAGE, PAGE) == 0;
    CHECK(same, "session get into device bytes");
    EQ(mooncake_store_batch_get_session_end(s, keys, 1), 0, "get_session_end");
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: gpucheck MASTER nodriver|preload|override\n");
        return 2;
    }
    const char *mode = argv[2];
    void *h = NULL;
    if (strcmp(mode, "preload") == 0) {
        h = dlopen("libcuda.so.1", RTLD_NOW);
        if (!h) return printf("FAIL dlopen libcuda.so.1: %s\n", dlerror()), 1;
        bind(h);
    }
    mooncake_store_t s = mooncake_store_create();
    EQ(mooncake_store_setup(s, "localhost", "", 0, 0, "tcp", "", argv[1]), 0, "setup");
    CHECK(mooncake_store_remove_all(s, 1) >= 0, "remove_all"); /* the modes share a master */
    host_only(s);
    if (strcmp(mode, "nodriver") == 0) {
        CHECK(!mapped("libcuda"), "libcuda is mapped after host calls");
    } else {
        if (strcmp(mode, "override") == 0) {
            CHECK(mapped("libcuda"), "the library did not load MOONCAKE_CUDA_DRIVER_PATH");
            h = dlopen(getenv("MOONCAKE_CUDA_DRIVER_PATH"), RTLD_NOW | RTLD_NOLOAD);
            if (!h) return printf("FAIL the override is not loaded: %s\n", dlerror()), 1;
            bind(h);
        }
        int before = dev_copies();
        EQ(before, 0, "host calls made device copies");
        round_trips(s);
        /* Stages of 256 KiB and more are pinned memory from the driver, pooled: a second run
         * of the same round trips pins nothing more. */
        int pinned = dev_pinned_allocs();
        CHECK(pinned > 0, "no pinned staging for MiB-sized device copies");
        CHECK(mooncake_store_remove_all(s, 1) >= 0, "remove_all");
        round_trips(s);
        EQ(dev_pinned_allocs(), pinned, "pinned stages allocated again instead of reused");
        batches(s);
        sessions(s);
        errors(s);
        CHECK(dev_copies() > before, "no device copies");
        EQ(dev_inits(), 2, "cuInit calls (the test's and the library's one)");
    }
    mooncake_store_destroy(s);
    if (failures) return printf("FAIL %d checks failed\n", failures), 1;
    printf("ok all\n");
    return 0;
}
