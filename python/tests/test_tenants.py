"""Tenants (issue 21 item 1): two stores with different tenant_id do not see each other's keys.

Each store is set up with Mooncake's tenant_id (the keyword and the dict form); a key put by one
is invisible to the other and to the default tenant, and neither can remove the other's objects,
by key, by regex or with remove_all; KV sessions are per tenant too (same ids, same keys, isolated).
"""

import unittest

import mctest
from mooncake.store import ErrorCode, MooncakeDistributedStore, ReplicateConfig

OBJECT_NOT_FOUND = int(ErrorCode.OBJECT_NOT_FOUND)
INVALID = int(ErrorCode.INVALID_PARAMS)


class TenantTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.master = mctest.standalone()

    def store(self, tenant, as_dict=False):
        s = MooncakeDistributedStore()
        if as_dict:
            rc = s.setup({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE", "global_segment_size": 0,
                          "local_buffer_size": "16MB", "protocol": "tcp", "device_name": "",
                          "master_server_address": self.master, "tenant_id": tenant})
        else:
            rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", self.master, tenant_id=tenant)
        self.assertEqual(rc, 0, s.last_error())
        self.addCleanup(s.close)
        return s

    def test_two_tenants_do_not_see_each_others_keys(self):
        a, b, d = self.store("py-team-a"), self.store("py-team-b", as_dict=True), self.store("default")
        key = mctest.key("tenant")
        self.assertEqual(a.put(key, b"from a"), 0, a.last_error())
        self.assertEqual(b.is_exist(key), 0)
        self.assertEqual(d.is_exist(key), 0)
        self.assertEqual(b.get(key), b"")
        # The same key in b is b's own object; each reads its own bytes.
        self.assertEqual(b.put(key, b"from b"), 0, b.last_error())
        self.assertEqual(a.get(key), b"from a")
        self.assertEqual(b.get(key), b"from b")
        # b removes its own, never a's: by key, by regex, with remove_all.
        self.assertEqual(b.remove(key), 0)
        self.assertEqual(b.remove(key), OBJECT_NOT_FOUND)
        self.assertEqual(b.remove_by_regex("^tenant-"), 0)
        self.assertEqual(b.remove_all(), 0)
        self.assertEqual(d.remove_by_regex("^tenant-"), 0)
        self.assertEqual(a.is_exist(key), 1)
        self.assertEqual(a.get(key), b"from a")
        self.assertEqual(a.remove_by_regex("^tenant-"), 1)
        self.assertEqual(a.is_exist(key), 0)

    def test_kv_sessions_are_per_tenant(self):
        a, b, d = self.store("py-team-a"), self.store("py-team-b"), self.store("default")
        # Not "tenant-" keys: the other test counts those of each tenant.
        sid, k1, k2 = mctest.key("conv"), mctest.key("kvt"), mctest.key("kvt")
        # a tags its writes into sid; b attaches the same keys, of its own, to the same id.
        self.assertEqual(a.put_batch([k1, k2], [b"a1", b"a2"], ReplicateConfig(kv_sessions=[[sid], [sid]])), 0, a.last_error())
        for s in (b, d):
            with self.assertRaisesRegex(RuntimeError, "SESSION_NOT_FOUND"):
                s.get_kv_session(sid)
            with self.assertRaisesRegex(RuntimeError, "SESSION_NOT_FOUND"):
                s.pin_kv_session(sid)
            with self.assertRaisesRegex(RuntimeError, "SESSION_NOT_FOUND"):
                s.list_kv_session_keys(sid)
        self.assertEqual(b.attach_kv_session(sid, [k1, k2]), [OBJECT_NOT_FOUND] * 2)  # a's objects are not b's
        self.assertEqual(b.put(k1, b"b1"), 0, b.last_error())
        self.assertEqual(b.attach_kv_session(sid, [k1, k2]), [0, OBJECT_NOT_FOUND])
        self.assertEqual(a.list_kv_session_keys(sid).keys, sorted([k1, k2]))
        self.assertEqual(b.list_kv_session_keys(sid).keys, [k1])
        page = a.list_kv_session_keys(sid, limit=1)
        self.assertEqual(page.keys + a.list_kv_session_keys(sid, cursor=page.next_cursor).keys, sorted([k1, k2]))
        self.assertEqual(a.pin_kv_session(sid), 0)
        ia, ib = a.get_kv_session(sid), b.get_kv_session(sid)
        self.assertEqual((ia.session_id, ia.pinned, ia.member_count), (sid, True, 2))
        self.assertEqual((ib.session_id, ib.pinned, ib.member_count), (sid, False, 1))
        # b's close leaves a's session whole.
        self.assertEqual(b.close_kv_session(sid), 0)
        with self.assertRaisesRegex(RuntimeError, "SESSION_NOT_FOUND"):
            b.get_kv_session(sid)
        self.assertEqual(a.get_kv_session(sid).member_count, 2)
        self.assertEqual(a.update_kv_session(sid, [k2]), 0)
        self.assertEqual(a.list_kv_session_keys(sid).keys, [k2])
        self.assertEqual(a.close_kv_session(sid), 0)
        with self.assertRaisesRegex(RuntimeError, "SESSION_NOT_FOUND"):
            a.get_kv_session(sid)
        self.assertEqual(a.get(k1), b"a1")  # closing a session never deletes its objects
        self.assertEqual(b.get(k1), b"b1")
        for s, k in ((a, k1), (a, k2), (b, k1)):
            self.assertEqual(s.remove(k), 0)

    def test_bad_tenant_id_is_a_code(self):
        s = MooncakeDistributedStore()
        self.assertEqual(s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", self.master, tenant_id="a b"), INVALID)
        self.assertIn("tenant", s.last_error())
        self.assertEqual(s.health_check(), 1)
        # The store can be set up again, in the default tenant.
        self.assertEqual(s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", self.master, tenant_id=""), 0)
        s.close()


if __name__ == "__main__":
    unittest.main()
