"""Mooncake's torch tensor helpers (put_tensor, get_tensor, the *_with_tp and
*_with_parallelism families, safetensors export and import), mixed into
MooncakeDistributedStore.

torch is imported when a helper is first called, never by ``import mooncake.store``; without
torch a write returns NOT_SUPPORTED and a read returns None (last_error() says "torch is not
installed"), instead of raising ImportError.

Stored layout (Mooncake's TensorMetadata, integration_utils.h, so objects written by either
store are read by the other): one object per tensor, a 40-byte header then the raw bytes in
row-major (C-contiguous) order, all little-endian::

    | dtype int32 | ndim int32 | shape[0..3] int64 (-1 past ndim) | data (numel * itemsize) |

dtype codes: float32 0, float64 1, int8 2, uint8 3, int16 4, uint16 5, int32 6, uint32 7,
int64 8, uint64 9, bool 10, float16 11, bfloat16 12, float8_e4m3fn 13, float8_e5m2 14. At
most 4 dimensions. Tensor-parallel puts split the tensor with ``tensor.chunk(tp_size,
split_dim)`` and store shard r under ``<key>_tp_<r>``, each in the layout above.
"""

import ctypes
import json
import struct
from typing import Any, List, Optional, Sequence, Tuple

from . import _lib
from ._types import ErrorCode, ReadTarget, TensorParallelism

_HDR = struct.Struct("<ii4q")  # Mooncake's TensorMetadata: 40 bytes
HEADER_SIZE = _HDR.size

# (code, torch dtype name, itemsize, safetensors name)
_DTYPES = [
    (0, "float32", 4, "F32"),
    (1, "float64", 8, "F64"),
    (2, "int8", 1, "I8"),
    (3, "uint8", 1, "U8"),
    (4, "int16", 2, "I16"),
    (5, "uint16", 2, "U16"),
    (6, "int32", 4, "I32"),
    (7, "uint32", 4, "U32"),
    (8, "int64", 8, "I64"),
    (9, "uint64", 8, "U64"),
    (10, "bool", 1, "BOOL"),
    (11, "float16", 2, "F16"),
    (12, "bfloat16", 2, "BF16"),
    (13, "float8_e4m3fn", 1, "F8_E4M3"),
    (14, "float8_e5m2", 1, "F8_E5M2"),
]

_INVALID = int(ErrorCode.INVALID_PARAMS)
_NOT_SUPPORTED = int(ErrorCode.NOT_SUPPORTED)
_NOT_SET_UP = int(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS)
_FILE_NOT_FOUND = int(ErrorCode.FILE_NOT_FOUND)
_NO_TORCH = "torch is not installed: the tensor helpers need it (Debian: apt-get install python3-torch)"


def _torch() -> Any:
    try:
        import torch  # noqa: PLC0415 (imported on first use, by design)
    except ImportError:
        return None
    return torch


def _fail(msg: str, code: int = _INVALID) -> int:
    _lib.set_error(msg)
    return code


def _dtype_code(torch: Any, dt: Any) -> int:
    for code, name, _, _ in _DTYPES:
        if getattr(torch, name, None) == dt:
            return code
    return -1


def _encode(torch: Any, key: str, t: Any) -> Tuple[int, Any, Any]:
    """(0, header bytes, contiguous tensor on t's device) or (negative code, None, None).
    CPU and CUDA tensors are taken (the C library copies CUDA memory itself); others are
    NOT_SUPPORTED."""
    if not isinstance(t, torch.Tensor):
        return _fail(f"{key}: {type(t).__name__} is not a torch.Tensor"), None, None
    if t.device.type not in ("cpu", "cuda"):
        return _fail(f"{key}: tensors on {t.device} are not supported (CPU and CUDA are)", _NOT_SUPPORTED), None, None
    code = _dtype_code(torch, t.dtype)
    if code < 0:
        return _fail(f"{key}: unsupported tensor dtype {t.dtype}"), None, None
    if t.dim() > 4:
        return _fail(f"{key}: tensor has {t.dim()} dimensions, at most 4 are stored"), None, None
    if t.numel() == 0:
        return _fail(f"{key}: empty tensor"), None, None
    shape = list(t.shape) + [-1] * (4 - t.dim())
    return 0, _HDR.pack(code, t.dim(), *shape), t.contiguous()


def _view(ptr: int, n: int) -> Any:
    """n bytes at ptr as a writable buffer without a copy (the memory is not owned)."""
    return (ctypes.c_ubyte * n).from_address(ptr)


def _meta(torch: Any, hdr: Any, n: int) -> Optional[Tuple[Any, List[int]]]:
    """(torch dtype, shape) of an object of n bytes whose header is hdr, or None with an error."""
    if n <= HEADER_SIZE:
        _lib.set_error(f"object of {n} bytes is too small for a tensor header")
        return None
    code, ndim, *shape = _HDR.unpack_from(hdr, 0)
    if ndim < 0 or ndim > 4:
        _lib.set_error(f"invalid tensor metadata: ndim={ndim}")
        return None
    ent = next((d for d in _DTYPES if d[0] == code), None)
    dt = getattr(torch, ent[1], None) if ent else None
    if dt is None:
        _lib.set_error(f"unsupported tensor dtype code {code}")
        return None
    shape = shape[:ndim]
    numel = 1
    for s in shape:
        numel *= s
    if any(s < 0 for s in shape) or numel * ent[2] != n - HEADER_SIZE:
        _lib.set_error(f"tensor shape {shape} of {ent[1]} does not match {n - HEADER_SIZE} data bytes")
        return None
    return dt, shape


