package testutil

import (
	"os"
	"sync"
	"testing"
)

// Shared is what several tests of one package build once per test binary (the mooncake
// binary, the C library, an installed package): the first test that asks builds it into a
// directory of its own, the others reuse it, and TestMain removes the directory:
//
//	var built testutil.Shared[paths]
//
//	func TestMain(m *testing.M) {
//		testutil.VerifyNoLeaks(m, goleak.Cleanup(func(code int) { built.Remove(); os.Exit(code) }))
//	}
type Shared[T any] struct {
	once sync.Once
	dir  string
	v    T
	ok   bool // the build finished without failing its test
}

// Get returns the built value, calling build(t, dir) the first time. A build that failed
// fails every later caller too.
func (s *Shared[T]) Get(t testing.TB, build func(t testing.TB, dir string) T) T {
	t.Helper()
	s.once.Do(func() {
		dir, err := os.MkdirTemp("", "mooncake-test-")
		if err != nil {
			t.Fatal(err)
		}
		s.dir = dir
		s.v = build(t, dir)
		s.ok = !t.Failed()
	})
	if !s.ok {
		t.Fatal("the shared build failed (in this or an earlier test)")
	}
	return s.v
}

// Remove deletes the build directory, if any.
func (s *Shared[T]) Remove() {
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
