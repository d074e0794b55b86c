"""Mooncake's KV-session calls (issue 21 item 2) on the standalone: each of the seven with a
success and a failure, in Mooncake's shapes (0, KvSessionInfo, KvSessionPage, a code per key;
RuntimeError naming the code for a failed control call)."""

import unittest

from mctest import StandaloneCase, key


class KVSessionTest(StandaloneCase):
    def setUp(self):
        self.sid = key("conv")  # a session id no other test uses

    def put(self, n):
        keys = [key("kvs") for _ in range(n)]
        for k in keys:
            self.assertEqual(self.s.put(k, b"kv-" + k.encode()), 0, self.s.last_error())
        return keys

    def test_attach(self):
        a, b = self.put(2)
        self.assertEqual(self.s.attach_kv_session(self.sid, [a, key("absent"), b]), [0, -704, 0])
        self.assertEqual(self.s.attach_kv_session(self.sid, [a]), [0])  # idempotent
        self.assertEqual(self.s.get_kv_session(self.sid).member_count, 2)
        # Failures: only missing keys create nothing; a bad id fails every key.
        other = key("conv")
        self.assertEqual(self.s.attach_kv_session(other, [key("absent")]), [-704])
        with self.assertRaisesRegex(RuntimeError, "SESSION_NOT_FOUND"):
            self.s.get_kv_session(other)
        self.assertEqual(self.s.attach_kv_session("", [a, b]), [-600, -600])
        self.assertEqual(self.s.attach_kv_session("s" * 4097, [a]), [-600])
        self.assertEqual(self.s.attach_kv_session(self.sid, []), [])

    def test_pin_unpin(self):
        (a,) = self.put(1)
        for call in (self.s.pin_kv_session, self.s.unpin_kv_session):
            with self.assertRaisesRegex(RuntimeError, "SESSION_NOT_FOUND"):
                call(session_id=self.sid)  # pin controls never create a session
        self.assertEqual(self.s.attach_kv_session(self.sid, [a]), [0])
        self.assertFalse(self.s.get_kv_session(self.sid).pinned)
        self.assertEqual(self.s.pin_kv_session(session_id=self.sid), 0)
        self.assertTrue(self.s.get_kv_session(self.sid).pinned)
        self.assertEqual(self.s.unpin_kv_session(self.sid), 0)
        self.assertFalse(self.s.get_kv_session(self.sid).pinned)
        with self.assertRaisesRegex(RuntimeError, "INVALID_PARAMS"):
            self.s.pin_kv_session("s\0x")

    def test_get(self):
        a, b = self.put(2)
        self.s.attach_kv_session(self.sid, [a, b])
        self.s.pin_kv_session(self.sid)
        info = self.s.get_kv_session(self.sid)
        self.assertEqual((info.session_id, info.pinned, info.member_count), (self.sid, True, 2))
        with self.assertRaisesRegex(RuntimeError, "SESSION_NOT_FOUND"):
            self.s.get_kv_session(key("never"))
        with self.assertRaisesRegex(RuntimeError, "INVALID_PARAMS"):
            self.s.get_kv_session("")

    def test_list(self):
        keys = sorted(self.put(5))
        self.assertEqual(self.s.attach_kv_session(self.sid, keys), [0] * 5)
        got, page = [], self.s.list_kv_session_keys(self.sid, limit=2)
        got += page.keys
        while page.next_cursor:
            page = self.s.list_kv_session_keys(self.sid, cursor=page.next_cursor, limit=2)
            got += page.keys
        self.assertEqual(got, keys)
        self.assertEqual(self.s.list_kv_session_keys(self.sid).keys, keys)
        self.assertEqual(self.s.list_kv_session_keys(self.sid).next_cursor, "")
        with self.assertRaisesRegex(RuntimeError, "INVALID_PARAMS"):
            self.s.list_kv_session_keys(self.sid, limit=0)
        with self.assertRaisesRegex(RuntimeError, "INVALID_PARAMS"):
            self.s.list_kv_session_keys(self.sid, limit=4097)
        with self.assertRaisesRegex(RuntimeError, "SESSION_NOT_FOUND"):
            self.s.list_kv_session_keys(key("never"))

    def test_update(self):
        keep, old, shared = self.put(3)
        other = key("conv")
        self.s.attach_kv_session(self.sid, [keep, old, shared])
        self.s.attach_kv_session(other, [shared])
        self.s.pin_kv_session(self.sid)
        # Duplicates, absent keys and other sessions' keys are ignored; objects stay.
        self.assertEqual(self.s.update_kv_session(session_id=self.sid, keep_keys=[keep, keep, "absent"]), 0)
        self.assertEqual(self.s.list_kv_session_keys(self.sid).keys, [keep])
        self.assertTrue(self.s.get_kv_session(self.sid).pinned)
        self.assertEqual(self.s.get_kv_session(other).member_count, 1)
        self.assertEqual(self.s.get(old), b"kv-" + old.encode())
        # An empty intersection removes the session and its pin; a later attach starts unpinned.
        self.assertEqual(self.s.update_kv_session(self.sid, []), 0)
        with self.assertRaisesRegex(RuntimeError, "SESSION_NOT_FOUND"):
            self.s.get_kv_session(self.sid)
        self.assertEqual(self.s.update_kv_session(self.sid, [keep]), 0)  # absent: a no-op
        self.assertEqual(self.s.attach_kv_session(self.sid, [keep]), [0])
        self.assertFalse(self.s.get_kv_session(self.sid).pinned)
        for invalid in ("", "s" * 4097, "s\0x"):
            with self.assertRaisesRegex(RuntimeError, "INVALID_PARAMS"):
                self.s.update_kv_session(invalid, [])

    def test_close(self):
        a, b = self.put(2)
        other = key("conv")
        self.s.attach_kv_session(self.sid, [a, b])
        self.s.attach_kv_session(other, [b])
        self.assertEqual(self.s.close_kv_session(self.sid), 0)
        with self.assertRaisesRegex(RuntimeError, "SESSION_NOT_FOUND"):
            self.s.get_kv_session(self.sid)
        self.assertEqual(self.s.close_kv_session(session_id=self.sid), 0)  # idempotent
        self.assertEqual(self.s.get(a), b"kv-" + a.encode())  # data stays
        self.assertEqual(self.s.get_kv_session(other).member_count, 1)
        with self.assertRaisesRegex(RuntimeError, "INVALID_PARAMS"):
            self.s.close_kv_session("")

    def test_removal_follows(self):
        x, y = self.put(2)
        self.s.attach_kv_session(self.sid, [x, y])
        self.s.pin_kv_session(self.sid)
        self.assertEqual(self.s.remove(x), 0)
        self.assertEqual(self.s.get_kv_session(self.sid).member_count, 1)
        self.assertTrue(self.s.get_kv_session(self.sid).pinned)
        self.assertEqual(self.s.remove(y), 0)
        with self.assertRaisesRegex(RuntimeError, "SESSION_NOT_FOUND"):
            self.s.get_kv_session(self.sid)

    def test_tagged_writes(self):
        from mooncake.store import ReplicateConfig

        a, b = self.sid, key("conv")
        x, y, z, r = key("x"), key("y"), key("z"), key("r")
        self.assertEqual(self.s.put(x, b"x", ReplicateConfig(kv_sessions=[[a]])), 0)
        self.s.pin_kv_session(a)
        # A put of a stored key keeps its value and still adds the membership.
        self.assertEqual(self.s.put(x, b"other", ReplicateConfig(kv_sessions=[[b, b]])), 0)
        self.assertEqual(self.s.get(x), b"x")
        self.assertEqual(self.s.put_batch([y, z], [b"yy", b"zzz"], ReplicateConfig(kv_sessions=[[a], [b]])), 0)
        self.assertEqual(self.s.list_kv_session_keys(a).keys, sorted([x, y]))
        self.assertEqual(self.s.get_kv_session(b).member_count, 2)
        self.assertTrue(self.s.get_kv_session(a).pinned)  # new members join a pinned session
        buf = bytearray(b"buffer-data")
        import ctypes

        c = (ctypes.c_char * len(buf)).from_buffer(buf)
        addr = ctypes.addressof(c)
        self.assertEqual(self.s.batch_put_session_start([r], [11], ReplicateConfig(kv_sessions=[[b]])), [0])
        self.assertEqual(self.s.batch_put_from_multi_buffer_ranges([r], [[addr]], [[11]], [[0]]), [11])
        self.assertEqual(self.s.get_kv_session(b).member_count, 2)  # joins at the end
        self.assertEqual(self.s.batch_put_session_end([r]), [0])
        self.assertIn(r, self.s.list_kv_session_keys(b).keys)
        # Failures: tags that do not fit the keys write nothing; a bad id likewise.
        bad = key("bad")
        self.assertEqual(self.s.put(bad, b"x", ReplicateConfig(kv_sessions=[[a], [b]])), -600)
        self.assertEqual(self.s.batch_put_from([bad], [addr], [11], ReplicateConfig(kv_sessions=[[""]])), [-600])
        self.assertEqual(self.s.is_exist(bad), 0)
        with self.assertRaises(TypeError):
            ReplicateConfig(kv_sessions=["not-a-list-of-lists"])
        del c


if __name__ == "__main__":
    unittest.main()
