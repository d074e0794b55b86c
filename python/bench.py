#!/usr/bin/env python3
"""Throughput and latency of mooncake.store from Python, case for case with the Go client.

    python3 python/bench.py --master 127.0.0.1:50051 [--json] [--quick]

Cases (one thread, one operation at a time, objects on the store's workers):
  get_into/1MiB, get_into/16MiB, get_into/64MiB   GB/s (10^9 bytes/s) into a ctypes buffer
  put_from/1MiB, put_from/16MiB                   GB/s from a ctypes buffer (fresh keys)
  put_from/64KiB, put_from/1MiB                   median latency in microseconds (fresh keys;
                                                  issue 23's single-thread put, p50)
  batch_get_into/64x64KiB                         GB/s of one batch of 64 objects of 64 KiB
  get/4KiB                                        median latency in microseconds (get -> bytes)
  is_exist+get/4KiB                               median latency of is_exist then get of a key
                                                  whose placement the client no longer caches

The Go benchmark BenchmarkPythonVsGo (python/bench_test.go) runs the same cases with the Go
client against the same store, alternating with this script, and reports the ratios; run that
to compare (`go test -run '^$' -bench PythonVsGo -benchtime 1x ./python/`). Standard library only.
"""

import argparse
import ctypes
import json
import os
import statistics
import sys
import time
import uuid

try:
    from mooncake.store import MooncakeDistributedStore
except ImportError:  # not installed: the sources beside this file (set MOONCAKE_STORE_LIB)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from mooncake.store import MooncakeDistributedStore

MiB, KiB = 1 << 20, 1 << 10


def _buf(n, fill=0):
    b = (ctypes.c_ubyte * n)()
    if fill:
        ctypes.memset(b, fill, n)
    return b, ctypes.addressof(b)


def _check(rc, what, s):
    if rc < 0:
        raise SystemExit(f"bench: {what} = {rc}: {s.last_error()}")


def get_into(s, size, seconds):
    keys = [f"bench-py-{uuid.uuid4().hex}-{i}" for i in range(4)]
    src, sp = _buf(size, 7)
    for k in keys:
        _check(s.put_from(k, sp, size), "put_from", s)
    dst, dp = _buf(size)
    s.get_into(keys[0], dp, size)  # warm: connections, lookups
    n, t0 = 0, time.perf_counter()
    while True:
        _check(s.get_into(keys[n % len(keys)], dp, size), "get_into", s)
        n += 1
        el = time.perf_counter() - t0
        if el >= seconds and n >= 3:
            break
    s.batch_remove(keys)
    return n * size / el / 1e9


def put_from(s, size, seconds):
    src, sp = _buf(size, 9)
    prefix = f"bench-py-put-{uuid.uuid4().hex}"
    _check(s.put_from(prefix + "-warm", sp, size), "put_from", s)
    keys = [prefix + "-warm"]
    n, t0 = 0, time.perf_counter()
    while True:
        k = f"{prefix}-{n}"
        _check(s.put_from(k, sp, size), "put_from", s)
        keys.append(k)
        n += 1
        el = time.perf_counter() - t0
        if el >= seconds and n >= 3:
            break
    s.batch_remove(keys)
    return n * size / el / 1e9


def batch_get_into(s, count, size, seconds):
    keys = [f"bench-py-b-{uuid.uuid4().hex}-{i}" for i in range(count)]
    src, sp = _buf(size, 3)
    _check(min(s.batch_put_from(keys, [sp] * count, [size] * count)), "batch_put_from", s)
    bufs = [_buf(size) for _ in range(count)]
    ptrs, sizes = [p for _, p in bufs], [size] * count
    s.batch_get_into(keys, ptrs, sizes)
    n, t0 = 0, time.perf_counter()
    while True:
        r = s.batch_get_into(keys, ptrs, sizes)
        _check(min(r), "batch_get_into", s)
        n += 1
        el = time.perf_counter() - t0
        if el >= seconds and n >= 3:
            break
    s.batch_remove(keys)
    return n * count * size / el / 1e9


