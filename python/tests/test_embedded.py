"""An embedded worker: setup with global_segment_size > 0 contributes this process's DRAM."""

import multiprocessing
import unittest

import mctest
from mooncake.store import ReplicateConfig


class EmbeddedWorkerTest(unittest.TestCase):
    def test_embedded_worker_serves_another_process(self):
        master = mctest.standalone()
        s = mctest.connect(master, segment=64 << 20)
        try:
            me = s.get_hostname()
            self.assertTrue(me)
            k, v = mctest.key("emb"), mctest.value(1 << 20, 7)
            # Place the object on this process's worker and check it landed there.
            self.assertEqual(s.put(k, v, ReplicateConfig(preferred_segment=me)), 0)
            ds = s.get_replica_desc(k)
            self.assertEqual([d.address for d in ds], [me], s.last_error())
            self.assertEqual(s.get(k), v)  # a local read
            # A second process (a pure client) reads it from this process's worker.
            ctx = multiprocessing.get_context("spawn")
            q = ctx.Queue()
            p = ctx.Process(target=_reader, args=(master, k, len(v), q))
            p.start()
            p.join(60)
            self.assertEqual(p.exitcode, 0)
            self.assertEqual(q.get(timeout=5), mctest.value(1 << 20, 7)[:16] + b"|ok")
        finally:
            s.close()
        # close() unmounts the worker, as in Mooncake: its objects are gone when it returns.
        other = mctest.connect(master)
        try:
            self.assertEqual(other.is_exist(k), 0)
            self.assertEqual(other.get(k), b"")
        finally:
            other.close()

    def test_exit_without_close_unmounts(self):
        # A process that exits without calling close() is unmounted by the interpreter's exit
        # (atexit): its objects are gone as soon as it has exited.
        master = mctest.standalone()
        ctx = multiprocessing.get_context("spawn")
        q = ctx.Queue()
        p = ctx.Process(target=_put_and_exit, args=(master, q))
        p.start()
        k = q.get(timeout=60)
        p.join(60)
        self.assertEqual(p.exitcode, 0)
        other = mctest.connect(master)
        try:
            self.assertEqual(other.is_exist(k), 0)
            self.assertEqual(other.get(k), b"")
        finally:
            other.close()

    def test_close_setup_again_put_reads_back(self):
        # Issue 18, in one process: put, close(), setup() again on the same store, and the
        # next put of the same key is readable (it used to be placed on the closed worker).
        master = mctest.standalone()
        s = mctest.connect(master, segment=32 << 20)
        k = mctest.key("again")
        try:
            self.assertEqual(s.put(k, b"first", ReplicateConfig(preferred_segment=s.get_hostname())), 0)
            self.assertEqual(s.close(), 0)
            self.assertEqual(s.setup("127.0.0.1", "P2PHANDSHAKE", 32 << 20, 16 << 20, "tcp", "", master), 0, s.last_error())
            self.assertEqual(s.get(k), b"")  # it was held only by the closed worker
            self.assertEqual(s.is_exist(k), 0)
            for i in range(20):  # every put lands on a live worker and reads back
                v = mctest.value(4096, i)
                self.assertEqual(s.put(k, v), 0, s.last_error())
                self.assertEqual(s.get(k), v)
                self.assertEqual(s.remove(k), 0)
        finally:
            s.close()


def _put_and_exit(master, q):
    s = mctest.connect(master, segment=32 << 20)
    k = mctest.key("exit")
    rc = s.put(k, b"held only by the exiting process", ReplicateConfig(preferred_segment=s.get_hostname()))
    q.put(k if rc == 0 else "put failed: %d" % rc)
    # No close(), and a reference kept to the end, so no __del__ runs first: the interpreter's
    # exit (the package's atexit hook) unmounts the store.
    _kept.append(s)


_kept = []


def _reader(master, k, n, q):
    s = mctest.connect(master)
    v = s.get(k)
    q.put(v[:16] + (b"|ok" if len(v) == n else b"|short"))
    s.close()


if __name__ == "__main__":
    unittest.main()
