//go:build !cgo

package main

// Without cgo there is no C library to build: this stub keeps `CGO_ENABLED=0 go build ./...`
// working. The library is built with `make libmooncake_store` (needs cgo and gcc).
func main() {}