def _decode(torch: Any, buf: Any, n: int) -> Any:
    """The tensor in host buffer buf's first n bytes (sharing buf's memory), or None with an
    error."""
    m = _meta(torch, buf, n)
    if m is None:
        return None
    raw = torch.frombuffer(buf, dtype=torch.uint8, count=n - HEADER_SIZE, offset=HEADER_SIZE)
    return raw.view(m[0]).reshape(m[1])


# GPU memory. The byte-level calls take CUDA addresses (the C library classifies and copies
# them), but a helper that touches a caller's buffer itself (reads a header, makes a tensor
# over it, writes into it) must know which memory it holds: a CUDA address read as host
# memory would crash the process. mcpy_is_device_memory answers from the CUDA driver the
# process has loaded; a process without CUDA has only host memory.


class _CudaSpan:
    """n bytes of GPU memory at ptr, offered to torch.as_tensor through the CUDA array
    interface: the tensor shares the memory (not owned; valid while the caller's buffer is)
    and lives on the device that holds the address."""

    def __init__(self, ptr: int, n: int) -> None:
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (ptr, False), "version": 2}


def _is_device(ptr: int, n: int) -> int:
    """1 for GPU memory, 0 for host memory, or a negative code with last_error set."""
    return int(_lib.load().mcpy_is_device_memory(ptr, n))


def _span(torch: Any, ptr: int, n: int) -> Any:
    """A uint8 tensor over the caller's n bytes at ptr (host or GPU), or None with an error."""
    dev = _is_device(ptr, n)
    if dev < 0:
        return None
    if dev == 0:
        return torch.frombuffer(_view(ptr, n), dtype=torch.uint8)
    if torch is None:
        _lib.set_error(_NO_TORCH)
        return None
    return torch.as_tensor(_CudaSpan(ptr, n))


def _peek(torch: Any, ptr: int, n: int) -> Optional[bytes]:
    """A host copy of the caller's first n bytes at ptr (host or GPU), or None with an error."""
    dev = _is_device(ptr, n)
    if dev == 0:
        return ctypes.string_at(ptr, n)
    sp = _span(torch, ptr, n) if dev > 0 else None
    return None if sp is None else bytes(sp.cpu().tolist())


def _decode_at(torch: Any, ptr: int, n: int) -> Any:
    """The tensor in the caller's first n bytes at ptr, host or GPU memory, sharing that
    memory; None with an error."""
    sp = _span(torch, ptr, n) if n > HEADER_SIZE else None
    if sp is None:
        if n <= HEADER_SIZE:
            _lib.set_error(f"object of {n} bytes is too small for a tensor header")
        return None
    hdr = bytes(sp[:HEADER_SIZE].cpu().tolist()) if sp.is_cuda else _view(ptr, HEADER_SIZE)
    m = _meta(torch, hdr, n)
    return None if m is None else sp[HEADER_SIZE:n].view(m[0]).reshape(m[1])


def _sync_producers(torch: Any, tensors: Sequence[Any]) -> None:
    """Waits for the work of torch's current stream on each CUDA device the tensors are on:
    the library copies GPU memory on a stream of its own, ordered only after the legacy
    default stream, so work on another stream (a caller's, or torch's current one) must be
    finished before the copy reads the bytes."""
    for d in {t.device for t in tensors if t.is_cuda}:
        torch.cuda.current_stream(d).synchronize()


def _chunks(torch: Any, t: Any, tp_size: int, split_dim: int) -> Optional[List[Any]]:
    """Mooncake's TP split: tensor.chunk(tp_size, split_dim), each made contiguous; None
    when the tensor does not give tp_size chunks."""
    if not isinstance(t, torch.Tensor):
        return None
    try:
        parts = t.chunk(tp_size, split_dim)
    except (IndexError, RuntimeError, ValueError):
        return None
    if len(parts) != tp_size:
        return None
    return [p.contiguous() for p in parts]


def tp_key(key: str, rank: int) -> str:
    return f"{key}_tp_{rank}"


def _split_axis(p: Any) -> Tuple[int, Any]:
    """(0, the one axis that splits the tensor or None) or (INVALID, None)."""
    if p is None:
        return 0, None
    if not isinstance(p, TensorParallelism):
        return _fail("parallelism must be a TensorParallelism or None"), None
    split = [a for a in p.axes if a.split_dim is not None]
    if len(split) > 1:
        return _fail("more than one splitting axis is not supported here"), None
    if split:
        a = split[0]
        if a.size < 1 or not 0 <= a.rank < a.size:
            return _fail(f"axis {a.kind}: rank {a.rank} is not in [0, {a.size})"), None
        return 0, a
    return 0, None


