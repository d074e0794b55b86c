package tiertest

import (
	"errors"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }

// TestMemLower checks the tier.Lower semantics the engine's tests rely on.
func TestMemLower(t *testing.T) {
	l := NewMemLower()
	data := []byte("hello")
	if err := l.Put("k", 2, data, true); err != nil {
		t.Fatal(err)
	}
	data[0] = 'X' // the store keeps its own copy
	dst := make([]byte, 5)
	if err := l.ReadInto("k", 0, dst); err != nil || string(dst) != "hello" {
		t.Fatalf("read %q %v", dst, err)
	}
	if err := l.ReadInto("k", 1, dst); !errors.Is(err, base.ErrInvalidVersion) {
		t.Fatal(err)
	}
	if err := l.ReadInto("k", 2, make([]byte, 4)); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatal(err)
	}
	if m, err := l.Stat("k"); err != nil || m.Size != 5 || m.Version != 2 || m.Checksum != base.Checksum([]byte("hello")) {
		t.Fatalf("stat %+v %v", m, err)
	}
	l.Corrupt("k")
	if err := l.ReadInto("k", 2, dst); !errors.Is(err, base.ErrCorruption) {
		t.Fatal(err)
	}
	if err := l.Delete("k", 1); !errors.Is(err, base.ErrInvalidVersion) {
		t.Fatal(err)
	}
	if err := l.Delete("k", 2); err != nil || l.Has("k", 0) {
		t.Fatal(err)
	}
	if _, err := l.Stat("k"); !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	l.Fail(OpPut, func(string) error { return boom })
	if err := l.Put("k", 1, data, false); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	l.Fail(OpPut, nil)
	open := l.Gate()
	done := make(chan error)
	go func() { done <- l.Put("g", 1, data, false) }()
	open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := l.Scan(func(m base.ObjectMeta) error { keys = append(keys, m.Key); return nil }); err != nil || len(keys) != 1 || keys[0] != "g" {
		t.Fatalf("scan %v %v", keys, err)
	}
	if l.Puts != 2 || l.Syncs != 1 || l.Len() != 1 {
		t.Fatalf("counts %d %d %d", l.Puts, l.Syncs, l.Len())
	}
}
