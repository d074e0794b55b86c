"""The smaller methods of Mooncake's binding that sit on the byte-level calls
(put_from_with_metadata, batch_replica_clear, alloc_from_mem_pool, ...), mixed into
MooncakeDistributedStore. Each docstring says where mooncake-go's answer differs and why."""

from typing import Any, List, Sequence

from . import _lib
from ._hostmem import MooncakeHostMemAllocator
from ._types import ErrorCode

_INVALID = int(ErrorCode.INVALID_PARAMS)


class MoreMethods:
    def put_from_with_metadata(
        self, key: Any, buffer_ptr: int, metadata_buffer_ptr: int, size: int, metadata_size: int, config: Any = None
    ) -> int:
        """Stores metadata_size bytes at metadata_buffer_ptr followed by size bytes at
        buffer_ptr as one object (Mooncake's order), read in place. As in Mooncake, size 0
        stores nothing and returns 0, and prefer_alloc_in_same_node returns -1."""
        for what, v in (("buffer_ptr", buffer_ptr), ("metadata_buffer_ptr", metadata_buffer_ptr), ("size", size), ("metadata_size", metadata_size)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"put_from_with_metadata: {what} must be an int, not {type(v).__name__}")
            if v < 0:
                _lib.set_error(f"put_from_with_metadata: {what} must not be negative")
                return _INVALID
        if config is not None and getattr(config, "prefer_alloc_in_same_node", False):
            _lib.set_error("put_from_with_metadata: prefer_alloc_in_same_node is not supported (as in Mooncake)")
            return -1
        if not self._h:  # type: ignore[attr-defined]
            return self._not_set_up_code()  # type: ignore[attr-defined]
        if size == 0:
            return 0
        if (metadata_size and not metadata_buffer_ptr) or not buffer_ptr:
            _lib.set_error("put_from_with_metadata: a NULL pointer with a size")
            return _INVALID
        ptrs = ([metadata_buffer_ptr] if metadata_size else []) + [buffer_ptr]
        sizes = ([metadata_size] if metadata_size else []) + [size]
        return self.batch_put_from_multi_buffers([key], [ptrs], [sizes], config)[0]  # type: ignore[attr-defined]

    def batch_replica_clear(self, keys: Sequence[Any], segment_name: str = "") -> List[Any]:
        """Clears the objects' replicas and returns the keys cleared ([] when the store is
        not set up, as Mooncake). segment_name "" clears every replica (the object goes);
        a segment name (a worker id or address, as get_replica_desc reports) clears the
        objects whose every replica is on that worker. Dropping one replica of several is
        not possible here (the masters keep replica_num copies and would repair it): such
        keys are left and not listed, with last_error() saying so. Mooncake requires each
        object's lease to have expired; objects here have no leases."""
        if not isinstance(segment_name, str):
            raise TypeError("segment_name must be a string")
        keys = list(keys)
        if not self._h:  # type: ignore[attr-defined]
            self._not_set_up_code()  # type: ignore[attr-defined]
            return []
        if segment_name:
            chosen, skipped = [], 0
            for k in keys:
                ds = self.get_replica_desc(k)  # type: ignore[attr-defined]
                if ds and all(segment_name in (d.segment_name, d.address) for d in ds):
                    chosen.append(k)
                elif any(segment_name in (d.segment_name, d.address) for d in ds):
                    skipped += 1
            if skipped:
                _lib.set_error(f"batch_replica_clear: {skipped} objects also have replicas elsewhere; one replica of several cannot be dropped here")
            keys = chosen
        if not keys:
            return []
        rcs = self.batch_remove(keys, True)  # type: ignore[attr-defined]
        return [k for k, rc in zip(keys, rcs) if rc == 0]

    def get_offload_rpc_read_count(self) -> int:
        """How many reads Mooncake served from a peer client's SSD offload through its
        offload RPC. mooncake-go has no such path (a worker serves its NVMe tier itself),
        so this is always 0."""
        return 0

    def unmount_local_disk_segment(self) -> int:
        """Mooncake unmounts the client's SSD offload segment. There is none here (the NVMe
        tier belongs to workers), so there is nothing to unmount: 0 when set up, else
        UNAVAILABLE_IN_CURRENT_STATUS."""
        if not self._h:  # type: ignore[attr-defined]
            return self._not_set_up_code()  # type: ignore[attr-defined]
        return 0

    def alloc_from_mem_pool(self, size: int) -> int:
        """The address of size bytes for zero-copy calls (Mooncake carves them from its
        client's registered buffer pool), or 0 when none can be had or the store is not set
        up. Here it is host memory from MooncakeHostMemAllocator, registered with this store;
        it lives until the process exits (or MooncakeHostMemAllocator().free(addr))."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise TypeError("alloc_from_mem_pool: size must be a non-negative int")
        if not self._h or size == 0:  # type: ignore[attr-defined]
            if not self._h:  # type: ignore[attr-defined]
                self._not_set_up_code()  # type: ignore[attr-defined]
            return 0
        a = MooncakeHostMemAllocator()
        p = a.alloc(size)
        if not p:
            _lib.set_error(f"alloc_from_mem_pool: no memory for {size} bytes")
            return 0
        if self.register_buffer(p, size) != 0:  # type: ignore[attr-defined]
            a.free(p)
            return 0
        return p
