"""Copy and move tasks: create_copy_task adds a replica on a named segment, create_move_task
moves one, query_task follows each to SUCCESS; bad requests answer Mooncake's codes."""

import unittest

import mctest
from mooncake.store import ErrorCode, MooncakeDistributedStore, QueryTaskResponse, ReplicateConfig, TaskStatus, TaskType


class TaskTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.master = mctest.standalone()
        cls.s = mctest.connect(cls.master, segment=16 << 20)
        r = cls.s.allocate_and_mount_segment(8 << 20)
        assert r["ret"] == 0, cls.s.last_error()
        cls.seg = r["segment_ids"][0]

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def put_on(self, segment, n=50_000):
        k, v = mctest.key("task"), mctest.value(n, 5)
        self.assertEqual(self.s.put(k, v, ReplicateConfig(preferred_segment=segment)), 0, self.s.last_error())
        return k, v

    def holders(self, k):
        return sorted(d.segment_name for d in self.s.get_replica_desc(k))

    def finish(self, task_id, typ):
        self.assertNotEqual(task_id, (0, 0))
        got = {}

        def done():
            got["r"], got["rc"] = self.s.query_task(task_id)
            self.assertEqual(got["rc"], 0, self.s.last_error())
            return got["r"].status in (TaskStatus.SUCCESS, TaskStatus.FAILED)

        mctest.wait_for("the task ends", done)
        r = got["r"]
        self.assertIsInstance(r, QueryTaskResponse)
        self.assertEqual((r.id, r.type, r.status, r.message), (task_id, typ, TaskStatus.SUCCESS, ""))
        self.assertGreater(r.created_at_ms_epoch, 0)
        self.assertGreaterEqual(r.last_updated_at_ms_epoch, r.created_at_ms_epoch)
        self.assertNotEqual(r.assigned_client, "")

    def test_copy_and_move(self):
        s, seg = self.s, self.seg
        k, v = self.put_on(s.get_hostname())
        (me,) = self.holders(k)
        # Copy to the mounted segment by id: two replicas.
        task_id, rc = s.create_copy_task(k, [seg])
        self.assertEqual(rc, 0, s.last_error())
        self.finish(task_id, TaskType.REPLICA_COPY)
        self.assertEqual(self.holders(k), sorted([me, seg]))
        self.assertEqual(s.get(k), v)
        # Copy by address (what get_hostname answers) onto this store's own segment.
        k2, v2 = self.put_on(seg, 3000)
        task_id, rc = s.create_copy_task(k2, [s.get_hostname()])
        self.assertEqual(rc, 0, s.last_error())
        self.finish(task_id, TaskType.REPLICA_COPY)
        self.assertEqual(self.holders(k2), sorted([me, seg]))
        # Move k's replica off the mounted segment... onto nowhere new: refused (me holds it);
        # move k2's replica on seg away: k2 stays only on me.
        self.assertEqual(s.create_move_task(k, seg, me), ((0, 0), ErrorCode.OBJECT_ALREADY_EXISTS))
        k3, v3 = self.put_on(seg, 7000)
        task_id, rc = s.create_move_task(k3, seg, me)
        self.assertEqual(rc, 0, s.last_error())
        self.finish(task_id, TaskType.REPLICA_MOVE)
        self.assertEqual(self.holders(k3), [me])
        self.assertEqual(s.get(k3), v3)

    def test_errors(self):
        s, seg = self.s, self.seg
        k, _ = self.put_on(s.get_hostname(), 100)
        self.assertEqual(s.create_copy_task(mctest.key("absent"), [seg]), ((0, 0), ErrorCode.OBJECT_NOT_FOUND))
        self.assertEqual(s.create_copy_task(k, ["no-such-segment"]), ((0, 0), ErrorCode.SEGMENT_NOT_FOUND))
        self.assertIn("no-such-segment", s.last_error())
        self.assertEqual(s.create_copy_task(k, [s.get_hostname()]), ((0, 0), ErrorCode.OBJECT_ALREADY_EXISTS))
        self.assertEqual(s.create_copy_task(k, []), ((0, 0), ErrorCode.INVALID_PARAMS))
        self.assertEqual(s.create_move_task(k, seg, s.get_hostname()), ((0, 0), ErrorCode.OBJECT_NOT_FOUND))
        self.assertEqual(s.query_task((1, 2)), (None, ErrorCode.OBJECT_NOT_FOUND))
        for bad in (lambda: s.create_copy_task(k, seg), lambda: s.create_copy_task(k, [1]),
                    lambda: s.create_move_task(k, seg, None), lambda: s.query_task("x"),
                    lambda: s.query_task((1, -1)), lambda: s.query_task((1, 2, 3))):
            with self.assertRaises(TypeError):
                bad()
        n = MooncakeDistributedStore()
        self.assertEqual(n.create_copy_task(k, [seg]), ((0, 0), ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS))
        self.assertEqual(n.query_task((1, 2)), (None, ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS))


if __name__ == "__main__":
    unittest.main()
