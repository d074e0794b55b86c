"""is_exist with prefetch_to_memory (issue 21 item 4), run by python/prefetch_test.go against
a master and one worker with a 4 MiB DRAM arena over an NVMe tier and a private arena (every
get over TCP, counted by the worker as a DRAM or an NVMe hit):

  MOONCAKE_TEST_PREFETCH_MASTER   that master
  MOONCAKE_TEST_PREFETCH_METRICS  the worker's /metrics address
"""

import time
import unittest
import urllib.request

from mctest import connect, key, need, value

SIZE = 256 << 10


def metric(addr: str, name: str) -> float:
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


class PrefetchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.master = need("MOONCAKE_TEST_PREFETCH_MASTER")
        cls.metrics = need("MOONCAKE_TEST_PREFETCH_METRICS")
        cls.s = connect(cls.master)

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def m(self, name: str) -> float:
        return metric(self.metrics, name)

    def _wait_until(self, value, want: float, what: str, timeout: float = 20.0) -> None:
        """Polls value() until it reaches want, failing after timeout seconds."""
        deadline = time.monotonic() + timeout
        while value() < want:
            if time.monotonic() > deadline:
                self.fail(f"{what} = {value()}, want >= {want}")
            time.sleep(0.01)

    def wait_metric(self, name: str, want: float) -> None:
        self._wait_until(lambda: self.m(name), want, name)

    def wait_hits(self, want: float) -> None:
        """Waits until the worker has counted `want` reads as DRAM or NVMe hits in all. It
        counts a read once its last byte is sent (the transfer server's Release), which can
        come after the client has the bytes: a scrape right after a get may miss it."""
        self._wait_until(lambda: self.m("mem_cache_hit_nums_") + self.m("file_cache_hit_nums_"),
                         want, "reads counted as hits")

    def put_until_spilled(self, n: int = 32, spilled: int = 3):
        """Puts n objects into the 4 MiB arena (prefetch_test.go) and waits until at least the
        first `spilled` are NVMe only. Victims are chosen oldest first, but the spill jobs of
        the background evictor and of a put waiting for room can be queued out of order, so it
        waits for every spill the arena forces (n minus what fits), not just `spilled`."""
        spilled = max(spilled, n - (4 << 20) // SIZE)
        base = self.m("worker_spills_total")
        vals = {}
        for i in range(n):
            k = key("pf")
            vals[k] = value(SIZE, i)
            self.assertEqual(self.s.put(k, vals[k]), 0, self.s.last_error())
        self.wait_metric("worker_spills_total", base + spilled)
        return list(vals), vals

    def test_prefetch_then_get_is_a_dram_hit(self):
        from mooncake.store import ExistOptions

        keys, vals = self.put_until_spilled()
        req0, prom0 = self.m("worker_prefetch_requested_total"), self.m("worker_prefetch_promoted_total")
        # Mooncake's form (ExistOptions) for one key, the keyword for a batch.
        self.assertEqual(self.s.is_exist(keys[0], ExistOptions(prefetch_to_memory=True)), 1)
        self.assertEqual(self.s.batch_is_exist([keys[1], key("absent")], prefetch_to_memory=True), [1, 0])
        self.wait_metric("worker_prefetch_promoted_total", prom0 + 2)
        self.assertEqual(self.m("worker_prefetch_requested_total"), req0 + 2)
        mem, nvme = self.m("mem_cache_hit_nums_"), self.m("file_cache_hit_nums_")
        for k in keys[:2]:
            self.assertEqual(self.s.get(k), vals[k])
        self.wait_hits(mem + nvme + 2)
        self.assertEqual(self.m("mem_cache_hit_nums_"), mem + 2, "the reads after prefetch were not DRAM hits")
        self.assertEqual(self.m("file_cache_hit_nums_"), nvme)

        # Control: without prefetch nothing is sent and the read of a spilled object is an
        # NVMe hit.
        self.assertEqual(self.s.is_exist(keys[2]), 1)
        self.assertEqual(self.s.is_exist(keys[2], ExistOptions()), 1)
        self.assertEqual(self.m("worker_prefetch_requested_total"), req0 + 2)
        self.assertEqual(self.s.get(keys[2]), vals[keys[2]])
        self.wait_hits(mem + nvme + 3)
        self.assertEqual(self.m("file_cache_hit_nums_"), nvme + 1)

    def test_enable_ssd_prefetch_false(self):
        from mooncake.store import ExistOptions, MooncakeDistributedStore

        s = MooncakeDistributedStore()
        cfg = {
            "local_hostname": "127.0.0.1",
            "metadata_server": "P2PHANDSHAKE",
            "global_segment_size": "0",
            "local_buffer_size": str(16 << 20),
            "protocol": "tcp",
            "master_server_addr": self.master,
            "enable_ssd_prefetch": "false",
            "ssd_prefetch_dedup_ttl_sec": "30",
            "ssd_prefetch_cooldown_sec": "5",
            "ssd_get_wait_ms": "0",
        }
        self.assertEqual(s.setup(cfg), 0, s.last_error())
        try:
            k = key("pf-off")
            self.assertEqual(s.put(k, value(SIZE, 7)), 0)
            req0 = self.m("worker_prefetch_requested_total")
            self.assertEqual(s.is_exist(k, ExistOptions(prefetch_to_memory=True)), 1)
            self.assertEqual(self.m("worker_prefetch_requested_total"), req0)
        finally:
            s.close()
        bad = dict(cfg, ssd_get_wait_ms="-1")
        self.assertNotEqual(MooncakeDistributedStore().setup(bad), 0)

    def test_exist_options_type_checked(self):
        from mooncake.store import ExistOptions

        o = ExistOptions()
        self.assertFalse(o.prefetch_to_memory)
        o.prefetch_to_memory = True
        self.assertTrue(o.prefetch_to_memory)
        with self.assertRaises(TypeError):
            o.prefetch_to_memory = 1
        with self.assertRaises(TypeError):
            self.s.is_exist(key(), {"prefetch_to_memory": True})


if __name__ == "__main__":
    unittest.main()
