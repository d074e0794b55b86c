"""Layer-wise ranged sessions (issue 21 item 2), run by python/session_test.go against a
cluster of its own: three masters with a 3 s put timeout and one worker of 32 MiB.

  MOONCAKE_TEST_SESSION_MASTERS  the masters' client addresses, comma-separated
  MOONCAKE_TEST_SESSION_METRICS  their /metrics addresses, same order
  MOONCAKE_TEST_SESSION_PIDS     their process ids, same order
"""

import ctypes
import os
import signal
import subprocess
import sys
import time
import unittest
import urllib.request

from mctest import cbuf, connect, key, need, value, wait_for

LAYERS, BLOCKS, PAGE = 28, 16, 4096
OBJ = LAYERS * PAGE
BIG = 20 << 20  # most of the 32 MiB worker: a second one fits only once the first is freed
PUT_TIMEOUT = 3.0


def metric(addr: str, name: str) -> float:
    try:
        with urllib.request.urlopen(f"http://{addr}/metrics", timeout=2) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
    except OSError:
        pass
    return -1.0


def write_layers(s, keys, src_ptr, layers):
    for layer in layers:
        ptrs = [[src_ptr + i * OBJ + layer * PAGE] for i in range(len(keys))]
        rcs = s.batch_put_from_multi_buffer_ranges(keys, ptrs, [[PAGE]] * len(keys), [[layer * PAGE]] * len(keys))
        assert rcs == [PAGE] * len(keys), (layer, rcs, s.last_error())


class SessionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.masters = need("MOONCAKE_TEST_SESSION_MASTERS").split(",")
        cls.metrics = need("MOONCAKE_TEST_SESSION_METRICS").split(",")
        cls.pids = [int(p) for p in need("MOONCAKE_TEST_SESSION_PIDS").split(",")]
        cls.s = connect(",".join(cls.masters))
        cls.src, cls.src_ptr = cbuf(BLOCKS * OBJ)
        ctypes.memmove(cls.src, value(BLOCKS * OBJ, 21), BLOCKS * OBJ)

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def put_big_when_free(self, what: str):
        """A put of BIG bytes succeeds once the space a session held is free (polled: the
        leader's expiry and the worker's drop are asynchronous)."""
        k = key("big")
        v = value(BIG, 5)
        wait_for(what, lambda: self.s.put(k, v) == 0, timeout=30)
        self.assertEqual(self.s.remove(k), 0)

    def test_a_layers_byte_exact(self):
        s = self.s
        keys = [key(f"block{i}") for i in range(BLOCKS)]
        self.assertEqual(s.batch_put_session_start(keys, [OBJ] * BLOCKS), [0] * BLOCKS, s.last_error())
        # Starting a key twice in one store, or writing a key with no session, is refused.
        self.assertEqual(s.batch_put_session_start(keys[:1], [OBJ]), [-705])
        self.assertEqual(s.batch_put_from_multi_buffer_ranges([key("none")], [[self.src_ptr]], [[8]], [[0]]), [-600])
        write_layers(s, keys[: BLOCKS // 2], self.src_ptr, range(LAYERS))
        write_layers(s, keys, self.src_ptr, [])  # nothing
        for layer in range(LAYERS):
            ptrs = [[self.src_ptr + i * OBJ + layer * PAGE] for i in range(BLOCKS // 2, BLOCKS)]
            rcs = s.batch_put_from_multi_buffer_ranges(keys[BLOCKS // 2 :], ptrs, [[PAGE]] * (BLOCKS // 2), [[layer * PAGE]] * (BLOCKS // 2))
            self.assertEqual(rcs, [PAGE] * (BLOCKS // 2))
            if layer == LAYERS // 2:
                # Nothing is visible before the end.
                self.assertEqual(s.batch_is_exist(keys), [0] * BLOCKS)
        self.assertEqual(s.batch_put_session_end(keys), [0] * BLOCKS, s.last_error())
        self.assertEqual(s.batch_put_session_end(keys[:1]), [-600])  # ended already
        for i in (0, BLOCKS - 1):
            self.assertEqual(s.get(keys[i]), bytes(self.src)[i * OBJ : (i + 1) * OBJ])

        dst, dst_ptr = cbuf(BLOCKS * OBJ)
        self.assertEqual(s.batch_get_session_start(keys + [key("missing")]), [0] * BLOCKS + [-704])
        for layer in reversed(range(LAYERS)):
            # Each layer in two halves, the second half first.
            half = PAGE // 2
            ptrs = [[dst_ptr + i * OBJ + layer * PAGE + half, dst_ptr + i * OBJ + layer * PAGE] for i in range(BLOCKS)]
            offs = [[layer * PAGE + half, layer * PAGE]] * BLOCKS
            rcs = s.batch_get_into_multi_buffer_ranges(keys, ptrs, [[half, half]] * BLOCKS, offs)
            self.assertEqual(rcs, [PAGE] * BLOCKS, s.last_error())
        self.assertEqual(bytes(dst), bytes(self.src))
        self.assertEqual(s.batch_get_session_end(keys), 0)
        self.assertEqual(s.batch_get_into_multi_buffer_ranges(keys[:1], [[dst_ptr]], [[8]], [[0]]), [-600])
        # Shapes that do not match are INVALID_PARAMS for every key.
        self.assertEqual(s.batch_get_into_multi_buffer_ranges(keys[:2], [[dst_ptr]], [[8]], [[0]]), [-600, -600])

    def test_b_revoke_frees(self):
        s = self.s
        k = key("revoked")
        src, ptr = cbuf(BIG)
        self.assertEqual(s.batch_put_session_start([k], [BIG]), [0], s.last_error())
        self.assertEqual(s.batch_put_from_multi_buffer_ranges([k], [[ptr]], [[BIG // 2]], [[0]]), [BIG // 2])
        # Half written: the end refuses it (INVALID_PARAMS) and the session stays for revoke.
        self.assertEqual(s.batch_put_session_end([k]), [-600])
        self.assertEqual(s.batch_put_session_revoke([k]), [0])
        self.assertEqual(s.batch_put_session_revoke([k]), [-600])
        self.assertEqual(s.is_exist(k), 0)
        self.put_big_when_free("the revoked session's space")

    def test_c_abandoned_frees(self):
        k = key("abandoned")
        prog = f"""
import ctypes, os, sys
from mooncake.store import MooncakeDistributedStore
s = MooncakeDistributedStore()
assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", {",".join(self.masters)!r}) == 0
buf = (ctypes.c_ubyte * {BIG})()
assert s.batch_put_session_start([{k!r}], [{BIG}]) == [0], s.last_error()
assert s.batch_put_from_multi_buffer_ranges([{k!r}], [[ctypes.addressof(buf)]], [[{BIG // 2}]], [[0]]) == [{BIG // 2}]
print("mid-session", flush=True)
os._exit(0)  # no close, no atexit: the session is abandoned
"""
        out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("mid-session", out.stdout)
        self.assertEqual(self.s.is_exist(k), 0)
        self.put_big_when_free("the abandoned session's space")
        self.assertEqual(self.s.is_exist(k), 0)

    def leader(self) -> int:
        for i, m in enumerate(self.metrics):
            if metric(m, "master_raft_is_leader") == 1:
                return i
        return -1

    def test_d_leader_change(self):
        """Killing the leader mid-session: a session that ends within the new leader's grace
        (its put timeout after the election) commits whole; one that ends after it fails
        cleanly (INVALID_VERSION), nothing visible, and its space is freed at once by revoke."""
        s = self.s
        wait_for("a leader", lambda: self.leader() >= 0)
        old = self.leader()
        soon = [key(f"soon{i}") for i in range(BLOCKS)]
        late = [key(f"late{i}") for i in range(BLOCKS)]
        self.assertEqual(s.batch_put_session_start(soon + late, [OBJ] * 2 * BLOCKS), [0] * 2 * BLOCKS, s.last_error())
        write_layers(s, soon, self.src_ptr, range(LAYERS // 2))
        write_layers(s, late, self.src_ptr, range(LAYERS // 2))
        os.kill(self.pids[old], signal.SIGKILL)
        wait_for("a new leader", lambda: self.leader() not in (-1, old))
        write_layers(s, soon, self.src_ptr, range(LAYERS // 2, LAYERS))
        write_layers(s, late, self.src_ptr, range(LAYERS // 2, LAYERS))
        end = s.batch_put_session_end(soon)
        # Either outcome is clean per key; within the grace it is the commit.
        for i, rc in enumerate(end):
            if rc == 0:
                self.assertEqual(s.get(soon[i]), bytes(self.src)[i * OBJ : (i + 1) * OBJ])
            else:
                self.assertLess(rc, 0)
                self.assertEqual(s.is_exist(soon[i]), 0)
        self.assertEqual(end, [0] * BLOCKS, s.last_error())
        time.sleep(PUT_TIMEOUT + 1)  # past the new leader's grace
        end = s.batch_put_session_end(late)
        self.assertEqual(end, [-300] * BLOCKS, s.last_error())
        self.assertEqual(s.batch_is_exist(late), [0] * BLOCKS)
        self.assertEqual(s.batch_put_session_revoke(late), [0] * BLOCKS)


if __name__ == "__main__":
    unittest.main()
