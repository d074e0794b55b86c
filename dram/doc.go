// Package dram is the worker's DRAM arena: one region per worker mapped outside the Go heap with
// mmap (MAP_HUGETLB 2 MiB pages when huge pages are reserved, else madvise(MADV_HUGEPAGE), else
// plain pages), an offset allocator over it, and refcounted handles to the ranges it hands out.
//
// It owns the mapping and every byte in it. No object byte ever lives on the Go heap.
//
// It must never import tier, nvme, raftmeta, transfer, server, client or cmd; only internal/.
package dram
