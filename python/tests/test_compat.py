"""Mooncake's Python behaviour to the letter (issue 18): each test asserts Mooncake's value.

The specification is Mooncake's binding (mooncake-integration/store/store_py.cpp) and its
MooncakeConfig; docs/python.md lists every name with its status here.
"""

import copy
import ctypes
import mmap
import re
import unittest

import mctest
from mooncake.store import (
    ErrorCode,
    MooncakeDistributedStore,
    MooncakeHostMemAllocator,
    ObjectDataType,
    ReplicateConfig,
    SoftPinAction,
    parse_size,
)

INVALID = int(ErrorCode.INVALID_PARAMS)
NOT_SUPPORTED = int(ErrorCode.NOT_SUPPORTED)


def _port_in_mooncake_range(test, hostname, host):
    m = re.fullmatch(re.escape(host) + r":(\d+)", hostname)
    test.assertIsNotNone(m, hostname)
    test.assertTrue(12300 <= int(m.group(1)) <= 14300, hostname)


class SetupTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.master = mctest.standalone()

    def cfg(self, **kw):
        c = {
            "local_hostname": "127.0.0.1",
            "metadata_server": "P2PHANDSHAKE",
            "global_segment_size": 0,
            "local_buffer_size": "16MB",
            "protocol": "tcp",
            "device_name": "",
            "master_server_address": self.master,
        }
        c.update(kw)
        return c

    def test_bad_values_return_a_code_not_an_exception(self):
        s = MooncakeDistributedStore()
        bad = [
            dict(global_segment_size="50%"),
            dict(local_buffer_size="lots"),
            dict(local_buffer_size=1.5),
            dict(local_buffer_size=-1),
            dict(client_http_port="x"),
            dict(client_http_port=70000),
            dict(enable_ssd_offload="maybe"),
            dict(enable_client_http_server=[1]),
            dict(protocol=5),
            dict(no_such_key=1),
        ]
        for kw in bad:
            self.assertEqual(s.setup(self.cfg(**kw)), INVALID, kw)
            self.assertTrue(s.last_error(), kw)
            self.assertEqual(s.health_check(), 1, kw)  # not set up
        s.setup(self.cfg(global_segment_size="50%"))
        self.assertIn("50%", s.last_error())
        # The keyword form too.
        self.assertEqual(s.setup("127.0.0.1", "", "50%", 0, "tcp", "", self.master), INVALID)
        self.assertEqual(s.setup("127.0.0.1", "", 0, 16 << 20, "tcp", "", self.master, client_http_port="x"), INVALID)
        self.assertEqual(s.setup("127.0.0.1", "", 0, 16 << 20, "tcp", "", self.master, enable_ssd_offload="maybe"), INVALID)
        self.assertEqual(s.health_check(), 1)

    def test_every_mooncake_key_and_keyword_is_accepted(self):
        s = MooncakeDistributedStore()
        full = self.cfg(
            rdma_devices="",
            enable_ssd_offload=True,
            ssd_offload_path="/nvme/mooncake_offload",
            tenant_id="default",
            enable_client_http_server=True,
            client_http_port=19300,
            ipc_socket_path="@mooncake_client_50052.sock",
        )
        del full["device_name"]
        self.assertEqual(s.setup(full), 0, s.last_error())
        k = mctest.key()
        self.assertEqual(s.put(k, b"v"), 0)
        self.assertEqual(s.get(k), b"v")
        s.close()
        # Strings where MooncakeConfig's JSON carries them.
        self.assertEqual(s.setup(self.cfg(enable_ssd_offload="false", enable_client_http_server="true", client_http_port="9300")), 0)
        s.close()
        self.assertEqual(
            s.setup(
                "127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", self.master,
                engine=None, enable_ssd_offload=False, ssd_offload_path="", tenant_id="default",
                enable_client_http_server=True, client_http_port=9300,
            ),
            0,
            s.last_error(),
        )
        s.close()

    def test_tenant_id_is_taken_in_both_forms(self):
        s = MooncakeDistributedStore()
        self.assertEqual(s.setup(self.cfg(tenant_id="tenant-a")), 0, s.last_error())
        s.close()
        self.assertEqual(s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", self.master, tenant_id="tenant-a"), 0)
        s.close()
        self.assertEqual(s.setup(self.cfg(tenant_id="")), 0)
        s.close()

    def test_sizes_are_binary_as_mooncake_parses_them(self):
        self.assertEqual(parse_size("x", "80GB"), 80 << 30)
        self.assertEqual(parse_size("x", "80gb"), 80 << 30)
        self.assertEqual(parse_size("x", "512MB"), 512 << 20)
        self.assertEqual(parse_size("x", "4KB"), 4 << 10)
        self.assertEqual(parse_size("x", "1TB"), 1 << 40)
        self.assertEqual(parse_size("x", "3355443200"), 3355443200)

    def test_get_hostname_is_local_hostname_and_a_port_from_mooncakes_range(self):
        s = MooncakeDistributedStore()
        # The embedded worker runs against the cluster (test_cluster.py is done with it), so
        # the standalone's other tests never meet a worker that just left.
        cluster = mctest.cluster()
        self.assertEqual(s.setup("localhost", "P2PHANDSHAKE", 32 << 20, 16 << 20, "tcp", "", cluster), 0, s.last_error())
        try:
            me = s.get_hostname()
            _port_in_mooncake_range(self, me, "localhost")
            # It names this process's worker: a put preferring it lands there.
            k = mctest.key("host")
            self.assertEqual(s.put(k, b"here", ReplicateConfig(preferred_segment=me)), 0)
            ds = s.get_replica_desc(k)
            self.assertEqual(len(ds), 1)
            self.assertTrue(ds[0].segment_name.startswith("embedded-"), ds)
            self.assertEqual(ds[0].address.rsplit(":", 1)[1], me.rsplit(":", 1)[1])
        finally:
            s.close()
        # A pure client gets the same form.
        self.assertEqual(s.setup("localhost", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", self.master), 0)
        _port_in_mooncake_range(self, s.get_hostname(), "localhost")
        s.close()
        # A port given is kept.
        self.assertEqual(s.setup("127.0.0.1:12999", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", self.master), 0)
        self.assertEqual(s.get_hostname(), "127.0.0.1:12999")
        s.close()

    def test_put_of_bytes_without_a_local_buffer_is_refused(self):
        # Mooncake's put copies the value into the local buffer first; with none it fails
        # with INVALID_PARAMS. put_from reads the caller's memory and works.
        s = MooncakeDistributedStore()
        self.assertEqual(s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", self.master), 0)
        try:
            k = mctest.key()
            self.assertEqual(s.put(k, b"v"), INVALID)
            self.assertIn("local_buffer_size", s.last_error())
            self.assertEqual(s.upsert(k, b"v"), INVALID)
            self.assertEqual(s.put_parts(k, b"a", b"b"), INVALID)
            self.assertEqual(s.put_batch([k], [b"v"]), INVALID)
            self.assertEqual(s.upsert_batch([k], [b"v"]), INVALID)
            self.assertEqual(s.is_exist(k), 0)
            buf, p = mctest.cbuf(64)
            ctypes.memset(p, 5, 64)
            self.assertEqual(s.put_from(k, p, 64), 0)
            self.assertEqual(s.get(k), b"\x05" * 64)
        finally:
            s.close()
        # Set up again with a buffer: put works.
        self.assertEqual(s.setup("127.0.0.1", "P2PHANDSHAKE", 0, "16MB", "tcp", "", self.master), 0)
        self.assertEqual(s.put(mctest.key(), b"v"), 0)
        s.close()


class StoreCompatTest(mctest.StandaloneCase):
    def test_get_batch_total_failure_is_one_empty_bytes(self):
        s = self.s
        k1, k2 = mctest.key(), mctest.key()
        self.assertEqual(s.put(k1, b"one"), 0)
        self.assertEqual(s.get_batch([k1, k2]), [b"one", b""])
        self.assertEqual(s.get_batch([mctest.key(), mctest.key()]), [b"", b""])  # misses: one per key
        self.assertEqual(s.get_batch([]), [b""])
        closed = MooncakeDistributedStore()
        self.assertEqual(closed.get_batch([k1, k2]), [b""])

    def test_is_exist_alias_and_local_disk_replica(self):
        s, k = self.s, mctest.key()
        self.assertEqual(s.isExist(k), 0)
        s.put(k, b"v")
        self.assertEqual(s.isExist(k), 1)
        d = s.get_replica_desc(k)[0]
        self.assertFalse(d.is_local_disk_replica())
        self.assertTrue(d.is_memory_replica())

    def test_replicate_config_types_as_pybind(self):
        c = ReplicateConfig()
        # soft_pin_ttl_ms is an optional uint64.
        self.assertIsNone(c.soft_pin_ttl_ms)
        for bad in (-1, 1 << 64, 1.5, "10"):
            with self.assertRaises(TypeError, msg=repr(bad)):
                c.soft_pin_ttl_ms = bad
        c.soft_pin_ttl_ms = (1 << 64) - 1
        c.soft_pin_ttl_ms = None
        for field, bad in (
            ("replica_num", -1), ("replica_num", 1 << 64), ("replica_num", 2.0), ("nof_replica_num", -1),
            ("with_hard_pin", "yes"), ("with_soft_pin", [True]), ("preferred_segment", 5),
            ("preferred_segments", "a:1"), ("preferred_nof_segments", [1]), ("soft_pin_action", 1),
            ("data_type", 1), ("group_ids", "g"),
        ):
            with self.assertRaises(TypeError, msg=f"{field}={bad!r}"):
                setattr(c, field, bad)
        with self.assertRaises(AttributeError):
            c.no_such_field = 1
        # Every field of Mooncake's binding, settable as store_kv_bench.py and store_client_e2e.py do.
        c.replica_num = 1
        c.nof_replica_num = 0
        c.dfs_replica_num = 0
        c.with_soft_pin = False
        c.with_hard_pin = False
        c.preferred_segments = []
        c.preferred_nof_segments = []
        c.preferred_segment = ""
        c.prefer_alloc_in_same_node = True
        c.data_type = ObjectDataType.KVCACHE
        c.group_ids = ["g1"]
        c.soft_pin_action = SoftPinAction.ENABLE
        c.with_hard_pin = 1  # pybind11 converts numbers to bool
        self.assertIs(c.with_hard_pin, True)
        d = copy.copy(c)
        d.group_ids.append("g2")
        self.assertEqual(c.group_ids, ["g1"])
        self.assertIn("nof_replica_num", str(c))
        k = mctest.key()
        self.assertEqual(self.s.put(k, b"v", c), 0, self.s.last_error())
        self.assertEqual(self.s.get(k), b"v")

    def test_soft_pin_ttl_without_enable_is_invalid_params(self):
        s = self.s
        for action in (SoftPinAction.PRESERVE, SoftPinAction.DISABLE):
            c = ReplicateConfig()
            c.soft_pin_action = action
            c.soft_pin_ttl_ms = 60_000
            k = mctest.key()
            self.assertEqual(s.put(k, b"v", c), INVALID, action)
            self.assertEqual(s.upsert(k, b"v", c), INVALID, action)
            buf, p = mctest.cbuf(8)
            self.assertEqual(s.put_from(k, p, 8, c), INVALID)
            self.assertEqual(s.batch_put_from([k], [p], [8], c), [INVALID])
            self.assertEqual(s.is_exist(k), 0)
        c = ReplicateConfig()
        c.soft_pin_action = SoftPinAction.ENABLE
        c.soft_pin_ttl_ms = 60_000
        self.assertEqual(s.put(mctest.key(), b"v", c), 0)
        old = ReplicateConfig()
        old.with_soft_pin = True  # the older spelling of ENABLE
        old.soft_pin_ttl_ms = 60_000
        self.assertEqual(s.put(mctest.key(), b"v", old), 0)

    def test_host_mem_allocator(self):
        a = MooncakeHostMemAllocator()
        n = 1 << 20
        src, dst = a.alloc(n), a.alloc(n)
        self.assertTrue(src and dst)
        self.assertEqual(src % mmap.PAGESIZE, 0)
        self.assertEqual(ctypes.string_at(src, 16), b"\0" * 16)  # zeroed
        ctypes.memset(src, 0x3C, n)
        k = mctest.key()
        self.assertEqual(self.s.register_buffer(dst, n), 0)
        self.assertEqual(self.s.put_from(k, src, n), 0)
        self.assertEqual(self.s.get_into(k, dst, n), n)
        self.assertEqual(ctypes.string_at(dst, n), b"\x3c" * n)
        self.assertEqual(self.s.unregister_buffer(dst), 0)
        # Another allocator frees it (one pool, as Mooncake's ShmHelper).
        self.assertEqual(MooncakeHostMemAllocator().free(src), 0)
        self.assertEqual(a.free(src), -1)
        self.assertEqual(a.free(dst), 0)
        self.assertEqual(a.alloc(0), 0)
        with self.assertRaises(TypeError):
            a.alloc(-1)
        with self.assertRaises(TypeError):
            a.free("x")


if __name__ == "__main__":
    unittest.main()