def _median_us(count, call, check):
    """Median time of call(i) for i in range(count), one at a time, in microseconds;
    check(i, result) runs after each call, outside the timing."""
    lat = []
    for i in range(count):
        t0 = time.perf_counter()
        r = call(i)
        lat.append(time.perf_counter() - t0)
        check(i, r)
    return statistics.median(lat) * 1e6


def _check_get(s, size):
    def check(_, v):
        if len(v) != size:
            raise SystemExit(f"bench: get returned {len(v)} bytes: {s.last_error()}")
    return check


def put_latency(s, size, count):
    src, sp = _buf(size, 5)
    prefix = f"bench-py-putlat-{uuid.uuid4().hex}"
    keys = [f"{prefix}-{i}" for i in range(count + 1)]  # keys[0] warms up, untimed
    _check(s.put_from(keys[0], sp, size), "put_from", s)
    med = _median_us(count, lambda i: s.put_from(keys[i + 1], sp, size),
                     lambda _, rc: _check(rc, "put_from", s))
    s.batch_remove(keys)
    return med


def get_latency(s, size, count):
    k = f"bench-py-lat-{uuid.uuid4().hex}"
    src, sp = _buf(size, 7)  # put needs a local buffer (setup gives none): put_from
    _check(s.put_from(k, sp, size), "put_from", s)
    s.get(k)
    med = _median_us(count, lambda _: s.get(k), _check_get(s, size))
    s.remove(k)
    return med


def exists_get_latency(s, size, count):
    keys = [f"bench-py-eg-{uuid.uuid4().hex}-{i}" for i in range(count)]
    src, sp = _buf(size, 7)
    for k in keys:
        _check(s.put_from(k, sp, size), "put_from", s)
    time.sleep(1.2)  # past the lookup cache's TTL (1 s): the puts' placements are forgotten

    def exists_then_get(i):
        if s.is_exist(keys[i]) != 1:
            raise SystemExit(f"bench: is_exist({keys[i]}) is not 1: {s.last_error()}")
        return s.get(keys[i])

    med = _median_us(count, exists_then_get, _check_get(s, size))
    for k in keys:
        s.remove(k)
    return med


def run(master, quick):
    s = MooncakeDistributedStore()
    _check(s.setup("127.0.0.1", "", 0, 0, "tcp", "", master), "setup", s)
    sec = 0.3 if quick else 1.0
    out = {
        "get_into/1MiB GB/s": get_into(s, 1 * MiB, sec),
        "get_into/16MiB GB/s": get_into(s, 16 * MiB, sec),
        "get_into/64MiB GB/s": get_into(s, 64 * MiB, sec),
        "put_from/1MiB GB/s": put_from(s, 1 * MiB, sec),
        "put_from/16MiB GB/s": put_from(s, 16 * MiB, sec),
        "batch_get_into/64x64KiB GB/s": batch_get_into(s, 64, 64 * KiB, sec),
        "put_from/64KiB p50-µs": put_latency(s, 64 * KiB, 300 if quick else 2000),
        "put_from/1MiB p50-µs": put_latency(s, 1 * MiB, 100 if quick else 500),
        "get/4KiB p50-µs": get_latency(s, 4 * KiB, 300 if quick else 2000),
        "is_exist+get/4KiB p50-µs": exists_get_latency(s, 4 * KiB, 300 if quick else 2000),
    }
    s.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--master", required=True, help="master address(es), host:port[,host:port...]")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--quick", action="store_true", help="shorter runs (0.3 s per case)")
    a = ap.parse_args()
    r = run(a.master, a.quick)
    if a.json:
        print(json.dumps(r))
    else:
        for k, v in r.items():
            print(f"{k:32s} {v:10.3f}")


if __name__ == "__main__":
    main()
