"""Tenants (issue 21 item 1): two stores with different tenant_id do not see each other's keys.

Each store is set up with Mooncake's tenant_id (the keyword and the dict form); a key put by one
is invisible to the other and to the default tenant, and neither can remove the other's objects,
by key, by regex or with remove_all.
"""

import unittest

import mctest
from mooncake.store import ErrorCode, MooncakeDistributedStore

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