def _writer(w: Any) -> Optional[Tuple[int, int, int]]:
    """A writer_partition as (rank, size, split_dim): a dict or an object with those names."""
    get = w.get if isinstance(w, dict) else (lambda k, d=None: getattr(w, k, d))
    try:
        r, s, d = int(get("rank", 0)), int(get("size", 1)), int(get("split_dim", 0))
    except (TypeError, ValueError):
        return None
    return (r, s, d) if s >= 1 and 0 <= r < s else None


class TensorMethods:
    """The tensor helpers. Mixed into MooncakeDistributedStore; every method uses only the
    store's public byte-level calls (put_parts, batch_put_from_multi_buffers, get_buffer,
    get_into, ...), so codes and errors are theirs."""

    # -- writes --

    def _tensor_puts(self, keys: Sequence[str], tensors: Sequence[Any], config: Any, upsert: bool, what: str) -> List[int]:
        torch = _torch()
        n = len(keys)
        if torch is None:
            _lib.set_error(_NO_TORCH)
            return [_NOT_SUPPORTED] * n
        if not self._h:  # type: ignore[attr-defined]
            return [self._not_set_up_code()] * n
        if n != len(tensors) or n == 0:
            _lib.set_error(f"{what}: {n} keys and {len(tensors)} tensors")
            return [_INVALID] * n
        if config is not None:
            segs = list(getattr(config, "preferred_segments", None) or [])
            if segs and len(segs) != getattr(config, "replica_num", 1):
                _lib.set_error(f"{what}: preferred_segments has {len(segs)} entries but replica_num is {config.replica_num}")
                return [_INVALID] * n
        out = [0] * n
        enc = [_encode(torch, str(k), t) for k, t in zip(keys, tensors)]
        for i, (rc, _, _) in enumerate(enc):
            out[i] = rc
        ok = [i for i in range(n) if out[i] == 0]
        if not ok:
            return out
        hdrs = [enc[i][1] for i in ok]
        data = [enc[i][2] for i in ok]  # kept alive for the call
        _sync_producers(torch, data)
        hbuf = ctypes.create_string_buffer(b"".join(hdrs))
        base = ctypes.addressof(hbuf)
        if upsert:
            for j, i in enumerate(ok):
                h = _view(base + j * HEADER_SIZE, HEADER_SIZE)
                if data[j].is_cuda:
                    # One device buffer of header and data (a copy on the GPU): upsert_parts
                    # takes host buffers only.
                    whole = torch.cat([torch.frombuffer(bytearray(h), dtype=torch.uint8).to(data[j].device), data[j].reshape(-1).view(torch.uint8)])
                    torch.cuda.current_stream(whole.device).synchronize()
                    out[i] = self.upsert_from(keys[i], whole.data_ptr(), whole.numel(), config)  # type: ignore[attr-defined]
                    continue
                d = _view(data[j].data_ptr(), data[j].numel() * data[j].element_size())
                out[i] = self.upsert_parts(keys[i], h, d, config=config)  # type: ignore[attr-defined]
            return out
        ptrs = [[base + j * HEADER_SIZE, data[j].data_ptr()] for j in range(len(ok))]
        sizes = [[HEADER_SIZE, data[j].numel() * data[j].element_size()] for j in range(len(ok))]
        res = self.batch_put_from_multi_buffers([keys[i] for i in ok], ptrs, sizes, config)  # type: ignore[attr-defined]
        for j, i in enumerate(ok):
            out[i] = res[j]
        return out

    def _not_set_up_code(self) -> int:
        from .store import _not_set_up  # noqa: PLC0415 (store imports this module)

        return _not_set_up()

    def put_tensor(self, key: str, tensor: Any) -> int:
        """Stores a CPU or CUDA tensor (Mooncake's layout, module docstring): 0 or a negative code.
        INVALID_PARAMS for a non-tensor, an unsupported dtype, more than 4 dimensions or no
        elements; NOT_SUPPORTED for a tensor neither on the CPU nor on CUDA, or without
        torch. A non-contiguous tensor is stored as its contiguous copy (Mooncake would store
        its raw storage)."""
        return self._tensor_puts([key], [tensor], None, False, "put_tensor")[0]

    def pub_tensor(self, key: str, tensor: Any, config: Any = None) -> int:
        """put_tensor with a ReplicateConfig."""
        return self._tensor_puts([key], [tensor], config, False, "pub_tensor")[0]

    def upsert_tensor(self, key: str, tensor: Any) -> int:
        return self._tensor_puts([key], [tensor], None, True, "upsert_tensor")[0]

    def upsert_pub_tensor(self, key: str, tensor: Any, config: Any = None) -> int:
        return self._tensor_puts([key], [tensor], config, True, "upsert_pub_tensor")[0]

    def batch_put_tensor(self, keys: Sequence[str], tensors_list: Sequence[Any]) -> List[int]:
        """One code per key; mismatched lengths give INVALID_PARAMS for every key."""
        return self._tensor_puts(list(keys), list(tensors_list), None, False, "batch_put_tensor")

    def batch_pub_tensor(self, keys: Sequence[str], tensors_list: Sequence[Any], config: Any = None) -> List[int]:
        return self._tensor_puts(list(keys), list(tensors_list), config, False, "batch_pub_tensor")

    def batch_upsert_tensor(self, keys: Sequence[str], tensors_list: Sequence[Any]) -> List[int]:
        return self._tensor_puts(list(keys), list(tensors_list), None, True, "batch_upsert_tensor")

    def batch_upsert_pub_tensor(self, keys: Sequence[str], tensors_list: Sequence[Any], config: Any = None) -> List[int]:
        return self._tensor_puts(list(keys), list(tensors_list), config, True, "batch_upsert_pub_tensor")

    # -- tensor parallel writes --

    def _tp_puts(self, keys: Sequence[str], tensors: Sequence[Any], config: Any, tp_size: int, split_dim: int, upsert: bool, what: str) -> List[int]:
        keys, tensors = list(keys), list(tensors)
        if tp_size <= 1:
            return self._tensor_puts(keys, tensors, config, upsert, what)
        torch = _torch()
        n = len(keys)
        if torch is None:
            _lib.set_error(_NO_TORCH)
            return [_NOT_SUPPORTED] * n
        if n != len(tensors) or n == 0:
            _lib.set_error(f"{what}: {n} keys and {len(tensors)} tensors")
            return [_INVALID] * n
        out = [0] * n
        flat_keys: List[str] = []
        flat: List[Any] = []
        owner: List[int] = []
        for i, (k, t) in enumerate(zip(keys, tensors)):
            parts = _chunks(torch, t, tp_size, split_dim)
            if parts is None:
                _lib.set_error(f"{what}: {k}: cannot split into {tp_size} chunks along dim {split_dim}")
                out[i] = _INVALID
                continue
            for r, p in enumerate(parts):
                flat_keys.append(tp_key(str(k), r))
                flat.append(p)
                owner.append(i)
        if flat:
            res = self._tensor_puts(flat_keys, flat, config, upsert, what)
            for i, rc in zip(owner, res):
                if rc != 0 and out[i] == 0:
                    out[i] = rc  # the first error of a tensor's shards wins, as in Mooncake
        return out

    def put_tensor_with_tp(self, key: str, tensor: Any, tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0) -> int:
        """Splits the tensor into tp_size chunks along split_dim (tensor.chunk) and stores
        chunk r under "<key>_tp_<r>" for every rank; tp_rank is accepted, as in Mooncake
        (all shards are written). tp_size <= 1 is put_tensor. 0 or the first error."""
        return self._tp_puts([key], [tensor], None, tp_size, split_dim, False, "put_tensor_with_tp")[0]

    def pub_tensor_with_tp(self, key: str, tensor: Any, config: Any = None, tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0) -> int:
        return self._tp_puts([key], [tensor], config, tp_size, split_dim, False, "pub_tensor_with_tp")[0]

    def batch_put_tensor_with_tp(self, base_keys: Sequence[str], tensors_list: Sequence[Any], tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0) -> List[int]:
        return self._tp_puts(base_keys, tensors_list, None, tp_size, split_dim, False, "batch_put_tensor_with_tp")

    def batch_pub_tensor_with_tp(self, base_keys: Sequence[str], tensors_list: Sequence[Any], config: Any = None, tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0) -> List[int]:
        return self._tp_puts(base_keys, tensors_list, config, tp_size, split_dim, False, "batch_pub_tensor_with_tp")

    # -- writes from a buffer already in the stored layout --

    def _from_buffers(self, keys: Sequence[str], ptrs: Sequence[int], sizes: Sequence[int], upsert: bool, what: str) -> List[int]:
        keys, ptrs, sizes = list(keys), list(ptrs), list(sizes)
        n = len(keys)
        if not (n == len(ptrs) == len(sizes)):
            _lib.set_error(f"{what}: {n} keys, {len(ptrs)} buffer_ptrs, {len(sizes)} sizes")
            return [_INVALID] * n
        out = [0] * n
        ok = []
        for i in range(n):
            if not isinstance(ptrs[i], int) or ptrs[i] <= 0 or not isinstance(sizes[i], int) or sizes[i] <= HEADER_SIZE:
                out[i] = _fail(f"{what}: {keys[i]}: a buffer must hold a {HEADER_SIZE}-byte tensor header and data")
                continue
            head = _peek(_torch(), ptrs[i], 8)
            if head is None:
                out[i] = _fail(f"{what}: {keys[i]}: {_lib.last_error()}")
                continue
            code, ndim = struct.unpack_from("<ii", head, 0)
            if not 0 <= ndim <= 4 or not any(d[0] == code for d in _DTYPES):
                out[i] = _fail(f"{what}: {keys[i]}: the buffer does not start with a tensor header")
                continue
            ok.append(i)
        if ok:
            fn = self.batch_upsert_from if upsert else self.batch_put_from  # type: ignore[attr-defined]
            res = fn([keys[i] for i in ok], [ptrs[i] for i in ok], [sizes[i] for i in ok])
            for i, rc in zip(ok, res):
                out[i] = rc
        return out

    def put_tensor_from(self, key: str, buffer_ptr: int, size: int) -> int:
        """Stores size bytes at buffer_ptr, which must already be in the stored layout
        ([header][data], what get_tensor_into leaves in its buffer)."""
        return self._from_buffers([key], [buffer_ptr], [size], False, "put_tensor_from")[0]

    def upsert_tensor_from(self, key: str, buffer_ptr: int, size: int) -> int:
        return self._from_buffers([key], [buffer_ptr], [size], True, "upsert_tensor_from")[0]

    def batch_put_tensor_from(self, keys: Sequence[str], buffer_ptrs: Sequence[int], sizes: Sequence[int]) -> List[int]:
        return self._from_buffers(keys, buffer_ptrs, sizes, False, "batch_put_tensor_from")

    def batch_upsert_tensor_from(self, keys: Sequence[str], buffer_ptrs: Sequence[int], sizes: Sequence[int]) -> List[int]:
        return self._from_buffers(keys, buffer_ptrs, sizes, True, "batch_upsert_tensor_from")

    def _tensors_in(self, ptrs: Sequence[int], sizes: Sequence[int]) -> List[Any]:
        torch = _torch()
        out = []
        for p, z in zip(ptrs, sizes):
            ok = torch is not None and isinstance(p, int) and p > 0 and isinstance(z, int) and z > HEADER_SIZE
            out.append(_decode_at(torch, p, z) if ok else None)
        return out

    def put_tensor_with_tp_from(self, key: str, buffer_ptr: int, size: int, tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0) -> int:
        """The full tensor in the buffer (stored layout) split as put_tensor_with_tp does."""
        return self.batch_put_tensor_with_tp_from([key], [buffer_ptr], [size], tp_rank, tp_size, split_dim)[0]

    def batch_put_tensor_with_tp_from(self, base_keys: Sequence[str], buffer_ptrs: Sequence[int], sizes: Sequence[int], tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0) -> List[int]:
        if tp_size <= 1:
            return self._from_buffers(base_keys, buffer_ptrs, sizes, False, "batch_put_tensor_with_tp_from")
        if _torch() is None:
            _lib.set_error(_NO_TORCH)
            return [_NOT_SUPPORTED] * len(base_keys)
        if not (len(base_keys) == len(buffer_ptrs) == len(sizes)):
            _lib.set_error("batch_put_tensor_with_tp_from: keys, buffer_ptrs and sizes differ in length")
            return [_INVALID] * len(base_keys)
        tensors = self._tensors_in(buffer_ptrs, sizes)
        return self._tp_puts(base_keys, tensors, None, tp_size, split_dim, False, "batch_put_tensor_with_tp_from")

    # -- reads --

    def get_tensor(self, key: str) -> Any:
        """The tensor stored under key (a CPU tensor owning its memory), or None on a miss,
        a value not in the tensor layout, or without torch."""
        return self.batch_get_tensor([key])[0]

    def batch_get_tensor(self, keys: Sequence[str]) -> List[Any]:
        """get_tensor for each key, fetched in one batch: a tensor or None per key."""
        keys = list(keys)
        torch = _torch()
        if torch is None:
            _lib.set_error(_NO_TORCH)
            return [None] * len(keys)
        if not self._h:  # type: ignore[attr-defined]
            self._not_set_up_code()
            return [None] * len(keys)
        if not keys:
            return []
        out = []
        for h in self.batch_get_buffer(keys):  # type: ignore[attr-defined]
            if h is None:
                out.append(None)
                continue
            buf = bytearray(memoryview(h))  # one copy, as Mooncake's; the tensor owns it
            out.append(_decode(torch, buf, len(buf)))
        return out

    def get_tensor_into(self, key: str, buffer_ptr: int, size: int) -> Any:
        """Reads the object into the buffer and returns a tensor over the buffer's memory
        (after the header, no copy: it is valid while the buffer is), or None."""
        torch = _torch()
        if torch is None:
            _lib.set_error(_NO_TORCH)
            return None
        n = self.get_into(key, buffer_ptr, size)  # type: ignore[attr-defined]
        if n < 0:
            return None
        return _decode_at(torch, buffer_ptr, n)

    def batch_get_tensor_into(self, keys: Sequence[str], buffer_ptrs: Sequence[int], sizes: Sequence[int]) -> List[Any]:
        """get_tensor_into for each key, in one batch: a tensor or None per key. Mismatched
        lengths, or a store not set up, give INVALID_PARAMS for every key (ints, as
        Mooncake's)."""
        keys, buffer_ptrs, sizes = list(keys), list(buffer_ptrs), list(sizes)
        torch = _torch()
        if torch is None:
            _lib.set_error(_NO_TORCH)
            return [None] * len(keys)
        if not self._h or not (len(keys) == len(buffer_ptrs) == len(sizes)):  # type: ignore[attr-defined]
            if not self._h:  # type: ignore[attr-defined]
                self._not_set_up_code()
            else:
                _lib.set_error("batch_get_tensor_into: keys, buffer_ptrs and sizes differ in length")
            return [_INVALID] * len(keys)
        res = self.batch_get_into(keys, buffer_ptrs, sizes)  # type: ignore[attr-defined]
        return [_decode_at(torch, p, n) if n > 0 else None for p, n in zip(buffer_ptrs, res)]

    def get_tensor_into_cuda(self, key: str, destination: Any) -> int:
        """Reads the data of the tensor under key (without its header) straight into
        destination, a contiguous tensor on a CUDA device or the CPU, in one read of one
        version of the object. The number of data bytes read, or a negative code
        (OBJECT_NOT_FOUND; INVALID_PARAMS: not a contiguous tensor, a destination smaller than
        the data, a value not in the tensor layout)."""
        return self.batch_get_tensor_into_cuda([key], [destination])[0]

    def batch_get_tensor_into_cuda(self, keys: Sequence[str], destinations: Sequence[Any]) -> List[int]:
        """get_tensor_into_cuda for each key, in one batch: data bytes or a code per key."""
        keys, dests = list(keys), list(destinations)
        if len(keys) != len(dests):
            _lib.set_error(f"batch_get_tensor_into_cuda: {len(keys)} keys and {len(dests)} destinations")
            return [_INVALID] * len(keys)
        if _torch() is None:
            _lib.set_error(_NO_TORCH)
            return [_NOT_SUPPORTED] * len(keys)
        if not self._h:  # type: ignore[attr-defined]
            return [self._not_set_up_code()] * len(keys)
        out = [0] * len(keys)
        hdrs = ctypes.create_string_buffer(HEADER_SIZE * max(len(keys), 1))
        ok, ptrs, sizes = [], [], []
        for i, d in enumerate(dests):
            try:
                room = d.numel() * d.element_size()
                good = d.is_contiguous() and room > 0 and d.device.type in ("cpu", "cuda")
            except AttributeError:
                good = False
            if not good:
                out[i] = _fail(f"batch_get_tensor_into_cuda: {keys[i]}: the destination must be a contiguous, non-empty CPU or CUDA tensor")
                continue
            ok.append(i)
            ptrs.append([ctypes.addressof(hdrs) + i * HEADER_SIZE, d.data_ptr()])
            sizes.append([HEADER_SIZE, room])
        if not ok:
            return out
        res = self.batch_get_into_multi_buffers([keys[i] for i in ok], ptrs, sizes)  # type: ignore[attr-defined]
        torch = _torch()
        for j, i in enumerate(ok):
            n = res[j]
            if n >= 0 and _meta(torch, _view(ctypes.addressof(hdrs) + i * HEADER_SIZE, HEADER_SIZE), n) is None:
                n = _INVALID  # the bytes were not a tensor (last_error says why)
            out[i] = n - HEADER_SIZE if n >= 0 else n
        return out

    def get_tensor_with_tp(self, key: str, tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0) -> Any:
        """Shard tp_rank of a tensor put with put_tensor_with_tp ("<key>_tp_<rank>");
        tp_size <= 1 is get_tensor(key)."""
        return self.get_tensor(key if tp_size <= 1 else tp_key(key, tp_rank))

    def batch_get_tensor_with_tp(self, base_keys: Sequence[str], tp_rank: int = 0, tp_size: int = 1) -> List[Any]:
        return self.batch_get_tensor([k if tp_size <= 1 else tp_key(k, tp_rank) for k in base_keys])

    def get_tensor_with_tp_into(self, key: str, buffer_ptr: int, size: int, tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0) -> Any:
        return self.get_tensor_into(key if tp_size <= 1 else tp_key(key, tp_rank), buffer_ptr, size)

    def batch_get_tensor_with_tp_into(self, base_keys: Sequence[str], buffer_ptrs: Sequence[int], sizes: Sequence[int], tp_rank: int = 0, tp_size: int = 1, split_dim: int = 0) -> List[Any]:
        ks = [k if tp_size <= 1 else tp_key(k, tp_rank) for k in base_keys]
        return self.batch_get_tensor_into(ks, buffer_ptrs, sizes)

    # -- the *_with_parallelism family --

    def _par_put(self, key: str, tensor: Any, parallelism: Any, config: Any, writer_partition: Any, upsert: bool, what: str) -> int:
        if writer_partition is not None:
            w = _writer(writer_partition)
            if w is None:
                return _fail(f"{what}: writer_partition needs rank in [0, size), size >= 1 and split_dim")
            # This writer holds shard w[0] of w[1]: it is stored where a TP put puts it.
            return self._tensor_puts([tp_key(key, w[0])], [tensor], config, upsert, what)[0]
        rc, axis = _split_axis(parallelism)
        if rc:
            return rc
        if axis is None:  # no axis splits the tensor: stored whole
            return self._tensor_puts([key], [tensor], config, upsert, what)[0]
        return self._tp_puts([key], [tensor], config, axis.size, axis.split_dim, upsert, what)[0]

    def put_tensor_with_parallelism(self, key: str, tensor: Any, parallelism: Any = None, config: Any = None, writer_partition: Any = None) -> int:
        """Stores the full tensor under the layout parallelism names: with one axis that has
        a split_dim, split into that axis' size shards as put_tensor_with_tp does; with no
        splitting axis (replicated dp, say), whole under key. writer_partition (a dict or
        object with rank, size, split_dim) says this tensor is the writer's own shard. See
        docs/python.md for how this differs from Mooncake's newer shard header."""
        return self._par_put(key, tensor, parallelism, config, writer_partition, False, "put_tensor_with_parallelism")

    def upsert_tensor_with_parallelism(self, key: str, tensor: Any, parallelism: Any = None, config: Any = None, writer_partition: Any = None) -> int:
        return self._par_put(key, tensor, parallelism, config, writer_partition, True, "upsert_tensor_with_parallelism")

    def _par_batch(self, keys, tensors, parallelisms, config, writer_partitions, upsert: bool, what: str) -> List[int]:
        keys, tensors = list(keys), list(tensors)
        n = len(keys)
        ps = [None] * n if parallelisms is None else list(parallelisms)
        ws = [None] * n if writer_partitions is None else list(writer_partitions)
        if not (n == len(tensors) == len(ps) == len(ws)):
            _lib.set_error(f"{what}: keys, tensors, parallelisms and writer_partitions differ in length")
            return [_INVALID] * n
        return [self._par_put(keys[i], tensors[i], ps[i], config, ws[i], upsert, what) for i in range(n)]

    def batch_put_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None, config=None, writer_partitions=None) -> List[int]:
        return self._par_batch(keys, tensors_list, parallelisms, config, writer_partitions, False, "batch_put_tensor_with_parallelism")

    def batch_upsert_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None, config=None, writer_partitions=None) -> List[int]:
        return self._par_batch(keys, tensors_list, parallelisms, config, writer_partitions, True, "batch_upsert_tensor_with_parallelism")

    def _par_from(self, keys, ptrs, sizes, parallelisms, config, writer_partitions, upsert: bool, what: str) -> List[int]:
        keys, ptrs, sizes = list(keys), list(ptrs), list(sizes)
        if not (len(keys) == len(ptrs) == len(sizes)):
            _lib.set_error(f"{what}: keys, buffer_ptrs and sizes differ in length")
            return [_INVALID] * len(keys)
        if _torch() is None:
            _lib.set_error(_NO_TORCH)
            return [_NOT_SUPPORTED] * len(keys)
        tensors = self._tensors_in(ptrs, sizes)
        return self._par_batch(keys, tensors, parallelisms, config, writer_partitions, upsert, what)

    def put_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None, config=None, writer_partition=None) -> int:
        return self._par_from([key], [buffer_ptr], [size], [parallelism], config, [writer_partition], False, "put_tensor_with_parallelism_from")[0]

    def upsert_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None, config=None, writer_partition=None) -> int:
        return self._par_from([key], [buffer_ptr], [size], [parallelism], config, [writer_partition], True, "upsert_tensor_with_parallelism_from")[0]

    def batch_put_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes, parallelisms=None, config=None, writer_partitions=None) -> List[int]:
        return self._par_from(keys, buffer_ptrs, sizes, parallelisms, config, writer_partitions, False, "batch_put_tensor_with_parallelism_from")

    def batch_upsert_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes, parallelisms=None, config=None, writer_partitions=None) -> List[int]:
        return self._par_from(keys, buffer_ptrs, sizes, parallelisms, config, writer_partitions, True, "batch_upsert_tensor_with_parallelism_from")

    def _par_get(self, key: str, target: Any) -> Any:
        """The tensor a ReadTarget names (see put_tensor_with_parallelism), or None."""
        if target is not None and not isinstance(target, ReadTarget):
            _lib.set_error("target must be a ReadTarget or None")
            return None
        mode = "as_stored" if target is None else target.mode
        if mode == "as_stored":
            return self.get_tensor(key)
        rc, axis = _split_axis(target.parallelism)
        if rc:
            return None
        if mode == "shard":
            return self.get_tensor(key) if axis is None else self.get_tensor(tp_key(key, axis.rank))
        whole = self.get_tensor(key)  # "full": stored whole, or merged from its shards
        if whole is not None or axis is None:
            return whole
        parts = self.batch_get_tensor([tp_key(key, r) for r in range(axis.size)])
        if any(p is None for p in parts):
            _lib.set_error(f"{key}: {sum(p is None for p in parts)} of {axis.size} shards missing")
            return None
        return _torch().cat(parts, dim=axis.split_dim)

    def get_tensor_with_parallelism(self, key: str, target: Any = None) -> Any:
        """target None or mode "as_stored": the object under key; "shard": the shard of the
        splitting axis' rank; "full": the whole tensor, merged (torch.cat along split_dim)
        from its shards when it was stored split."""
        return self._par_get(key, target)

    def batch_get_tensor_with_parallelism(self, keys: Sequence[str], targets: Any = None) -> List[Any]:
        keys = list(keys)
        ts = [None] * len(keys) if targets is None else list(targets)
        if len(ts) != len(keys):
            _lib.set_error("batch_get_tensor_with_parallelism: keys and targets differ in length")
            return [None] * len(keys)
        return [self._par_get(k, t) for k, t in zip(keys, ts)]

    def _par_into(self, key: str, ptr: int, size: int, target: Any) -> Any:
        t = self._par_get(key, target)
        if t is None:
            return None
        torch = _torch()
        rc, hdr, t = _encode(torch, key, t)
        n = HEADER_SIZE + t.numel() * t.element_size()
        if rc or not isinstance(ptr, int) or ptr <= 0 or not isinstance(size, int) or size < n:
            _lib.set_error(f"{key}: the buffer holds {size} bytes, the tensor needs {n}")
            return None
        sp = _span(torch, ptr, n)
        if sp is None:
            return None
        if sp.is_cuda:
            sp[:HEADER_SIZE].copy_(torch.frombuffer(bytearray(hdr), dtype=torch.uint8))
            sp[HEADER_SIZE:n].copy_(t.reshape(-1).view(torch.uint8))
        else:
            ctypes.memmove(ptr, hdr, HEADER_SIZE)
            ctypes.memmove(ptr + HEADER_SIZE, t.data_ptr(), n - HEADER_SIZE)
        return _decode_at(torch, ptr, n)

    def get_tensor_with_parallelism_into(self, key: str, buffer_ptr: int, size: int, target: Any = None) -> Any:
        """get_tensor_with_parallelism, left in the buffer in the stored layout; the tensor
        returned shares the buffer's memory."""
        return self._par_into(key, buffer_ptr, size, target)

    def batch_get_tensor_with_parallelism_into(self, keys, buffer_ptrs, sizes, targets=None) -> List[Any]:
        keys, buffer_ptrs, sizes = list(keys), list(buffer_ptrs), list(sizes)
        ts = [None] * len(keys) if targets is None else list(targets)
        if not (len(keys) == len(buffer_ptrs) == len(sizes) == len(ts)):
            _lib.set_error("batch_get_tensor_with_parallelism_into: keys, buffer_ptrs, sizes and targets differ in length")
            return [None] * len(keys)
        return [self._par_into(k, p, z, t) for k, p, z, t in zip(keys, buffer_ptrs, sizes, ts)]

    # -- safetensors --

    def save_tensor_to_safetensor(self, key: str, file_name: Optional[str] = None) -> int:
        """Writes the tensor under key to a safetensors file (file_name, else the key) with
        the entry name key. 0; FILE_NOT_FOUND (-1100) when there is no tensor under key;
        INVALID_PARAMS when the file cannot be written. Written with the standard library (the
        format is a JSON header and raw bytes), so the safetensors package is not needed."""
        if not self._h:  # type: ignore[attr-defined]
            return self._not_set_up_code()
        t = self.get_tensor(key)
        if t is None:
            return _fail(f"save_tensor_to_safetensor: no tensor under {key!r}", _FILE_NOT_FOUND)
        name = next(d[3] for d in _DTYPES if getattr(_torch(), d[1], None) == t.dtype)
        nbytes = t.numel() * t.element_size()
        head = json.dumps({key: {"dtype": name, "shape": list(t.shape), "data_offsets": [0, nbytes]}}).encode()
        head += b" " * (-len(head) % 8)  # the format pads the header to 8 bytes
        try:
            with open(key if file_name is None else file_name, "wb") as f:
                f.write(struct.pack("<Q", len(head)) + head)
                f.write(bytes(_view(t.data_ptr(), nbytes)))
        except (OSError, TypeError) as e:
            return _fail(f"save_tensor_to_safetensor: {e}")
        return 0

    def load_tensor_from_safetensor(self, key: Optional[str] = None, file_name: str = "") -> Any:
        """Reads a tensor from a safetensors file and stores it with put_tensor under key
        (else file_name): the entry named key, else the file's first. Returns the tensor, or
        None (no file, no tensors, an unsupported dtype, the put failed)."""
        torch = _torch()
        if torch is None:
            _lib.set_error(_NO_TORCH)
            return None
        if not self._h:  # type: ignore[attr-defined]
            self._not_set_up_code()
            return None
        try:
            with open(file_name, "rb") as f:
                (hl,) = struct.unpack("<Q", f.read(8))
                head = json.loads(f.read(hl))
                body = bytearray(f.read())
        except (OSError, ValueError, struct.error) as e:
            _lib.set_error(f"load_tensor_from_safetensor: {file_name}: {e}")
            return None
        entries = [k for k in head if k != "__metadata__"]
        if not entries:
            _lib.set_error(f"load_tensor_from_safetensor: no tensors in {file_name}")
            return None
        target = file_name if key is None else key
        e = head[target] if target in head and target != "__metadata__" else head[entries[0]]
        ent = next((d for d in _DTYPES if d[3] == e.get("dtype")), None)
        dt = getattr(torch, ent[1], None) if ent else None
        lo, hi = e.get("data_offsets", [0, 0])
        if dt is None or hi > len(body) or lo > hi:
            _lib.set_error(f"load_tensor_from_safetensor: unsupported entry {e}")
            return None
        t = torch.frombuffer(body, dtype=torch.uint8, count=hi - lo, offset=lo).view(dt).reshape(e.get("shape", []))
        if self.put_tensor(target, t) != 0:
            return None
        return t
