"""Every method of MooncakeDistributedStore against a `mooncake standalone`."""

import ctypes
import gc
import multiprocessing
import os
import signal
import sys
import threading
import unittest

import mctest
from mooncake.store import (
    BufferHandle,
    ErrorCode,
    MooncakeDistributedStore,
    ReplicateConfig,
    SoftPinAction,
    parse_size,
)

INVALID = int(ErrorCode.INVALID_PARAMS)
NOT_FOUND = int(ErrorCode.OBJECT_NOT_FOUND)
NOT_SET_UP = int(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS)


class StoreTest(mctest.StandaloneCase):
    # -- put / get --

    def test_put_get(self):
        s, k, v = self.s, mctest.key(), mctest.value(100_000)
        self.assertEqual(s.put(k, v), 0)
        self.assertEqual(s.get(k), v)
        self.assertEqual(s.get(key=k), v)
        self.assertEqual(s.get(mctest.key("miss")), b"")
        # Any bytes-like value, read in place; bytes keys too.
        for val in (bytearray(b"ba"), memoryview(b"xmvx")[1:3], (ctypes.c_char * 3)(*b"abc")):
            k2 = mctest.key().encode()
            self.assertEqual(s.put(key=k2, value=val, config=None), 0)
            self.assertEqual(s.get(k2), bytes(val))

    def test_put_existing_keeps_value_upsert_replaces(self):
        s, k = self.s, mctest.key()
        self.assertEqual(s.put(k, b"one"), 0)
        self.assertEqual(s.put(k, b"two"), 0)  # Mooncake: not an error, first value stays
        self.assertEqual(s.get(k), b"one")
        self.assertEqual(s.upsert(k, b"three"), 0)
        self.assertEqual(s.get(k), b"three")
        k2 = mctest.key()
        self.assertEqual(s.upsert(k2, b"new"), 0)  # upsert of a missing key inserts
        self.assertEqual(s.get(k2), b"new")

    def test_empty_value_refused(self):
        k = mctest.key()
        self.assertEqual(self.s.put(k, b""), INVALID)
        self.assertEqual(self.s.is_exist(k), 0)
        self.assertIn("", self.s.last_error())

    def test_put_parts(self):
        s, k = self.s, mctest.key()
        self.assertEqual(s.put_parts(k, b"Hello, ", bytearray(b"World"), memoryview(b"!")), 0)
        self.assertEqual(s.get(k), b"Hello, World!")
        self.assertEqual(s.upsert_parts(k, b"a", b"b", config=ReplicateConfig()), 0)
        self.assertEqual(s.get(k), b"ab")

    def test_batches(self):
        s = self.s
        keys = [mctest.key() for _ in range(5)]
        vals = [mctest.value(1000 * (i + 1), i) for i in range(5)]
        self.assertEqual(s.put_batch(keys, vals), 0)
        self.assertEqual(s.get_batch(keys), vals)
        miss = mctest.key("miss")
        self.assertEqual(s.get_batch([keys[0], miss]), [vals[0], b""])
        self.assertEqual(s.upsert_batch(keys[:2], [b"x", b"y"]), 0)
        self.assertEqual(s.get_batch(keys[:2]), [b"x", b"y"])
        self.assertEqual(s.put_batch(keys, vals[:2]), INVALID)  # mismatched lengths
        self.assertEqual(s.batch_is_exist(keys + [miss]), [1] * 5 + [0])
        self.assertEqual(s.put_batch([], []), 0)
        self.assertEqual(s.get_batch([]), [b""])  # Mooncake: an empty batch is a total failure, [b""]

    def test_exist_size_remove(self):
        s, k = self.s, mctest.key()
        self.assertEqual(s.is_exist(k), 0)
        self.assertEqual(s.get_size(k), NOT_FOUND)
        s.put(k, b"12345")
        self.assertEqual(s.is_exist(k), 1)
        self.assertEqual(s.get_size(k), 5)
        self.assertEqual(s.remove(k), 0)
        self.assertEqual(s.remove(k), NOT_FOUND)
        self.assertEqual(s.is_exist(k), 0)
        ks = [mctest.key() for _ in range(3)]
        s.put_batch(ks[:2], [b"a", b"b"])
        self.assertEqual(s.batch_remove(ks, force=True), [0, 0, NOT_FOUND])

    def test_remove_by_regex(self):
        s = self.s
        prefix = mctest.key("re")
        for i in range(4):
            s.put(f"{prefix}/{i}", b"v")
        s.put(f"{prefix}-other", b"v")
        self.assertEqual(s.remove_by_regex(f"^{prefix}/"), 4)
        self.assertEqual(s.is_exist(f"{prefix}-other"), 1)
        self.assertEqual(s.remove_by_regex("(unclosed"), INVALID)
        self.assertEqual(s.remove_by_regex(regex_pattern=f"^{prefix}", force=False), 1)

    def test_remove_all(self):
        # Its own store on the same cluster: remove_all removes everything, so it must not
        # race other tests (unittest runs one test at a time).
        s = self.s
        s.put(mctest.key(), b"v")
        n = s.remove_all()
        self.assertGreaterEqual(n, 1)
        self.assertEqual(s.remove_all(force=True), 0)

    # -- zero copy --

    def test_put_from_get_into_ctypes(self):
        s, k = self.s, mctest.key()
        v = mctest.value(3 << 20)
        src = (ctypes.c_ubyte * len(v)).from_buffer_copy(v)
        dst, dptr = mctest.cbuf(len(v) + 100)
        self.assertEqual(s.register_buffer(ctypes.addressof(src), len(v)), 0)
        self.assertEqual(s.register_buffer(dptr, len(v) + 100), 0)
        self.assertEqual(s.put_from(k, ctypes.addressof(src), len(v)), 0)
        self.assertEqual(s.get_into(k, dptr, len(v) + 100), len(v))
        self.assertEqual(bytes(dst[: len(v)]), v)
        self.assertEqual(bytes(dst[len(v):]), bytes(100))  # nothing past the object
        small, sptr = mctest.cbuf(100)
        self.assertEqual(s.get_into(k, sptr, 100), INVALID)  # buffer too small
        self.assertIn("", s.last_error())
        self.assertEqual(s.get_into(mctest.key("miss"), dptr, 10), NOT_FOUND)
        self.assertEqual(s.upsert_from(k, ctypes.addressof(src), 10), 0)
        self.assertEqual(s.get_size(k), 10)
        self.assertEqual(s.unregister_buffer(ctypes.addressof(src)), 0)
        self.assertEqual(s.unregister_buffer(ctypes.addressof(src)), INVALID)  # not registered
        self.assertEqual(s.unregister_buffer(dptr), 0)

    def test_batch_put_from_get_into(self):
        s = self.s
        keys = [mctest.key() for _ in range(8)]
        vals = [mctest.value(4096 * (i + 1), i) for i in range(8)]
        srcs = [(ctypes.c_ubyte * len(v)).from_buffer_copy(v) for v in vals]
        ptrs = [ctypes.addressof(b) for b in srcs]
        self.assertEqual(s.batch_put_from(keys, ptrs, [len(v) for v in vals]), [0] * 8)
        dsts = [mctest.cbuf(len(v)) for v in vals]
        got = s.batch_get_into(keys, [p for _, p in dsts], [len(v) for v in vals])
        self.assertEqual(got, [len(v) for v in vals])
        for (b, _), v in zip(dsts, vals):
            self.assertEqual(bytes(b), v)
        # A miss and a too-small buffer fail only their own entries.
        r = s.batch_get_into([keys[0], mctest.key("miss"), keys[2]], [dsts[0][1]] * 3, [len(vals[0]), 10, 10])
        self.assertEqual(r, [len(vals[0]), NOT_FOUND, INVALID])
        # Mismatched lengths: INVALID_PARAMS for every key.
        self.assertEqual(s.batch_put_from(keys, ptrs[:2], [1, 1]), [INVALID] * 8)
        self.assertEqual(s.batch_get_into(keys[:2], ptrs, [1]), [INVALID] * 2)
        self.assertEqual(s.batch_upsert_from(keys[:1], ptrs[:1], [5]), [0])
        self.assertEqual(s.get_size(keys[0]), 5)

    def test_multi_buffers(self):
        s = self.s
        keys = [mctest.key() for _ in range(3)]
        parts = [[mctest.value(1000, 10 * i + j) for j in range(i + 1)] for i in range(3)]
        srcs = [[(ctypes.c_ubyte * len(p)).from_buffer_copy(p) for p in ps] for ps in parts]
        self.assertEqual(
            s.batch_put_from_multi_buffers(
                keys, [[ctypes.addressof(b) for b in bs] for bs in srcs], [[len(p) for p in ps] for ps in parts]
            ),
            [0, 0, 0],
        )
        # Read back scattered over differently cut buffers: 700 + rest for each.
        outs = []
        for ps in parts:
            total = sum(len(p) for p in ps)
            outs.append([mctest.cbuf(700), mctest.cbuf(total - 700)])
        got = s.batch_get_into_multi_buffers(
            keys, [[p for _, p in o] for o in outs], [[len(b) for b, _ in o] for o in outs], True
        )
        self.assertEqual(got, [sum(len(p) for p in ps) for ps in parts])
        for o, ps in zip(outs, parts):
            self.assertEqual(b"".join(bytes(b) for b, _ in o), b"".join(ps))
        # Too little room: INVALID_PARAMS for that key only; shape mismatch: for all.
        tiny = mctest.cbuf(10)
        self.assertEqual(s.batch_get_into_multi_buffers(keys[:1], [[tiny[1]]], [[10]])[0], INVALID)
        self.assertEqual(s.batch_get_into_multi_buffers(keys, [[tiny[1]]], [[10]]), [INVALID] * 3)
        self.assertEqual(s.batch_put_from_multi_buffers(keys[:1], [[tiny[1]]], [[1, 2]]), [INVALID])

    def test_get_into_ranges(self):
        s = self.s
        k1, k2 = mctest.key(), mctest.key()
        v1, v2 = mctest.value(64, 1), mctest.value(64, 2)
        s.put(k1, v1)
        s.put(k2, v2)
        b0, p0 = mctest.cbuf(32)
        b1, p1 = mctest.cbuf(32)
        self.assertEqual(s.register_buffer(p0, 32), 0)
        self.assertEqual(s.register_buffer(p1, 32), 0)
        # Mooncake's documented example, shape for shape.
        res = s.get_into_ranges(
            [p0, p1],
            [[k1, k2], [k2, k1]],
            [[[0, 20], [8]], [[4], [16]]],
            [[[1, 30], [2]], [[0], [10]]],
            [[[4, 3], [5]], [[6], [4]]],
        )
        self.assertEqual(res, [[[4, 3], [5]], [[6], [4]]])
        self.assertEqual(bytes(b0[0:4]), v1[1:5])
        self.assertEqual(bytes(b0[20:23]), v1[30:33])
        self.assertEqual(bytes(b0[8:13]), v2[2:7])
        self.assertEqual(bytes(b1[4:10]), v2[0:6])
        self.assertEqual(bytes(b1[16:20]), v1[10:14])
        # A missing key fails its own fragment; a range past the object's end and a
        # destination past the registered buffer are INVALID_PARAMS.
        res = s.get_into_ranges([p0], [[mctest.key("miss"), k1, k1, k1]], [[[0], [0], [0], [30]]], [[[0], [0], [60], [0]]], [[[4], [4], [10], [4]]])
        self.assertEqual(res, [[[NOT_FOUND], [4], [INVALID], [INVALID]]])
        # Shape mismatch: INVALID_PARAMS in the entries it covers.
        self.assertEqual(s.get_into_ranges([p0], [[k1]], [[[0, 1]]], [[[0]]], [[[4]]]), [[[INVALID, INVALID]]])
        self.assertEqual(s.get_into_ranges([p0, p1], [[k1]], [[[0]]], [[[0]]], [[[4]]]), [[[INVALID]]])
        # An unregistered (or no longer registered) destination is refused.
        self.assertEqual(s.unregister_buffer(p1), 0)
        self.assertEqual(s.get_into_ranges([p1], [[k1]], [[[0]]], [[[0]]], [[[4]]]), [[[INVALID]]])
        s.unregister_buffer(p0)

    # -- buffers owned by the library --

    def test_get_buffer(self):
        s, k = self.s, mctest.key()
        v = mctest.value(10_000)
        s.put(k, v)
        h = s.get_buffer(k)
        self.assertIsInstance(h, BufferHandle)
        self.assertEqual((h.size(), len(h)), (len(v), len(v)))
        self.assertNotEqual(h.ptr(), 0)
        self.assertEqual(ctypes.string_at(h.ptr(), h.size()), v)
        m = memoryview(h)
        self.assertEqual((m.nbytes, m.itemsize, m.ndim), (len(v), 1, 1))  # format "<B": numpy reads it as uint8
        self.assertEqual(bytes(m), v)
        del h
        gc.collect()
        self.assertEqual(bytes(m), v)  # the view keeps the handle (and its memory) alive
        m.release()
        self.assertIsNone(s.get_buffer(mctest.key("miss")))
        hs = s.batch_get_buffer([k, mctest.key("miss"), k])
        self.assertEqual([None if x is None else bytes(x) for x in hs], [v, None, v])
        del hs
        gc.collect()

    def test_replica_desc_hostname_health(self):
        s, k = self.s, mctest.key()
        s.put(k, b"x" * 100)
        ds = s.get_replica_desc(k)
        self.assertEqual(len(ds), 1)
        self.assertTrue(ds[0].is_memory_replica())
        self.assertFalse(ds[0].is_disk_replica())
        self.assertTrue(ds[0].segment_name)
        self.assertTrue(ds[0].get_memory_descriptor().buffer_descriptor)
        self.assertEqual(s.get_replica_desc(mctest.key("miss")), [])
        self.assertEqual(list(s.batch_get_replica_desc([k]).keys()), [k])
        self.assertTrue(s.get_hostname())
        self.assertEqual(s.health_check(), 0)

    # -- replicate config --

    def test_replicate_config(self):
        s = self.s
        c = ReplicateConfig()
        self.assertEqual((c.replica_num, c.with_hard_pin, c.soft_pin_action), (1, False, SoftPinAction.PRESERVE))
        c.with_hard_pin = True
        c.soft_pin_action = SoftPinAction.ENABLE
        c.soft_pin_ttl_ms = 60_000
        c.persistence = "cache"
        c.preferred_segment = s.get_replica_desc(self._any_key())[0].segment_name
        k = mctest.key()
        self.assertEqual(s.put(k, b"pinned", c), 0)
        self.assertEqual(s.get(k), b"pinned")
        old = ReplicateConfig(with_soft_pin=True)  # Mooncake's older spelling
        self.assertEqual(s.put(mctest.key(), b"v", config=old), 0)
        # More replicas than workers: a code, and nothing visible.
        k2 = mctest.key()
        self.assertEqual(s.put(k2, b"v", ReplicateConfig(replica_num=2)), int(ErrorCode.NO_AVAILABLE_HANDLE))
        self.assertEqual(s.is_exist(k2), 0)
        with self.assertRaises(TypeError):
            ReplicateConfig(replicas=2)
        with self.assertRaises(ValueError):
            s.put(k2, b"v", ReplicateConfig(persistence="forever"))
        # Mooncake's binding checks types on assignment (pybind11): TypeError.
        with self.assertRaises(TypeError):
            ReplicateConfig(replica_num=-1)
        with self.assertRaises(TypeError):
            ReplicateConfig(replica_num="2")
        with self.assertRaises(TypeError):
            ReplicateConfig(soft_pin_action=7)
        self.assertEqual(s.is_exist(k2), 0)

    def _any_key(self):
        k = mctest.key()
        self.s.put(k, b"x")
        return k

    # -- bad input --

    def test_bad_input(self):
        s = self.s
        with self.assertRaises(TypeError):
            s.put(123, b"v")
        with self.assertRaises(TypeError):
            s.put("k", "a str is not bytes")
        with self.assertRaises(TypeError):
            s.put("k", b"v", cfg=None)  # unknown keyword
        with self.assertRaises(TypeError):
            s.get_into("k", "not a pointer", 10)
        with self.assertRaises(TypeError):
            s.batch_get_into("k", [1], [1])  # a single key where a list is expected
        with self.assertRaises(ValueError):
            s.put("a\0b", b"v")
        k = mctest.key()
        with self.assertRaises(TypeError):
            s.put_parts(k, b"a", "a str part")
        self.assertEqual(s.is_exist(k), 0)  # nothing half-written
        long_key = "k" * 4097
        self.assertEqual(s.put(long_key, b"v"), int(ErrorCode.INVALID_KEY))
        src, sp = mctest.cbuf(8)
        self.assertEqual(s.batch_put_from([k, long_key], [sp, sp], [8, 8])[1], int(ErrorCode.INVALID_KEY))
        self.assertEqual(s.get(long_key), b"")
        self.assertEqual(s.is_exist(long_key), -1)
        self.assertEqual(s.put("", b"v"), int(ErrorCode.INVALID_KEY))
        self.assertEqual(s.get_into(mctest.key(), 0, 10), INVALID)  # NULL with a size
        self.assertEqual(s.get_into(mctest.key(), -5, 10), INVALID)
        self.assertEqual(s.put_from(mctest.key(), 0, 10), INVALID)
        self.assertEqual(s.register_buffer(0, 10), INVALID)
        self.assertTrue(s.last_error())
        self.assertEqual(s.health_check(), 0)  # still alive

    def test_not_set_up(self):
        s = MooncakeDistributedStore()
        self.assertEqual(s.put("k", b"v"), NOT_SET_UP)
        self.assertEqual(s.get("k"), b"")
        self.assertIsNone(s.get_buffer("k"))
        self.assertEqual(s.is_exist("k"), -1)
        self.assertEqual(s.batch_is_exist(["k"]), [-1])
        self.assertEqual(s.get_into("k", 1, 1), NOT_SET_UP)
        self.assertEqual(s.batch_get_into(["k"], [1], [1]), [NOT_SET_UP])
        self.assertEqual(s.health_check(), 1)
        self.assertEqual(s.get_hostname(), "")
        self.assertIn("setup", s.last_error())
        self.assertEqual(s.close(), 0)

    def test_unknown_method_is_an_attribute_error(self):
        with self.assertRaises(AttributeError):
            self.s.no_such_method()

    # -- lifecycle --

    def test_close_and_setup_again(self):
        s = mctest.connect(self.master)
        k = mctest.key()
        self.assertEqual(s.put(k, b"v1"), 0)
        self.assertEqual(s.setup("127.0.0.1", "", 0, 0, "tcp", "", self.master), INVALID)  # already set up
        self.assertEqual(s.close(), 0)
        self.assertEqual(s.close(), 0)
        self.assertEqual(s.get(k), b"")
        self.assertEqual(s.put(k, b"v2"), NOT_SET_UP)
        self.assertEqual(s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", self.master), 0)
        self.assertEqual(s.get(k), b"v1")
        s.close()

    def test_setup_dict_and_sizes(self):
        s = MooncakeDistributedStore()
        cfg = {
            "local_hostname": "127.0.0.1",
            "metadata_server": "P2PHANDSHAKE",
            "global_segment_size": 0,
            "local_buffer_size": "16 MB",
            "protocol": "tcp",
            "device_name": "",
            "master_server_address": self.master,
        }
        self.assertEqual(s.setup(cfg), 0)
        self.assertEqual(s.health_check(), 0)
        s.close()
        # A bad value is a code, as in Mooncake (test_compat.py has the whole list).
        self.assertEqual(s.setup(dict(cfg, global_segment_size="50%")), INVALID)
        self.assertEqual(s.setup(dict(cfg, no_such_key=1)), INVALID)
        self.assertEqual(s.setup(dict(cfg, local_buffer_size=1.5)), INVALID)
        with self.assertRaises(TypeError):
            s.setup("127.0.0.1", "", 0, 0, "tcp", "", self.master, unknown_keyword=1)
        self.assertEqual(s.setup("127.0.0.1", "", 0, 0, "tcp", "", self.master, engine=object()), int(ErrorCode.NOT_SUPPORTED))
        # Keywords by Mooncake's names, sizes as strings.
        self.assertEqual(
            s.setup(local_hostname="127.0.0.1", metadata_server="", global_segment_size="0", local_buffer_size="1GB",
                    protocol="rdma", rdma_devices="mlx5_0", master_server_addr=self.master),
            0,
        )
        s.close()
        # Binary units, as Mooncake parses sizes: MB = MiB, GB = GiB.
        self.assertEqual(parse_size("x", "16MB"), 16 << 20)
        self.assertEqual(parse_size("x", "16 MB"), 16 << 20)
        self.assertEqual(parse_size("x", "80GB"), 80 << 30)
        self.assertEqual(parse_size("x", "16MiB"), 16 << 20)
        self.assertEqual(parse_size("x", "1.5GiB"), 3 << 29)
        self.assertEqual(parse_size("x", "4G"), 4 << 30)
        self.assertEqual(parse_size("x", 4096), 4096)
        for bad in ("", "MB", "-1", "12 parsecs", "10%"):
            with self.assertRaises(ValueError, msg=bad):
                parse_size("x", bad)

    def test_setup_dummy(self):
        s = MooncakeDistributedStore()
        self.assertEqual(s.setup_dummy(256 << 20, 64 << 20, self.master), 0)
        k = mctest.key()
        self.assertEqual(s.put(k, b"dummy"), 0)
        self.assertEqual(s.get(k), b"dummy")
        s.close()

    # -- concurrency and processes --

    def test_eight_threads(self):
        s, errors = self.s, []

        def work(t):
            try:
                buf, ptr = mctest.cbuf(256 << 10)
                for i in range(20):
                    k, v = mctest.key(f"t{t}"), mctest.value(1000 + 7919 * i % (200 << 10), t * 100 + i)
                    if s.put(k, v) != 0:
                        errors.append(f"put {k}: {s.last_error()}")
                    if s.get_into(k, ptr, len(buf)) != len(v) or bytes(buf[: len(v)]) != v:
                        errors.append(f"get_into {k}")
                    if s.get(k) != v or s.is_exist(k) != 1 or s.remove(k) != 0:
                        errors.append(f"get/exist/remove {k}")
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])

    def test_gil_released_during_calls(self):
        # With a huge switch interval, another thread can run only while this one releases
        # the GIL, so it can see in_call set only if the library call released it.
        s, k = self.s, mctest.key()
        v = mctest.value(32 << 20)
        s.put(k, v)
        buf, ptr = mctest.cbuf(len(v))
        state = {"in_call": False, "seen": 0, "stop": False}

        def watch():
            while not state["stop"]:
                if state["in_call"]:
                    state["seen"] += 1
                threading.Event().wait(0.0002)

        old = sys.getswitchinterval()
        t = threading.Thread(target=watch)
        t.start()
        try:
            sys.setswitchinterval(100)
            for _ in range(5):
                state["in_call"] = True
                n = s.get_into(k, ptr, len(buf))
                state["in_call"] = False
                self.assertEqual(n, len(v))
                if state["seen"]:
                    break
        finally:
            sys.setswitchinterval(old)
            state["stop"] = True
            t.join()
        self.assertGreater(state["seen"], 0, "no other thread ran during get_into: the GIL was held")

    def test_signals_stay_pythons(self):
        # The library (loaded by setUpClass) installs no handler for asynchronous signals:
        # a handler installed now still runs while Go threads are busy, and SIGINT still
        # raises KeyboardInterrupt.
        s, got, stop = self.s, [], threading.Event()
        old = signal.signal(signal.SIGUSR1, lambda *a: got.append(1))

        def load():
            while not stop.is_set():
                k = mctest.key("sig")
                s.put(k, b"x" * 4096)
                s.get(k)
                s.remove(k)

        t = threading.Thread(target=load)
        t.start()
        try:
            for _ in range(50):
                os.kill(os.getpid(), signal.SIGUSR1)
                threading.Event().wait(0.002)
            mctest.wait_for("SIGUSR1 handled", lambda: len(got) > 0, timeout=10)
            with self.assertRaises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                threading.Event().wait(5)
        finally:
            stop.set()
            t.join()
            signal.signal(signal.SIGUSR1, old)

    def test_spawn_child(self):
        k, child_key = mctest.key(), mctest.key("child")
        self.s.put(k, b"from parent")
        ctx = multiprocessing.get_context("spawn")
        q = ctx.Queue()
        p = ctx.Process(target=_child, args=(self.master, k, child_key, q))
        p.start()
        p.join(60)
        self.assertEqual(p.exitcode, 0)
        self.assertEqual(q.get(timeout=5), "ok")
        self.assertEqual(self.s.get(child_key), b"from child")

    @unittest.skipUnless(hasattr(os, "fork"), "needs fork")
    def test_fork_after_load_fails_clearly(self):
        # A child forked after the library loaded has no Go runtime threads: calls must fail
        # with a code and a text that says what to do, not hang.
        k = mctest.key()
        self.s.put(k, b"v")
        pid = os.fork()
        if pid == 0:
            ok = self.s.get(k) == b"" and self.s.put(k, b"x") == NOT_SET_UP and "spawn" in self.s.last_error()
            try:
                MooncakeDistributedStore().setup("127.0.0.1", "", 0, 0, "tcp", "", self.master)
                ok = False
            except RuntimeError:
                pass
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        self.assertEqual(self.s.get(k), b"v")  # the parent is unaffected


def _child(master, k, child_key, q):
    """Runs in a process made with multiprocessing "spawn": a fresh interpreter that loads the
    library itself. init_all finds the masters in MOONCAKE_MASTER, set here from Python (the
    library reads it with C's getenv, so a variable set after start counts)."""
    os.environ["MOONCAKE_MASTER"] = master
    s = MooncakeDistributedStore()
    rc = s.init_all("tcp", "", 0)
    if rc != 0:
        q.put(f"init_all = {rc}: {s.last_error()}")
        return
    if s.get(k) != b"from parent":
        q.put("child read the wrong bytes")
        return
    if s.put(child_key, b"from child") != 0:
        q.put(f"child put: {s.last_error()}")
        return
    s.close()
    q.put("ok")


if __name__ == "__main__":
    unittest.main()
