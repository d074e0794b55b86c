"""Segment management: a store mounts further segments and unmounts them; objects on an
unmounted segment behave as after close()."""

import os
import tempfile
import unittest

import mctest
from mooncake.store import ErrorCode, ReplicateConfig


class SegmentTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.master = mctest.standalone()
        cls.s = mctest.connect(cls.master, segment=16 << 20)

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def test_mount_put_unmount(self):
        s = self.s
        r = s.allocate_and_mount_segment(8 << 20, "tcp", "cpu")
        self.assertEqual(r["ret"], 0, s.last_error())
        self.assertEqual(len(r["segment_ids"]), 1)
        self.assertGreaterEqual(r["allocated_size"], 8 << 20)
        seg = r["segment_ids"][0]
        only, kept = mctest.key("seg-only"), mctest.key("seg-kept")
        v = mctest.value(100_000, 3)
        self.assertEqual(s.put(only, v, ReplicateConfig(preferred_segment=seg)), 0, s.last_error())
        self.assertEqual([d.segment_name for d in s.get_replica_desc(only)], [seg])
        self.assertEqual(s.put(kept, v, ReplicateConfig(preferred_segment=s.get_hostname())), 0)
        self.assertNotIn(seg, [d.segment_name for d in s.get_replica_desc(kept)])
        self.assertEqual(s.get(only), v)

        self.assertEqual(s.unmount_segment([seg], 0), 0, s.last_error())
        # At once, as after close(): no waiting, another client sees the same.
        self.assertEqual(s.is_exist(only), 0)
        self.assertEqual(s.get(only), b"")
        self.assertEqual(s.is_exist(kept), 1)
        self.assertEqual(s.get(kept), v)
        other = mctest.connect(self.master)
        try:
            self.assertEqual(other.is_exist(only), 0)
            self.assertEqual(other.get(kept), v)
        finally:
            other.close()
        # Unmounted once: the id is unknown now.
        self.assertEqual(s.unmount_segment([seg]), ErrorCode.SEGMENT_NOT_FOUND)

    def test_mount_file_region_and_unmount_and_free(self):
        s = self.s
        with tempfile.NamedTemporaryFile() as f:
            f.truncate(6 << 20)
            r = s.mount_segment(f.name, 4 << 20, 1 << 20, "tcp", "")
            self.assertEqual(r["ret"], 0, s.last_error())
            seg = r["segment_ids"][0]
            k = mctest.key("file-seg")
            self.assertEqual(s.put(k, b"x" * 5000, ReplicateConfig(preferred_segment=seg)), 0)
            self.assertEqual([d.segment_name for d in s.get_replica_desc(k)], [seg])
            self.assertEqual(s.unmount_and_free_segment([seg], 1), 0, s.last_error())
            self.assertEqual(s.is_exist(k), 0)
            # A region past the file's end, a file that does not exist: nothing mounted.
            r = s.mount_segment(f.name, 4 << 20, 4 << 20)
            self.assertEqual(r, {"ret": ErrorCode.INVALID_PARAMS, "segment_ids": []})
        r = s.mount_segment(os.path.join(tempfile.gettempdir(), "no-such-mooncake-file"), 1 << 20, 0)
        self.assertEqual(r["ret"], ErrorCode.INVALID_PARAMS)

    def test_bad_arguments(self):
        s = self.s
        self.assertEqual(s.allocate_and_mount_segment(0)["ret"], ErrorCode.INVALID_PARAMS)
        self.assertEqual(s.allocate_and_mount_segment(1 << 20, "tcp", "cuda:0")["ret"], ErrorCode.NOT_SUPPORTED)
        self.assertEqual(s.mount_segment("", 1 << 20, 0)["ret"], ErrorCode.INVALID_PARAMS)
        self.assertEqual(s.unmount_segment([]), ErrorCode.INVALID_PARAMS)
        self.assertEqual(s.unmount_segment(["no-such-segment"]), ErrorCode.SEGMENT_NOT_FOUND)
        self.assertIn("no-such-segment", s.last_error())
        # setup's own segment is close()'s to unmount.
        me = [d.segment_name for d in _put_here(s)][0]
        self.assertEqual(s.unmount_segment([me]), ErrorCode.INVALID_PARAMS)
        self.assertEqual(s.unmount_segment(["x"], 601), ErrorCode.INVALID_PARAMS)
        for bad in (lambda: s.allocate_and_mount_segment(-1), lambda: s.mount_segment(b"/tmp/x", 1, 0),
                    lambda: s.unmount_segment("seg"), lambda: s.unmount_segment([1]),
                    lambda: s.unmount_segment(["x"], -1)):
            with self.assertRaises(TypeError):
                bad()

    def test_not_set_up_and_close_unmounts_all(self):
        from mooncake.store import MooncakeDistributedStore

        n = MooncakeDistributedStore()
        self.assertEqual(n.allocate_and_mount_segment(1 << 20)["ret"], ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS)
        self.assertEqual(n.unmount_segment(["x"]), ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS)
        # A pure client can mount segments too; close() unmounts them with the rest.
        c = mctest.connect(self.master)
        r = c.allocate_and_mount_segment(4 << 20)
        self.assertEqual(r["ret"], 0, c.last_error())
        k = mctest.key("closed-seg")
        self.assertEqual(c.put(k, b"y" * 100, ReplicateConfig(preferred_segment=r["segment_ids"][0])), 0)
        c.close()
        self.assertEqual(self.s.is_exist(k), 0)


def _put_here(s):
    k = mctest.key("here")
    assert s.put(k, b"z" * 10, ReplicateConfig(preferred_segment=s.get_hostname())) == 0
    return s.get_replica_desc(k)


if __name__ == "__main__":
    unittest.main()
