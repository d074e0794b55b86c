"""Three masters and two workers: replicas on distinct workers, and failover to a replica."""

import os
import signal
import threading
import unittest

import mctest
from mooncake.store import ReplicateConfig


class ClusterTest(unittest.TestCase):
    # Test methods run in name order: the kill comes last.

    @classmethod
    def setUpClass(cls):
        cls.masters = mctest.cluster()
        cls.pids = mctest.cluster_worker_pids()
        cls.s = mctest.connect(cls.masters)

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def test_1_two_replicas_on_distinct_workers(self):
        s, k, v = self.s, mctest.key("r2"), mctest.value(2 << 20, 3)
        self.assertEqual(s.put(k, v, ReplicateConfig(replica_num=2)), 0, s.last_error())
        ds = s.get_replica_desc(k)
        self.assertEqual(len(ds), 2)
        self.assertEqual(len({d.segment_name for d in ds}), 2, ds)
        self.assertEqual(len({d.address for d in ds}), 2, ds)
        self.assertEqual(s.get(k), v)

    def test_2_worker_killed_under_a_reader(self):
        s = self.s
        keys = [mctest.key("fo") for _ in range(8)]
        vals = [mctest.value(256 << 10, i) for i in range(8)]
        self.assertEqual(s.put_batch(keys, vals, ReplicateConfig(replica_num=2)), 0, s.last_error())
        victim = s.get_replica_desc(keys[0])[0].segment_name
        self.assertIn(victim, self.pids)
        errors, reads = [], [0]
        stop, killed = threading.Event(), threading.Event()
        reads_after_kill = [0]

        def reader():
            buf, ptr = mctest.cbuf(256 << 10)
            while not stop.is_set():
                for k, v in zip(keys, vals):
                    after = killed.is_set()
                    n = s.get_into(k, ptr, len(buf))
                    if n != len(v) or bytes(buf) != v:
                        errors.append(f"get_into({k}) = {n}: {s.last_error()}")
                    elif after:
                        reads_after_kill[0] += 1
                    reads[0] += 1

        t = threading.Thread(target=reader)
        t.start()
        try:
            mctest.wait_for("reads before the kill", lambda: reads[0] >= 16)
            os.kill(self.pids[victim], signal.SIGKILL)
            killed.set()
            mctest.wait_for("reads after the kill", lambda: reads_after_kill[0] >= 32 or errors, timeout=60)
        finally:
            stop.set()
            t.join()
        self.assertEqual(errors, [])
        # Every object still reads whole from the surviving replica.
        self.assertEqual(s.get_batch(keys), vals)


if __name__ == "__main__":
    unittest.main()
