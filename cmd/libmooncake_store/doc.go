// Command libmooncake_store is the C library libmooncake_store.so: Mooncake's C API
// (store_c.h names and return conventions, plus the calls Mooncake's Python API needs) over
// package client and, when setup is given a global_segment_size, a worker embedded in the
// calling process (package server). Build it with
//
//	go build -buildmode=c-shared -o DIR/libmooncake_store.so ./cmd/libmooncake_store
//
// The contract is mooncake_store.h in this directory: ownership, thread safety and return
// codes of every function. It is the repository's only cgo (the mooncake binary stays
// static and cgo-free); built without cgo the package is an empty stub.
//
// # Rules of the skin
//
//  1. Every export converts its C arguments, calls Go, and maps the error to Mooncake's code
//     (errorCode in store.go); the text goes to a thread-local last error.
//  2. C never holds a Go pointer: stores are named by integer handles (a table, not
//     cgo.Handle, so a bad handle is an error code, not a panic); memory handed to C is
//     C.malloc'd and freed with mooncake_store_free_buffer.
//  3. Caller memory is used in place (unsafe.Slice over the C pointer): gets land in the
//     caller's buffer with no copy. Before the client touches caller memory from other
//     goroutines, the export probes one byte per page in its own goroutine with
//     debug.SetPanicOnFault, so an unmapped pointer is MOONCAKE_ERR_INVALID_PARAMS, not a
//     crash. Pointers cross as uintptr_t (a small bogus "pointer" in a Go pointer slot
//     would crash the runtime's stack scan). CUDA device memory is the exception: memory.go
//     classifies each caller range through the driver loaded at run time (cuda.c, only where
//     the process already loaded it) and stages device ranges through host memory (a put
//     copies them out first, a get copies them in after); see docs/clib.md "GPU memory".
//  4. A panic inside an export is recovered into MOONCAKE_ERR_INTERNAL.
//  5. The batch calls that move data run off the calling thread (offthread.go): their public
//     function is C, which starts the Go half on a goroutine and waits on a futex, so the C
//     thread is woken once per call rather than once per network wait. The goroutine hands
//     the code and last-error text back; the C side records the text on the caller's thread.
//
// It must not be imported: it is a package main.
package main
