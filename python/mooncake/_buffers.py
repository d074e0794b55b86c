"""Raw addresses of Python buffers without copying, and library-owned buffers as Python objects.

Standard library only. Two directions:

- borrow(obj) gives the address and length of any C-contiguous buffer (bytes, bytearray,
  memoryview, array.array, numpy arrays...), read-only ones included, through the C-level
  buffer protocol, so put() and put_parts() hand the caller's bytes to the library without a
  copy. The buffer stays pinned until the Borrowed object is released.
- BufferHandle wraps memory the library allocated (get_buffer): a ctypes array over that
  memory, so memoryview(), numpy.frombuffer() and bytes() read it in place; the library's free
  function runs when the handle is garbage-collected.
"""

import ctypes
from typing import Callable, Dict, List, Optional

# Py_buffer as declared in CPython's Include/pybuffer.h (stable since Python 3.3).
class _PyBuffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.py_object),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
        ("strides", ctypes.POINTER(ctypes.c_ssize_t)),
        ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)),
        ("internal", ctypes.c_void_p),
    ]


_PyBUF_SIMPLE = 0  # contiguous bytes, read-only accepted
_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None


class Borrowed:
    """Addresses and lengths of several Python buffers, pinned until release() (or `with`)."""

    __slots__ = ("_views", "addrs", "lens")

    def __init__(self, objs: List[object]):
        self._views: List[_PyBuffer] = []
        self.addrs: List[int] = []
        self.lens: List[int] = []
        try:
            for obj in objs:
                if isinstance(obj, str):
                    raise TypeError("value must be bytes-like (bytes, bytearray, memoryview, ...), not str")
                view = _PyBuffer()
                try:
                    _get_buffer(obj, ctypes.byref(view), _PyBUF_SIMPLE)
                except BufferError as e:
                    raise TypeError(f"value must be a contiguous bytes-like object: {e}") from None
                except TypeError:
                    raise TypeError(
                        f"value must be bytes-like (bytes, bytearray, memoryview, ...), not {type(obj).__name__}"
                    ) from None
                self._views.append(view)
                self.addrs.append(view.buf or 0)
                self.lens.append(view.len)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        for view in self._views:
            _release_buffer(ctypes.byref(view))
        self._views = []

    def __enter__(self) -> "Borrowed":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class BufferHandle:
    """Bytes of one object in memory the library owns (what get_buffer returns).

    Implements the buffer protocol (memoryview(h), numpy.frombuffer(h), bytes(h) read the
    bytes in place), plus Mooncake's h.ptr(), h.size() and len(h). The memory is released
    with the library's free function when the handle is garbage-collected; a memoryview taken
    from the handle keeps it alive. As in Mooncake, the bytes may be written through the
    buffer (they are this process's private copy).
    """

    __slots__ = ()

    def ptr(self) -> int:
        """The address of the first byte (an int, like Mooncake's)."""
        return ctypes.addressof(self)  # type: ignore[arg-type]

    def size(self) -> int:
        """The object's size in bytes."""
        return len(self)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"<mooncake BufferHandle ptr=0x{self.ptr():x} size={self.size()}>"


# The library's free function (set once by the loader, see _lib.load). Every handle is freed
# with it; handles made before it is set are never created (get_buffer needs the library).
_free: Optional[Callable[[int], None]] = None


def set_free(free: Callable[[int], None]) -> None:
    global _free
    _free = free


def _release(self) -> None:
    addr = ctypes.addressof(self)
    free = _free
    # At interpreter exit module globals may already be gone: the process is ending anyway.
    if free is not None and addr and addr != _EMPTY_ADDR:
        free(addr)


# One ctypes array class per size seen (creating a class costs tens of microseconds; KVCache
# blocks come in a few sizes). Bounded: a program with many sizes clears and refills it.
_handle_types: Dict[int, type] = {}
_MAX_HANDLE_TYPES = 512


def _handle_type(size: int) -> type:
    t = _handle_types.get(size)
    if t is None:
        if len(_handle_types) >= _MAX_HANDLE_TYPES:
            _handle_types.clear()
        # The ctypes array base gives the buffer protocol over foreign memory; the mixin gives
        # Mooncake's methods; __del__ hands the memory back to the library.
        t = type("BufferHandle", (BufferHandle, ctypes.c_ubyte * size), {"__slots__": (), "__del__": _release})
        _handle_types[size] = t
    return t


_empty = (ctypes.c_ubyte * 1)()
_EMPTY_ADDR = ctypes.addressof(_empty)


def make_handle(addr: int, size: int) -> BufferHandle:
    """Wraps size bytes at addr (allocated by the library) in a BufferHandle that frees addr
    when it dies. An empty object (size 0, addr possibly 0) gets a handle over a static byte
    and a non-null addr is freed at once."""
    if size == 0:
        if addr and _free is not None:
            _free(addr)
        return _handle_type(0).from_address(_EMPTY_ADDR)
    return _handle_type(size).from_address(addr)
