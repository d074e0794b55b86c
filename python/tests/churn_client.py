"""A client process of issue 18's churn check (internal/testutil/churn.go documents the line
protocol; python/churn_test.go drives it). Not a unittest module: run as

  python3 churn_client.py long|short MASTER NAME OBJECT_SIZE SEGMENT_BYTES

long:  two of these put and get without pause for the whole run and report every put
       ("ack"/"putfail") and every read that did not return the put's bytes ("getfail");
       they answer "exist K..." and "stop" on stdin.
short: puts 20 objects on its own worker, says "ready ADDR KEYS", then closes ("close"),
       exits without closing ("exit"), or waits to be killed.
"""

import os
import random
import sys
import threading
import time
from collections import deque

from mooncake.store import MooncakeDistributedStore, ReplicateConfig

WINDOW = 64  # objects a long-lived client keeps before it reads back and removes the oldest

_out = threading.Lock()


def say(*fields) -> None:
    with _out:
        sys.stdout.write(" ".join(str(f) for f in fields) + "\n")
        sys.stdout.flush()


def value(key: str, n: int) -> bytes:
    """The bytes of key: any process recomputes them from the key alone."""
    return random.Random(key).randbytes(n)


def connect(master: str, segment: int) -> MooncakeDistributedStore:
    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", segment, 16 << 20, "tcp", "", master)
    if rc != 0:
        sys.exit(f"setup({master}) = {rc}: {s.last_error()}")
    return s


def check(s: MooncakeDistributedStore, key: str, v: bytes) -> str:
    """ok, empty or wrong: what a get of key returns."""
    got = s.get(key)
    if got == v:
        return "ok"
    return "empty" if len(got) == 0 else "wrong"


def read_back(s: MooncakeDistributedStore, key: str, v: bytes, counts: list) -> None:
    counts[1] += 1
    got = s.get(key)
    if got != v:
        say("getfail", key, time.time_ns(), s.is_exist(key), len(got), "empty" if len(got) == 0 else "wrong")


def long_lived(master: str, name: str, size: int, segment: int) -> None:
    s = connect(master, segment)
    say("ready")
    stop = threading.Event()
    counts = [0, 0]  # puts, gets
    live = deque()

    def loop() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            key = f"{name}-{os.getpid()}-{i}"
            v = value(key, size)
            rc = s.put(key, v)
            now = time.time_ns()
            counts[0] += 1
            if rc != 0:
                say("putfail", key, now, rc, s.last_error().replace("\n", " "))
                continue
            ds = s.get_replica_desc(key)
            say("ack", key, ds[0].address if ds else "?", now)
            live.append((key, v))
            read_back(s, key, v, counts)
            if len(live) > WINDOW:
                k, old = live.popleft()
                read_back(s, k, old, counts)
                s.remove(k)

    t = threading.Thread(target=loop)
    t.start()
    for line in sys.stdin:
        f = line.split()
        if not f:
            continue
        if f[0] == "exist":
            say("exist", *[f"{s.is_exist(k)}/{check(s, k, value(k, size))}" for k in f[1:]])
        elif f[0] == "stop":
            break
    stop.set()
    t.join()
    for k, v in live:
        read_back(s, k, v, counts)
    say("done", f"puts={counts[0]}", f"gets={counts[1]}")
    sys.stdin.read()  # the driver closes stdin once every long-lived client has read back
    s.close()


def short_lived(master: str, name: str, size: int, segment: int) -> None:
    s = connect(master, segment)
    me = s.get_hostname()
    keys, addr = [], "?"
    for i in range(20):
        key = f"{name}-{os.getpid()}-{i}"
        rc = s.put(key, value(key, size), ReplicateConfig(preferred_segment=me))
        if rc != 0:
            say("putfail", key, time.time_ns(), rc, s.last_error().replace("\n", " "))
            continue
        keys.append(key)
        if addr == "?":
            ds = s.get_replica_desc(key)
            addr = ds[0].address if ds else "?"
    say("ready", addr, ",".join(keys))
    how = sys.stdin.readline().strip()
    if how == "close":
        say("closed", s.close())
        sys.stdin.read()  # until the driver closes stdin
    elif how == "exit":
        sys.exit(0)  # the store is left open: the interpreter's exit handles it
    else:
        sys.stdin.read()  # killed meanwhile


def main() -> None:
    role, master, name, size, segment = sys.argv[1:6]
    (long_lived if role == "long" else short_lived)(master, name, int(size), int(segment))


if __name__ == "__main__":
    main()
