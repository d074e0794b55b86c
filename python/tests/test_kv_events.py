"""KV events: a ZMQ subscriber of the standalone's publisher (Mooncake's master format: frames
topic | sequence (8 bytes, big endian) | MessagePack [timestamp_ms, [event maps], dp_rank])
receives every stored and removed key of a run, in commit order, with no gap in the sequence."""

import time
import unittest

import mctest
from mooncake.store import ReplicateConfig


class KVEventsTest(mctest.StandaloneCase):
    def setUp(self):
        zmq, self.msgpack = mctest.pyzmq()
        self.zmq = zmq
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.setsockopt(zmq.RCVTIMEO, 100)
        self.sub.connect(mctest.kv_events())
        self.last = None  # the last sequence received
        self.ops = []  # (event_type, object_key) in sequence order

    def tearDown(self):
        self.sub.close(linger=0)
        self.ctx.term()

    def recv(self) -> bool:
        """Receives one message if one comes within 100 ms; checks its frames and sequence."""
        try:
            frames = self.sub.recv_multipart()
        except self.zmq.Again:
            return False
        self.assertEqual(len(frames), 3, frames)
        self.assertEqual(frames[0], b"", "Mooncake's master sends an empty topic")
        self.assertEqual(len(frames[1]), 8)
        seq = int.from_bytes(frames[1], "big")
        if self.last is not None:
            self.assertEqual(seq, self.last + 1, "a gap in the sequence")
        self.last = seq
        ts, events, dp_rank = self.msgpack.unpackb(frames[2], raw=False)
        self.assertIsInstance(ts, int)
        self.assertEqual(dp_rank, 0)
        for ev in events:
            self.assertEqual(ev["timestamp"], ts)
            self.assertEqual(ev["backend_id"], "pytest")
            self.assertEqual(ev["tenant_id"], "default")
            self.assertEqual(ev["model_name"], "test-model")
            self.assertEqual(ev["block_size"], 16)
            if ev["event_type"] == "cleared":
                self.assertEqual(ev["type"], "AllBlocksCleared")
                self.ops.append(("cleared", None))
                continue
            self.assertEqual(ev["type"], {"stored": "BlockStored", "removed": "BlockRemoved"}[ev["event_type"]])
            self.assertEqual(ev["medium"], "cpu")
            self.assertEqual(ev["seq_hashes"], [])
            self.assertTrue(ev["workers"], ev)
            if ev["event_type"] == "stored":
                self.assertIsNone(ev["token_ids"])
                self.assertIn("parent_block_hash", ev)
            self.ops.append((ev["event_type"], ev["object_key"]))
        return True

    def test_every_stored_and_removed_key_in_commit_order(self):
        s = self.s
        # A PUB socket drops what no subscription has reached yet: put probes until one shows.
        deadline = time.monotonic() + 30
        while True:
            probe = mctest.key("kvev-probe")
            self.assertEqual(s.put(probe, b"p"), 0, s.last_error())
            got = False
            for _ in range(5):
                self.recv()
                if ("stored", probe) in self.ops:
                    got = True
                    break
            if got:
                break
            self.assertLess(time.monotonic(), deadline, "the subscription never reached the publisher")
        while self.recv():  # drain what the probes left
            pass

        prefix = mctest.key("kvev")
        want = []
        for i in range(20):
            k = f"{prefix}/{i:02d}"
            self.assertEqual(s.put(k, mctest.value(100, i)), 0, s.last_error())
            want.append(("stored", k))
            if i % 3 == 0:
                self.assertEqual(s.remove(k), 0, s.last_error())
                want.append(("removed", k))
        batch = [f"{prefix}/b{i:02d}" for i in range(10)]  # one commit, keys in order
        self.assertEqual(s.put_batch(batch, [b"x"] * 10, ReplicateConfig(replica_num=1)), 0, s.last_error())
        want += [("stored", k) for k in batch]
        self.assertEqual(s.remove_by_regex("^" + prefix + "/b0[0-4]$"), 5)
        want += [("removed", k) for k in batch[:5]]

        deadline = time.monotonic() + 30

        def mine():
            return [op for op in self.ops if op[1] and op[1].startswith(prefix)]

        while len(mine()) < len(want):
            self.recv()
            self.assertLess(time.monotonic(), deadline, f"received {len(mine())} of {len(want)} events")
        self.assertEqual(mine(), want)


if __name__ == "__main__":
    unittest.main()
