"""Mooncake's torch tensor helpers (issue 20): each a successful and a failing call, the
stored layout byte for byte (so tensors written by Mooncake read here and back), the
tensor-parallel split and merge, and the code a helper returns without torch."""

import ctypes
import os
import struct
import sys
import tempfile
import unittest

import mctest
from mooncake.store import ErrorCode, ParallelAxis, ReadTarget, ReplicateConfig, TensorParallelism

INVALID = int(ErrorCode.INVALID_PARAMS)
NOT_SUPPORTED = int(ErrorCode.NOT_SUPPORTED)
NOT_SET_UP = int(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS)
HDR = struct.Struct("<ii4q")  # Mooncake's TensorMetadata


def tp(rank, size, split_dim):
    return TensorParallelism([ParallelAxis(kind="tp", rank=rank, size=size, split_dim=split_dim)])


class TensorTest(mctest.StandaloneCase):
    @classmethod
    def setUpClass(cls):
        cls.torch = mctest.torch()
        super().setUpClass()

    def t(self, *shape, dtype=None):
        torch = self.torch
        n = 1
        for d in shape:
            n *= d
        return torch.arange(n, dtype=torch.float32).reshape(shape).to(dtype or torch.float32)

    def buf(self, n=4096):
        return mctest.cbuf(n)

    # -- the stored layout --

    def test_layout_is_mooncakes(self):
        torch, s, k = self.torch, self.s, mctest.key()
        t = self.t(2, 3, dtype=torch.int16)
        self.assertEqual(s.put_tensor(k, t), 0)
        raw = s.get(k)
        self.assertEqual(len(raw), 40 + 12)
        self.assertEqual(HDR.unpack_from(raw), (4, 2, 2, 3, -1, -1))  # INT16 = 4
        self.assertEqual(raw[40:], t.numpy().tobytes())
        # Bytes as Mooncake writes them (bfloat16, code 12) read back as that tensor.
        k2 = mctest.key()
        b = self.t(4, dtype=torch.bfloat16)
        self.assertEqual(s.put(k2, HDR.pack(12, 1, 4, -1, -1, -1) + bytes(b.view(torch.uint8).numpy())), 0)
        got = s.get_tensor(k2)
        self.assertEqual(got.dtype, torch.bfloat16)
        self.assertTrue(torch.equal(got, b))

    def test_dtypes_and_shapes_round_trip(self):
        torch, s = self.torch, self.s
        cases = [self.t(5, dtype=d) for d in (torch.float32, torch.float64, torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16)]
        cases += [torch.tensor([True, False, True]), self.t(1, 2, 3, 2), torch.tensor(7.5)]
        for t in cases:
            k = mctest.key()
            self.assertEqual(s.put_tensor(k, t), 0, t.dtype)
            got = s.get_tensor(k)
            self.assertEqual((got.dtype, tuple(got.shape)), (t.dtype, tuple(t.shape)))
            self.assertTrue(torch.equal(got, t), t.dtype)
        # Non-contiguous tensors are stored as their contiguous values.
        k = mctest.key()
        nc = self.t(3, 4).t()
        self.assertEqual(s.put_tensor(k, nc), 0)
        self.assertTrue(torch.equal(s.get_tensor(k), nc))

    def test_put_get_tensor_failures(self):
        torch, s = self.torch, self.s
        for bad in ("not a tensor", torch.zeros(0), torch.zeros(1, 1, 1, 1, 1), torch.zeros(2, dtype=torch.complex64)):
            self.assertEqual(s.put_tensor(mctest.key(), bad), INVALID)
            self.assertTrue(s.last_error())
        self.assertIsNone(s.get_tensor(mctest.key("miss")))
        k = mctest.key()
        self.assertEqual(s.put(k, b"not a tensor at all, but long enough for a header....."), 0)
        self.assertIsNone(s.get_tensor(k))  # bytes that are not in the layout
        self.assertIsNone(s.get_tensor(mctest.key()))

    def test_pub_upsert(self):
        torch, s, k = self.torch, self.s, mctest.key()
        cfg = ReplicateConfig(replica_num=1)
        self.assertEqual(s.pub_tensor(k, self.t(3), cfg), 0)
        self.assertEqual(s.upsert_tensor(k, self.t(2)), 0)
        self.assertEqual(s.get_tensor(k).shape, (2,))
        self.assertEqual(s.upsert_pub_tensor(k, self.t(4), cfg), 0)
        self.assertEqual(s.get_tensor(k).shape, (4,))
        bad = ReplicateConfig(replica_num=1)
        bad.preferred_segments = ["a", "b"]  # must match replica_num, as Mooncake checks
        self.assertEqual(s.pub_tensor(mctest.key(), self.t(3), bad), INVALID)
        self.assertEqual(s.upsert_tensor(k, None), INVALID)

    def test_batches(self):
        torch, s = self.torch, self.s
        ks = [mctest.key() for _ in range(3)]
        ts = [self.t(i + 1) for i in range(3)]
        self.assertEqual(s.batch_put_tensor(ks, ts), [0, 0, 0])
        got = s.batch_get_tensor(ks + [mctest.key("miss")])
        self.assertTrue(all(torch.equal(a, b) for a, b in zip(got, ts)))
        self.assertIsNone(got[3])
        self.assertEqual(s.batch_put_tensor(ks[:2], ts[:1]), [INVALID, INVALID])
        self.assertEqual(s.batch_put_tensor([mctest.key(), mctest.key()], [ts[0], "x"]), [0, INVALID])
        self.assertEqual(s.batch_pub_tensor(ks, ts, ReplicateConfig()), [0, 0, 0])
        self.assertEqual(s.batch_upsert_tensor(ks, ts[::-1]), [0, 0, 0])
        self.assertTrue(torch.equal(s.get_tensor(ks[0]), ts[2]))
        self.assertEqual(s.batch_upsert_pub_tensor(ks, ts, ReplicateConfig()), [0, 0, 0])
        self.assertEqual(s.batch_upsert_tensor(ks, ts[:1]), [INVALID] * 3)

    def test_into(self):
        torch, s, k = self.torch, self.s, mctest.key()
        t = self.t(4, 4)
        self.assertEqual(s.put_tensor(k, t), 0)
        b, p = self.buf()
        got = s.get_tensor_into(k, p, len(b))
        self.assertTrue(torch.equal(got, t))
        got[0, 0] = 99.0  # the tensor is a view of the caller's buffer, as in Mooncake
        self.assertEqual(struct.unpack_from("<f", b, 40)[0], 99.0)
        self.assertIsNone(s.get_tensor_into(k, p, 50))  # buffer too small
        self.assertIsNone(s.get_tensor_into(mctest.key("miss"), p, len(b)))
        b2, p2 = self.buf()
        res = s.batch_get_tensor_into([k, mctest.key("miss")], [p, p2], [len(b), len(b2)])
        self.assertTrue(torch.equal(res[0], t))
        self.assertIsNone(res[1])
        self.assertEqual(s.batch_get_tensor_into([k], [p, p2], [1]), [INVALID])
        # put_tensor_from stores a buffer already in the layout (what get_tensor_into left).
        k2 = mctest.key()
        self.assertEqual(s.put_tensor_from(k2, p, 40 + 64), 0)
        self.assertTrue(torch.equal(s.get_tensor(k2), got))
        self.assertEqual(s.upsert_tensor_from(k2, p, 40 + 64), 0)
        junk, pj = self.buf(64)
        ctypes.memset(pj, 0x7F, 64)
        self.assertEqual(s.put_tensor_from(mctest.key(), pj, 64), INVALID)  # no header
        self.assertEqual(s.batch_put_tensor_from([mctest.key(), mctest.key()], [p, pj], [104, 64]), [0, INVALID])
        self.assertEqual(s.batch_upsert_tensor_from([k2], [p], [104, 1]), [INVALID])
        self.assertEqual(s.batch_upsert_tensor_from([k2], [p], [104]), [0])

    def test_get_tensor_into_cuda_with_a_cpu_destination(self):
        # Mooncake's get_tensor_into_cuda takes a destination tensor (CUDA or CPU) and
        # returns the data bytes; on a GPU benchmarks/gpu/check.py runs it with CUDA ones.
        torch, s, k = self.torch, self.s, mctest.key()
        t = self.t(3, 5)
        self.assertEqual(s.put_tensor(k, t), 0)
        dst = torch.full_like(t, -1.0)
        self.assertEqual(s.get_tensor_into_cuda(k, dst), t.numel() * 4)
        self.assertTrue(torch.equal(dst, t))
        big = torch.zeros(100)  # larger than the data: the first bytes are written
        self.assertEqual(s.get_tensor_into_cuda(k, big), 60)
        self.assertTrue(torch.equal(big[:15].view(3, 5), t))
        self.assertTrue(torch.equal(big[15:], torch.zeros(85)))
        self.assertEqual(s.get_tensor_into_cuda(k, torch.zeros(2)), INVALID)  # too small
        self.assertEqual(s.get_tensor_into_cuda(k, torch.zeros(4, 8).t()), INVALID)  # not contiguous
        self.assertEqual(s.get_tensor_into_cuda(k, object()), INVALID)
        miss = mctest.key("miss")
        self.assertEqual(s.batch_get_tensor_into_cuda([miss, k], [torch.zeros(15), dst]), [int(ErrorCode.OBJECT_NOT_FOUND), 60])
        self.assertEqual(s.batch_get_tensor_into_cuda([k], []), [INVALID])
        raw = mctest.key()
        self.assertEqual(s.put(raw, b"\x7f" * 80), 0)  # not the tensor layout
        self.assertEqual(s.get_tensor_into_cuda(raw, torch.zeros(20)), INVALID)

    # -- tensor parallel --

    def test_tp_split_and_read(self):
        torch, s, k = self.torch, self.s, mctest.key()
        t = self.t(4, 6)
        self.assertEqual(s.put_tensor_with_tp(k, t, tp_size=3, split_dim=1), 0)
        for r, want in enumerate(t.chunk(3, 1)):
            self.assertTrue(torch.equal(s.get_tensor(f"{k}_tp_{r}"), want))  # Mooncake's key names
            self.assertTrue(torch.equal(s.get_tensor_with_tp(k, tp_rank=r, tp_size=3), want))
        self.assertIsNone(s.get_tensor(k))
        self.assertTrue(torch.equal(s.get_tensor_with_tp(f"{k}_tp_0", 0, 1), t.chunk(3, 1)[0]))  # tp_size 1: the key itself
        self.assertEqual(s.put_tensor_with_tp(mctest.key(), self.t(2, 2), tp_size=3), INVALID)  # 2 rows, 3 ranks
        self.assertEqual(s.put_tensor_with_tp(mctest.key(), t, tp_size=2, split_dim=5), INVALID)
        self.assertIsNone(s.get_tensor_with_tp(k, tp_rank=7, tp_size=8))
        b, p = self.buf()
        self.assertTrue(torch.equal(s.get_tensor_with_tp_into(k, p, len(b), 2, 3), t.chunk(3, 1)[2]))
        self.assertIsNone(s.get_tensor_with_tp_into(k, p, 8, 2, 3))

    def test_tp_batches_and_pub(self):
        torch, s = self.torch, self.s
        ks, ts = [mctest.key(), mctest.key()], [self.t(4), self.t(2, 2)]
        self.assertEqual(s.batch_put_tensor_with_tp(ks, ts, tp_size=2), [0, 0])
        got = s.batch_get_tensor_with_tp(ks, tp_rank=1, tp_size=2)
        self.assertTrue(torch.equal(got[0], ts[0][2:]) and torch.equal(got[1], ts[1][1:]))
        self.assertEqual(s.batch_put_tensor_with_tp(ks, ts[:1], tp_size=2), [INVALID, INVALID])
        self.assertEqual(s.pub_tensor_with_tp(mctest.key(), ts[0], ReplicateConfig(), tp_size=2), 0)
        self.assertEqual(s.pub_tensor_with_tp(mctest.key(), "x", ReplicateConfig(), tp_size=2), INVALID)
        self.assertEqual(s.batch_pub_tensor_with_tp(ks, ts, ReplicateConfig(), tp_size=2), [0, 0])
        b1, p1 = self.buf()
        b2, p2 = self.buf()
        res = s.batch_get_tensor_with_tp_into(ks, [p1, p2], [4096, 4096], tp_rank=0, tp_size=2)
        self.assertTrue(torch.equal(res[0], ts[0][:2]) and torch.equal(res[1], ts[1][:1]))
        self.assertEqual(s.batch_get_tensor_with_tp_into(ks, [p1], [4096], 0, 2), [INVALID, INVALID])
        # From a buffer in the stored layout: split as put_tensor_with_tp does.
        k = mctest.key()
        s.put_tensor(k, self.t(6))
        n = s.get_into(k, p1, 4096)
        k2 = mctest.key()
        self.assertEqual(s.put_tensor_with_tp_from(k2, p1, n, tp_size=3), 0)
        self.assertTrue(torch.equal(s.get_tensor_with_tp(k2, 2, 3), self.t(6)[4:]))
        self.assertEqual(s.put_tensor_with_tp_from(mctest.key(), p1, 10, tp_size=3), INVALID)
        self.assertEqual(s.batch_put_tensor_with_tp_from([mctest.key()], [p1], [n], tp_size=2), [0])

    def test_parallelism_family(self):
        torch, s, k = self.torch, self.s, mctest.key()
        t = self.t(4, 2)
        self.assertEqual(s.put_tensor_with_parallelism(k, t, tp(0, 2, 0)), 0)
        self.assertTrue(torch.equal(s.get_tensor_with_parallelism(k, ReadTarget("shard", tp(1, 2, 0))), t[2:]))
        self.assertTrue(torch.equal(s.get_tensor_with_parallelism(k, ReadTarget("full", tp(0, 2, 0))), t))
        self.assertIsNone(s.get_tensor_with_parallelism(k))  # as stored: split, nothing whole under k
        self.assertTrue(torch.equal(s.get_tensor_with_tp(k, 1, 2), t[2:]))  # the TP readers see the shards
        whole = mctest.key()
        dp = TensorParallelism([ParallelAxis(kind="dp", rank=0, size=2)])  # replicated: stored whole
        self.assertEqual(s.put_tensor_with_parallelism(whole, t, dp, ReplicateConfig()), 0)
        self.assertTrue(torch.equal(s.get_tensor_with_parallelism(whole), t))
        two = TensorParallelism([ParallelAxis("tp", 0, 2, 0), ParallelAxis("ep", 0, 2, 1)])
        self.assertEqual(s.put_tensor_with_parallelism(mctest.key(), t, two), INVALID)
        self.assertEqual(s.put_tensor_with_parallelism(mctest.key(), t, tp(3, 2, 0)), INVALID)
        self.assertIsNone(s.get_tensor_with_parallelism(mctest.key("miss"), ReadTarget("full", tp(0, 2, 0))))
        with self.assertRaises(RuntimeError):
            ReadTarget("sideways")
        # A writer that holds one shard writes only it; the full read merges them.
        w = mctest.key()
        self.assertEqual(s.put_tensor_with_parallelism(w, t[:2], writer_partition={"rank": 0, "size": 2, "split_dim": 0}), 0)
        self.assertIsNone(s.get_tensor_with_parallelism(w, ReadTarget("full", tp(0, 2, 0))))  # shard 1 missing
        self.assertEqual(s.upsert_tensor_with_parallelism(w, t[2:], writer_partition={"rank": 1, "size": 2, "split_dim": 0}), 0)
        self.assertTrue(torch.equal(s.get_tensor_with_parallelism(w, ReadTarget("full", tp(0, 2, 0))), t))
        self.assertEqual(s.put_tensor_with_parallelism(w, t, writer_partition={"rank": 2, "size": 2}), INVALID)
        # Batches, from buffers, into buffers.
        ks = [mctest.key(), mctest.key()]
        self.assertEqual(s.batch_put_tensor_with_parallelism(ks, [t, t], [tp(0, 2, 0), None]), [0, 0])
        self.assertEqual(s.batch_upsert_tensor_with_parallelism(ks, [t, t], [tp(0, 2, 0), None]), [0, 0])
        self.assertEqual(s.batch_put_tensor_with_parallelism(ks, [t], None), [INVALID, INVALID])
        got = s.batch_get_tensor_with_parallelism(ks, [ReadTarget("full", tp(0, 2, 0)), None])
        self.assertTrue(torch.equal(got[0], t) and torch.equal(got[1], t))
        b, p = self.buf()
        got = s.get_tensor_with_parallelism_into(ks[0], p, len(b), ReadTarget("full", tp(0, 2, 0)))
        self.assertTrue(torch.equal(got, t))
        self.assertEqual(HDR.unpack_from(b)[:4], (0, 2, 4, 2))
        self.assertIsNone(s.get_tensor_with_parallelism_into(ks[0], p, 41, ReadTarget("full", tp(0, 2, 0))))
        b2, p2 = self.buf()
        res = s.batch_get_tensor_with_parallelism_into(ks, [p, p2], [4096, 4096])
        self.assertIsNone(res[0])
        self.assertTrue(torch.equal(res[1], t))
        n = s.get_into(ks[1], p2, 4096)
        k3 = mctest.key()
        self.assertEqual(s.put_tensor_with_parallelism_from(k3, p2, n, tp(0, 2, 1)), 0)
        self.assertTrue(torch.equal(s.get_tensor_with_tp(k3, 1, 2), t[:, 1:]))
        self.assertEqual(s.upsert_tensor_with_parallelism_from(k3, p2, n), 0)
        self.assertEqual(s.batch_put_tensor_with_parallelism_from([mctest.key()], [p2], [n]), [0])
        self.assertEqual(s.batch_upsert_tensor_with_parallelism_from([k3], [p2], [n, n]), [INVALID])
        self.assertEqual(s.put_tensor_with_parallelism_from(mctest.key(), p2, 12), INVALID)

    # -- safetensors --

    def test_safetensors(self):
        torch, s, k = self.torch, self.s, mctest.key()
        t = self.t(3, 2, dtype=torch.float16)
        s.put_tensor(k, t)
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "t.safetensors")
            self.assertEqual(s.save_tensor_to_safetensor(k, f), 0)
            with open(f, "rb") as fh:
                (hl,) = struct.unpack("<Q", fh.read(8))
                self.assertIn(b'"F16"', fh.read(hl))
            self.assertEqual(s.save_tensor_to_safetensor(mctest.key("miss"), f), int(ErrorCode.FILE_NOT_FOUND))
            self.assertEqual(s.save_tensor_to_safetensor(k, os.path.join(d, "no", "dir")), INVALID)
            k2 = mctest.key()
            got = s.load_tensor_from_safetensor(k2, f)  # no entry k2: the first one is used
            self.assertTrue(torch.equal(got, t))
            self.assertTrue(torch.equal(s.get_tensor(k2), t))
            self.assertIsNone(s.load_tensor_from_safetensor(k2, os.path.join(d, "missing")))

    def test_every_helper_fails_cleanly(self):
        # One failing call per helper not failed above: mismatched batches, bad tensors,
        # misses. Writes give codes, reads None (or INVALID_PARAMS per key where Mooncake does).
        s, k, t = self.s, mctest.key("miss"), self.t(2)
        cfg = ReplicateConfig()
        codes = {
            "batch_pub_tensor": s.batch_pub_tensor([k, k], [t], cfg),
            "batch_upsert_pub_tensor": s.batch_upsert_pub_tensor([k], [None], cfg),
            "upsert_pub_tensor": s.upsert_pub_tensor(k, "x", cfg),
            "batch_upsert_tensor_with_parallelism": s.batch_upsert_tensor_with_parallelism([k], [t, t]),
            "upsert_tensor_with_parallelism_from": s.upsert_tensor_with_parallelism_from(k, 0, 0),
            "batch_put_tensor_with_parallelism_from": s.batch_put_tensor_with_parallelism_from([k], [1, 2], [3]),
            "batch_pub_tensor_with_tp": s.batch_pub_tensor_with_tp([k], ["x"], cfg, tp_size=2),
            "batch_put_tensor_with_tp_from": s.batch_put_tensor_with_tp_from([k], [], [], tp_size=2),
            "batch_put_tensor_from": s.batch_put_tensor_from([k], [0], [100]),
        }
        want = {n: INVALID for n in codes}
        for n in ("batch_pub_tensor", "batch_upsert_tensor_with_parallelism", "batch_put_tensor_with_parallelism_from", "batch_put_tensor_with_tp_from"):
            want[n] = [INVALID] * (1 if n != "batch_pub_tensor" else 2)
        for n in ("batch_upsert_pub_tensor", "batch_pub_tensor_with_tp", "batch_put_tensor_from"):
            want[n] = [INVALID]
        self.assertEqual(codes, want)
        self.assertEqual(s.batch_get_tensor_with_tp([k], 1, 2), [None])
        self.assertEqual(s.batch_get_tensor_with_parallelism([k], [ReadTarget("shard", tp(1, 2, 0))]), [None])
        self.assertEqual(s.batch_get_tensor_with_parallelism([k, k], [None]), [None, None])
        self.assertEqual(s.batch_get_tensor_with_parallelism_into([k], [1], [1, 2]), [None])
        self.assertIsNone(s.get_tensor_with_parallelism(k, "full"))  # not a ReadTarget

    # -- without torch, and not set up --

    def test_without_torch_a_code_not_importerror(self):
        s, saved = self.s, sys.modules.get("torch")
        sys.modules["torch"] = None  # import torch now raises ImportError
        try:
            self.assertEqual(s.put_tensor(mctest.key(), object()), NOT_SUPPORTED)
            self.assertIn("torch", s.last_error())
            self.assertEqual(s.batch_put_tensor_with_tp(["a"], [1], tp_size=2), [NOT_SUPPORTED])
            self.assertIsNone(s.get_tensor("a"))
            self.assertEqual(s.batch_get_tensor(["a", "b"]), [None, None])
        finally:
            sys.modules["torch"] = saved

    def test_not_set_up(self):
        from mooncake.store import MooncakeDistributedStore

        s = MooncakeDistributedStore()
        self.assertEqual(s.put_tensor("k", self.t(2)), NOT_SET_UP)
        self.assertEqual(s.batch_put_tensor(["k"], [self.t(2)]), [NOT_SET_UP])
        self.assertIsNone(s.get_tensor("k"))
        self.assertEqual(s.batch_get_tensor_into(["k"], [1], [1]), [INVALID])  # Mooncake's convention
        self.assertEqual(s.save_tensor_to_safetensor("k"), NOT_SET_UP)

    def test_tensors_neither_cpu_nor_cuda_are_not_supported(self):
        # CUDA tensors are taken (benchmarks/gpu/check.py runs them on a GPU); a tensor on
        # another device, here torch's "meta" device (shapes without memory), is refused.
        t = self.torch.empty(2, 3, device="meta")
        self.assertEqual(self.s.put_tensor(mctest.key(), t), NOT_SUPPORTED)
        self.assertIn("meta", self.s.last_error())
        self.assertEqual(self.s.batch_put_tensor([mctest.key()], [t]), [NOT_SUPPORTED])

if __name__ == "__main__":
    unittest.main()
