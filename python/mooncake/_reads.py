"""Mooncake's read calls (get, get_batch, get_buffer, batch_get_buffer, get_into,
batch_get_into, batch_get_into_multi_buffers, get_into_ranges), mixed into
MooncakeDistributedStore. Each docstring says where mooncake-go's answer differs and why."""

import ctypes
from typing import List, Optional, Sequence

from . import _lib
from ._args import (
    _INVALID,
    Key,
    _addrs,
    _batched,
    _chunks,
    _cp,
    _int,
    _ints,
    _key,
    _keys,
    _not_set_up,
    _seq,
    _sizes,
    _sz,
    _vp,
)
from ._buffers import BufferHandle, make_handle


class ReadMethods:
    def get(self, key: Key) -> bytes:
        """The object's bytes, or b"" on a miss or an error (last_error() says which)."""
        k = _key(key)
        h = self._h
        if not h:
            _not_set_up()
            return b""
        L = self._L
        data = ctypes.c_void_p()
        n = L.mooncake_store_get_buffer(h, k, ctypes.byref(data))
        if n < 0:
            return b""
        try:
            return ctypes.string_at(data.value, n) if n else b""
        finally:
            L.mooncake_store_free_buffer(data)

    def get_batch(self, keys: Sequence[Key]) -> List[bytes]:
        """The bytes of each key (b"" for a miss or an error), in one batch. As in Mooncake,
        a batch that fails as a whole (the store is not set up, no master answered, no keys)
        returns [b""]: one empty bytes, not one per key."""
        hs = self._batch_get_handles(_keys(keys))
        if hs is None:
            return [b""]
        return [b"" if hd is None else bytes(hd) for hd in hs]

    def get_buffer(self, key: Key) -> Optional[BufferHandle]:
        """The object in memory the library allocated, or None on a miss or an error. The
        handle supports the buffer protocol (memoryview, numpy.frombuffer), .ptr(), .size()
        and len(); the memory is freed when the handle is garbage-collected."""
        k = _key(key)
        h = self._h
        if not h:
            _not_set_up()
            return None
        data = ctypes.c_void_p()
        n = self._L.mooncake_store_get_buffer(h, k, ctypes.byref(data))
        if n < 0:
            return None
        return make_handle(data.value or 0, n)

    def batch_get_buffer(self, keys: Sequence[Key]) -> List[Optional[BufferHandle]]:
        """get_buffer for each key in one batch (None for a miss or an error)."""
        ks = _keys(keys)
        hs = self._batch_get_handles(ks)
        return [None] * len(ks) if hs is None else hs

    def _batch_get_handles(self, ks: List[bytes]) -> Optional[List[Optional[BufferHandle]]]:
        """The handles of ks (None for a miss), or None when the batch failed as a whole:
        not set up, no keys, or every piece refused by the library (no master answered)."""
        n = len(ks)
        h = self._h
        if not h:
            _not_set_up()
            return None
        if n == 0:
            return None
        out: List[Optional[BufferHandle]] = []
        failed = 0
        for i, j in _chunks(n):
            m = j - i
            datas = (ctypes.c_void_p * m)()
            sizes = (ctypes.c_int64 * m)()
            rc = self._L.mooncake_store_batch_get_buffer(h, _cp(ks[i:j]), m, datas, sizes)
            if rc < 0:
                out.extend([None] * m)
                failed += m
                continue
            out.extend(make_handle(datas[x] or 0, sizes[x]) if sizes[x] >= 0 else None for x in range(m))
        return None if failed == n else out

    def get_into(self, key: Key, buffer_ptr: int, size: int) -> int:
        """Reads the object into size bytes at buffer_ptr and returns its size, or a negative
        code: OBJECT_NOT_FOUND on a miss, INVALID_PARAMS when the buffer is smaller than the
        object. Unlike Mooncake the buffer need not be registered."""
        k = _key(key)
        p, n = _int(buffer_ptr, "buffer_ptr"), _int(size, "size")
        h = self._h
        if not h:
            return _not_set_up()
        if p < 0 or n < 0:
            _lib.set_error("get_into: buffer_ptr and size must not be negative")
            return _INVALID
        return self._L.mooncake_store_get_into(h, k, p, n)

    def batch_get_into(self, keys: Sequence[Key], buffer_ptrs: Sequence[int], sizes: Sequence[int]) -> List[int]:
        """get_into for each key, in parallel: one size or negative code per key. Mismatched
        list lengths give INVALID_PARAMS for every key."""
        ks = _keys(keys)
        ps, ns = _addrs(buffer_ptrs, "buffer_ptrs"), _sizes(sizes, "sizes")
        n = len(ks)
        if not (n == len(ps) == len(ns)):
            _lib.set_error(f"batch_get_into: {n} keys, {len(ps)} buffer_ptrs, {len(ns)} sizes")
            return [_INVALID] * n
        h = self._h
        if not h:
            return [_not_set_up()] * n
        fn = self._L.mooncake_store_batch_get_into
        return _batched(n, ctypes.c_int64, lambda i, j, res: fn(h, _cp(ks[i:j]), _vp(ps[i:j]), _sz(ns[i:j]), j - i, res))

    def batch_get_into_multi_buffers(
        self,
        keys: Sequence[Key],
        all_buffer_ptrs: Sequence[Sequence[int]],
        all_sizes: Sequence[Sequence[int]],
        prefer_alloc_in_same_node: bool = False,
    ) -> List[int]:
        """Reads keys[i] scattered over the buffers all_buffer_ptrs[i] in order (sizes
        all_sizes[i]); one object size or negative code per key (INVALID_PARAMS when the
        buffers hold less than the object). prefer_alloc_in_same_node is accepted and ignored
        (reads already prefer a replica on this host)."""
        return self._multi("mooncake_store_batch_get_into_multi_buffers", ctypes.c_int64, keys, all_buffer_ptrs, all_sizes)

    def get_into_ranges(
        self,
        buffer_ptrs: Sequence[int],
        all_keys: Sequence[Sequence[Key]],
        all_dst_offsets: Sequence[Sequence[Sequence[int]]],
        all_src_offsets: Sequence[Sequence[Sequence[int]]],
        all_sizes: Sequence[Sequence[Sequence[int]]],
    ) -> List[List[List[int]]]:
        """Reads byte ranges of objects into registered buffers, buffer-major as in Mooncake:
        for each (i, j, k), bytes [src, src + size) of all_keys[i][j] go to buffer_ptrs[i] +
        all_dst_offsets[i][j][k], where src = all_src_offsets[i][j][k] and size =
        all_sizes[i][j][k]. Returns results[i][j][k]: the bytes read or a negative code. A
        shape mismatch gives INVALID_PARAMS in the entries it covers; a missing key, a range
        past the object's end or a destination outside every registered buffer fails only its
        own fragments. Unlike Mooncake, replicas on NVMe serve ranges too."""
        ps = _addrs(buffer_ptrs, "buffer_ptrs")
        nb = len(ps)
        top_ok = len(all_keys) == len(all_dst_offsets) == len(all_src_offsets) == len(all_sizes) == nb
        if not top_ok:
            _lib.set_error("get_into_ranges: buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets and all_sizes differ in length")
        results: List[List[List[int]]] = []
        frags: List[tuple] = []  # (key, dst address, src offset, size, i, j, f)
        for i, keys_i in enumerate(all_keys):
            res_i: List[List[int]] = []
            for j, key in enumerate(_seq(keys_i, "all_keys[i]")):
                k = _key(key)
                try:
                    d, sr, z = all_dst_offsets[i][j], all_src_offsets[i][j], all_sizes[i][j]
                except (IndexError, TypeError, KeyError):
                    res_i.append([_INVALID])
                    continue
                d, sr, z = _ints(d, "dst offsets"), _ints(sr, "src offsets"), _ints(z, "sizes")
                if not top_ok or not (len(d) == len(sr) == len(z)):
                    res_i.append([_INVALID] * max(len(d), len(sr), len(z), 1))
                    continue
                res_i.append([_INVALID] * len(d))
                for f in range(len(d)):
                    if d[f] < 0 or sr[f] < 0 or z[f] < 0:
                        continue
                    frags.append((k, ps[i] + d[f], sr[f], z[f], i, j, f))
            results.append(res_i)
        h = self._h
        if not h:
            _not_set_up()
            return results
        for a, b in _chunks(len(frags)):
            part = frags[a:b]
            m = len(part)
            res = (ctypes.c_int64 * m)()
            rc = self._L.mooncake_store_get_into_ranges(
                h, m, _cp([x[0] for x in part]), _vp([x[1] for x in part]),
                (ctypes.c_uint64 * m)(*[x[2] for x in part]), _sz([x[3] for x in part]), res,
            )
            for x, (_, _, _, _, i, j, f) in enumerate(part):
                results[i][j][f] = rc if rc < 0 else res[x]
        return results
