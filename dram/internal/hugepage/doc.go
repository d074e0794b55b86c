// Package hugepage maps and unmaps the memory regions behind dram arenas: with MAP_HUGETLB
// (2 MiB pages from the reserved pool), with madvise(MADV_HUGEPAGE) (transparent huge pages),
// or with plain pages; anonymous (MapHugeTLB, MapAnon) or backed by a sealed memfd that
// another process on the host may map (MapShared: MFD_HUGETLB, shmem THP or plain shmem).
// It is the single owner of these syscalls; dram decides which kind to ask for and reports
// what it got.
//
// On Linux it uses golang.org/x/sys/unix (no cgo). On other systems MapAnon returns memory
// from the Go heap (KindPlain): correct, but neither off-heap nor huge-page backed; it exists
// so the module builds and its tests run anywhere. MapShared is unavailable there.
//
// Its non-test code must never import another mooncake-go package.
package hugepage
