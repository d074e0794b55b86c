// Package dram is the worker's DRAM arena: one region per worker mapped outside the Go heap with
// mmap (MAP_HUGETLB 2 MiB pages when huge pages are reserved, else madvise(MADV_HUGEPAGE), else
// plain pages), an offset allocator over it, and refcounted handles to the ranges it hands out.
//
// It owns the mapping and every byte in it. No object byte ever lives on the Go heap (except
// on non-Linux systems, where the arena is a plain Go slice so that the module builds and its
// tests run; see internal/hugepage).
//
// # Pieces
//
//   - Arena (arena.go): the mapping, its Mode, a mutex around the allocator, Stats. With
//     Options.Shared the mapping is a sealed memfd that a process on the same host can map
//     read-only (Arena.Share says how): the same-host path of transfer/.
//   - allocator (allocator.go): a two-level segregated fit offset allocator with O(1) alloc
//     and free, immediate coalescing, a bounded good-fit search in the request's own bin and
//     a size quantum for near-equal sizes. It knows nothing about memory and is tested alone.
//   - Handle (handle.go): one allocated range with an atomic refcount.
//   - populator (populate.go): with Options.Populate, a goroutine (at most half a core) that faults
//     the arena's pages in after start, ahead of the allocator, so puts take no page faults.
//   - internal/hugepage: the mmap/madvise/munmap syscalls, Linux-only, with a fallback file.
//
// # Ownership
//
//  1. Alloc returns a Handle holding one reference, owned by the caller.
//  2. Retain adds a reference owned by whoever the caller gives it to.
//  3. Every reference is Released exactly once; the last Release returns the range to the
//     allocator. Until then the bytes are never handed to anyone else.
//  4. Misuse (double release, retain after free, a forged handle, Close with live handles)
//     returns a typed error, and panics in builds with the invariants tag.
//
// docs/memory.md explains the choices (off-heap, huge pages, the allocator) with measurements.
//
// It must never import tier, nvme, raftmeta, transfer, server, client or cmd; only internal/.
package dram
