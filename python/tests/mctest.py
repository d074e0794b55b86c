"""Fixtures shared by the suite: where the servers are, and small helpers.

The Go test (python/python_test.go) starts the servers and passes their addresses:
  MOONCAKE_TEST_MASTER               a `mooncake standalone` (one master, one worker)
  MOONCAKE_TEST_CLUSTER              three masters (comma-separated) with two workers
  MOONCAKE_TEST_CLUSTER_WORKER_PIDS  "w1=PID,w2=PID": the cluster's worker processes
  MOONCAKE_TEST_KV_EVENTS            the standalone's KV event publisher (tcp://host:port)
  MOONCAKE_TEST_STRICT=1             a missing fixture fails the test instead of skipping it
Run by hand against your own servers with the same variables (and MOONCAKE_STORE_LIB pointing
at a built libmooncake_store.so if the package is not installed).
"""

import ctypes
import hashlib
import os
import time
import unittest
import uuid
from typing import Callable, Dict


def need(var: str) -> str:
    v = os.environ.get(var, "")
    if not v:
        msg = f"{var} is not set (the Go test python/python_test.go sets it)"
        if os.environ.get("MOONCAKE_TEST_STRICT") == "1":
            raise AssertionError(msg)
        raise unittest.SkipTest(msg)
    return v


def standalone() -> str:
    return need("MOONCAKE_TEST_MASTER")


def cluster() -> str:
    return need("MOONCAKE_TEST_CLUSTER")


def kv_events() -> str:
    return need("MOONCAKE_TEST_KV_EVENTS")


def cluster_worker_pids() -> Dict[str, int]:
    out = {}
    for item in need("MOONCAKE_TEST_CLUSTER_WORKER_PIDS").split(","):
        name, pid = item.split("=")
        out[name] = int(pid)
    return out


def connect(master: str, segment: int = 0):
    """A set-up store on master (a pure client unless segment > 0)."""
    from mooncake.store import MooncakeDistributedStore

    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", segment, 16 << 20, "tcp", "", master)
    if rc != 0:
        raise AssertionError(f"setup({master}) = {rc}: {s.last_error()}")
    return s


class StandaloneCase(unittest.TestCase):
    """A test class sharing one pure client on the standalone: cls.master, cls.s."""

    @classmethod
    def setUpClass(cls):
        cls.master = standalone()
        cls.s = connect(cls.master)

    @classmethod
    def tearDownClass(cls):
        cls.s.close()


def key(prefix: str = "k") -> str:
    """A key no other test uses (tests share the servers)."""
    return f"{prefix}-{uuid.uuid4().hex}"


def value(n: int, seed: int = 0) -> bytes:
    """n deterministic, non-repeating bytes."""
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}:{i}".encode()).digest()
        i += 1
    return bytes(out[:n])


def cbuf(n: int):
    """A zeroed ctypes buffer and its address."""
    b = (ctypes.c_ubyte * n)()
    return b, ctypes.addressof(b)


def wait_for(what: str, cond: Callable[[], bool], timeout: float = 30.0) -> None:
    """Polls cond every 50 ms until it holds or timeout passes (cross-process conditions have
    nothing to wait on)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.05)


def pyzmq():
    """The zmq and msgpack modules: Debian's python3-zmq and python3-msgpack, which the Go test
    makes sure are installed (.ci/ensure-pyzmq.sh). Missing: the test fails under
    MOONCAKE_TEST_STRICT=1, else skips."""
    try:
        import msgpack
        import zmq
    except ImportError:
        msg = "zmq or msgpack is not importable (apt-get install python3-zmq python3-msgpack)"
        if os.environ.get("MOONCAKE_TEST_STRICT") == "1":
            raise AssertionError(msg)
        raise unittest.SkipTest(msg)
    return zmq, msgpack


def torch():
    """The torch module: Debian's python3-torch, which the Go test makes sure is installed
    (.ci/ensure-torch.sh). Missing: the test fails under MOONCAKE_TEST_STRICT=1, else skips."""
    try:
        import torch as t
    except ImportError:
        msg = "torch is not importable (apt-get install python3-torch; .ci/ensure-torch.sh)"
        if os.environ.get("MOONCAKE_TEST_STRICT") == "1":
            raise AssertionError(msg)
        raise unittest.SkipTest(msg)
    return t
