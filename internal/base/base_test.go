package base

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestParseBytes(t *testing.T) {
	f := func(s string, want Bytes) {
		t.Helper()
		got, err := ParseBytes(s)
		if err != nil {
			t.Fatalf("ParseBytes(%q): %v", s, err)
		}
		if got != want {
			t.Fatalf("ParseBytes(%q) = %d, want %d", s, got, want)
		}
	}
	f("0", 0)
	f("1024", 1024)
	f("4GiB", 4<<30)
	f("4gib", 4<<30)
	// Every unit is binary, as Mooncake parses sizes: GB = GiB = 2^30.
	f("512MB", 512<<20)
	f("80GB", 80<<30)
	f("80gb", 80<<30)
	f("2TB", 2<<40)
	f("16KB", 16<<10)
	f("1.5GB", 3<<29)
	f("256MiB", 256<<20)
	f("1.5GiB", 3<<29)
	f("4G", 4<<30)
	f(" 64 KiB ", 64<<10)
	f("10B", 10)

	bad := func(s string) {
		t.Helper()
		if _, err := ParseBytes(s); !errors.Is(err, ErrInvalidParams) {
			t.Fatalf("ParseBytes(%q) err = %v, want ErrInvalidParams", s, err)
		}
	}
	bad("")
	bad("12XB")
	bad("-1")
	bad("GiB")
	bad("1.2.3GiB")
	bad("99999999999TiB")
	bad("9223372036854775808")
}

func TestBytesString(t *testing.T) {
	f := func(b Bytes, want string) {
		t.Helper()
		if got := b.String(); got != want {
			t.Fatalf("Bytes(%d).String() = %q, want %q", int64(b), got, want)
		}
	}
	f(0, "0 B")
	f(512, "512 B")
	f(1<<30, "1.0 GiB")
	f(4<<30+200<<20, "4.2 GiB")
}

func TestBytesJSON(t *testing.T) {
	var b Bytes
	if err := b.UnmarshalJSON([]byte(`"256MiB"`)); err != nil || b != 256<<20 {
		t.Fatalf("got %d, %v", b, err)
	}
	if err := b.UnmarshalJSON([]byte(`1048576`)); err != nil || b != 1<<20 {
		t.Fatalf("got %d, %v", b, err)
	}
	if err := b.UnmarshalJSON([]byte(`"12XB"`)); err == nil {
		t.Fatal("want error")
	}
}

func TestValidateKey(t *testing.T) {
	if err := ValidateKey(""); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}
	if err := ValidateKey(string(make([]byte, MaxKeyLen+1))); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("long key: %v", err)
	}
	if err := ValidateKey(string(make([]byte, MaxKeyLen))); err != nil {
		t.Fatalf("max key: %v", err)
	}
}

func TestValidateWorkerID(t *testing.T) {
	for _, ok := range []WorkerID{"w1", "worker-1.a_b"} {
		if err := ValidateWorkerID(ok); err != nil {
			t.Fatalf("%q: %v", ok, err)
		}
	}
	for _, bad := range []WorkerID{"", ".", "..", "a/b", "a b"} {
		if err := ValidateWorkerID(bad); !errors.Is(err, ErrInvalidParams) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}

func TestCodes(t *testing.T) {
	for c := Code(1); c < numCodes; c++ {
		wrapped := fmt.Errorf("ctx: %w", c.Sentinel())
		if got := CodeOf(wrapped); got != c {
			t.Fatalf("CodeOf(%v) = %v, want %v", wrapped, got, c)
		}
		remote := NewCodeError(c, "remote said so")
		if !errors.Is(remote, c.Sentinel()) {
			t.Fatalf("remote %v does not match its sentinel", c)
		}
		if CodeOf(fmt.Errorf("x: %w", remote)) != c {
			t.Fatalf("CodeOf(remote %v) wrong", c)
		}
	}
	if CodeOf(nil) != CodeOK || NewCodeError(CodeOK, "x") != nil {
		t.Fatal("OK handling")
	}
	if CodeOf(context.DeadlineExceeded) != CodeTimeout || CodeOf(ErrClosed) != CodeUnavailable {
		t.Fatal("context mapping")
	}
	if CodeOf(errors.New("boom")) != CodeInternal {
		t.Fatal("unknown error must be internal")
	}
	if Code(999).String() != "CODE_999" || !errors.Is(NewCodeError(999, "x"), ErrInternal) {
		t.Fatal("unknown code handling")
	}
}

func TestParsePersistence(t *testing.T) {
	for _, p := range []Persistence{PersistenceCache, PersistenceSpill, PersistenceDurable} {
		got, err := ParsePersistence(p.String())
		if err != nil || got != p {
			t.Fatalf("%v: %v %v", p, got, err)
		}
	}
	if _, err := ParsePersistence("sometimes"); !errors.Is(err, ErrInvalidParams) {
		t.Fatal(err)
	}
}

func TestChecksumStreaming(t *testing.T) {
	p := make([]byte, 100_000)
	for i := range p {
		p[i] = byte(i * 7)
	}
	h := NewChecksum()
	h.Write(p[:333])
	h.Write(p[333:])
	if h.Sum64() != Checksum(p) {
		t.Fatal("streaming checksum differs from one-shot")
	}
	if len(checksumKey) != 32 {
		t.Fatal("highwayhash key must be 32 bytes")
	}
	if Checksum(p) == Checksum(p[1:]) {
		t.Fatal("checksum ignores bytes")
	}
}
