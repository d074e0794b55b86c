// Package python holds the Python package `mooncake` (Mooncake's Python API,
// mooncake.store.MooncakeDistributedStore, over libmooncake_store.so with ctypes) and the Go
// test that runs its unittest suite, so `go test ./python/` is the one command that checks it.
//
// The Go side is tests only: python_test.go builds the `mooncake` binary and
// libmooncake_store.so, starts a standalone and a cluster of three masters and two workers as
// separate processes on 127.0.0.1, installs the package with pip into a scratch directory and
// runs `python3 -m unittest` against them. The Python sources are under mooncake/, the tests
// under tests/, the build backend under buildtools/ (docs/python.md).
//
// This package must never import another mooncake-go package outside its tests: Python
// reaches the store only through the C library.
package python
