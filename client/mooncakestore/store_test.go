package mooncakestore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/mooncake-go/mooncake/client/mooncakestore"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
)

func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startCluster starts one master and two workers in-process and returns the master's address
// and the workers.
func startCluster(t *testing.T) (string, []*worker.Worker) {
	t.Helper()
	m, err := master.NewMaster(master.Config{DataDir: t.TempDir(), RPCAddress: "127.0.0.1:0", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	var ws []*worker.Worker
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, w := range ws {
			w.Shutdown(ctx)
		}
		m.Shutdown(ctx)
	})
	for i := range 2 {
		w, err := worker.NewWorker(worker.Config{WorkerID: base.WorkerID("w" + strconv.Itoa(i+1)), MasterAddresses: []string{m.Addr()},
			Address: "127.0.0.1:0", GlobalSegmentSize: 16 << 20, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	return m.Addr(), ws
}

// offHeap maps n bytes outside the Go heap, as a Mooncake program registers memory it got
// from mmap or C.malloc.
func offHeap(t *testing.T, n int) []byte {
	t.Helper()
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(b) })
	return b
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// TestMooncakeGoAPI runs a program written against Mooncake's Go binding: only the import
// differs.
func TestMooncakeGoAPI(t *testing.T) {
	master, ws := startCluster(t)
	s, err := mooncakestore.New()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put("k", []byte("v"), nil); !errors.Is(err, mooncakestore.ErrPut) {
		t.Fatalf("put before Setup: %v", err)
	}
	if err := s.Setup("10.0.0.5", "P2PHANDSHAKE", 4<<30, 16<<20, "rdma", "mlx5_0", master); err != nil {
		t.Fatal(err)
	}
	if err := s.Setup("h", "", 0, 0, "tcp", "", master); !errors.Is(err, mooncakestore.ErrSetupFailed) {
		t.Fatalf("second Setup: %v", err)
	}
	if err := s.HealthCheck(); err != nil {
		t.Fatal(err)
	}
	if h, err := s.Hostname(); err != nil || h != "10.0.0.5" {
		t.Fatalf("Hostname: %q %v", h, err)
	}

	// Put / Get / GetSize / Exists; a put of an existing key is a success, as in Mooncake.
	cfg := mooncakestore.DefaultReplicateConfig()
	if err := s.Put("plain", []byte("hello"), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("plain", []byte("hello"), nil); err != nil {
		t.Fatalf("put of an existing key: %v", err)
	}
	buf := make([]byte, 16)
	if n, err := s.Get("plain", buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("Get: %d %v", n, err)
	}
	if n, err := s.GetSize("plain"); err != nil || n != 5 {
		t.Fatalf("GetSize: %d %v", n, err)
	}
	if _, err := s.GetSize("missing"); !errors.Is(err, mooncakestore.ErrGetSize) || !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("GetSize missing: %v", err)
	}
	if ok, err := s.Exists("plain"); err != nil || !ok {
		t.Fatalf("Exists: %v %v", ok, err)
	}
	if got, err := s.BatchExists([]string{"plain", "missing"}); err != nil || !got[0] || got[1] {
		t.Fatalf("BatchExists: %v %v", got, err)
	}
	if err := s.Put("two", []byte("x"), &mooncakestore.ReplicateConfig{ReplicaNum: 2, WithSoftPin: true, PreferredSegments: []string{ws[1].Addr()}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("bad", []byte("x"), &mooncakestore.ReplicateConfig{}); !errors.Is(err, mooncakestore.ErrInvalidArgument) {
		t.Fatalf("ReplicaNum 0: %v", err)
	}

	// Registered buffers: PutFrom / GetInto and their batch forms.
	mem := offHeap(t, 1<<20)
	base0 := addr(mem)
	if err := s.RegisterBuffer(base0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterBuffer(base0+100, 10); !errors.Is(err, mooncakestore.ErrRegisterBuffer) {
		t.Fatalf("overlapping registration: %v", err)
	}
	if n, err := s.RegisteredBufferCount(); err != nil || n != 1 {
		t.Fatalf("RegisteredBufferCount: %d %v", n, err)
	}
	copy(mem, bytes.Repeat([]byte("a"), 4096))
	copy(mem[4096:], bytes.Repeat([]byte("b"), 8192))
	if err := s.PutFrom("a", base0, 4096, nil); err != nil {
		t.Fatal(err)
	}
	res, err := s.BatchPutFrom([]string{"b", "a"}, []uintptr{base0 + 4096, base0}, []uint64{8192, 4096}, nil)
	if err != nil || res[0] != 0 || res[1] != 0 {
		t.Fatalf("BatchPutFrom: %v %v", res, err)
	}
	out := mem[512<<10:]
	if n, err := s.GetInto("a", addr(out), 4096); err != nil || n != 4096 || !bytes.Equal(out[:4096], mem[:4096]) {
		t.Fatalf("GetInto: %d %v", n, err)
	}
	sizes, err := s.BatchGetInto([]string{"b", "missing"}, []uintptr{addr(out), addr(out[8192:])}, []uint64{8192, 100})
	if err != nil || sizes[0] != 8192 || sizes[1] != -704 || !bytes.Equal(out[:8192], mem[4096:4096+8192]) {
		t.Fatalf("BatchGetInto: %v %v", sizes, err)
	}
	if err := s.PutFrom("outside", addr(buf), 4, nil); !errors.Is(err, mooncakestore.ErrInvalidArgument) {
		t.Fatalf("PutFrom an unregistered pointer: %v", err)
	}
	if _, err := s.GetInto("a", base0+(1<<20)-10, 4096); !errors.Is(err, mooncakestore.ErrInvalidArgument) {
		t.Fatalf("GetInto past the registered end: %v", err)
	}
	if err := s.UnregisterBuffer(base0 + 1); !errors.Is(err, mooncakestore.ErrUnregisterBuffer) {
		t.Fatalf("unregister an unknown pointer: %v", err)
	}
	if err := s.UnregisterBuffer(base0); err != nil {
		t.Fatal(err)
	}
	if err := s.PutFrom("c", base0, 10, nil); !errors.Is(err, mooncakestore.ErrInvalidArgument) {
		t.Fatalf("PutFrom after unregistering: %v", err)
	}

	// Removal.
	if err := s.Remove("plain", false); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("plain", true); !errors.Is(err, mooncakestore.ErrRemove) || !errors.Is(err, base.ErrObjectNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
	if n, err := s.RemoveByRegex("^[ab]$", false); err != nil || n != 2 {
		t.Fatalf("RemoveByRegex: %d %v", n, err)
	}
	if n, err := s.RemoveAll(false); err != nil || n != 1 {
		t.Fatalf("RemoveAll: %d %v", n, err)
	}
	s.Close()
	if err := s.Put("k", []byte("v"), nil); !errors.Is(err, mooncakestore.ErrStoreNil) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestSetupErrors(t *testing.T) {
	s, _ := mooncakestore.New()
	defer s.Close()
	if err := s.Setup("h", "P2PHANDSHAKE", 0, 0, "tcp", "", "etcd://127.0.0.1:2379"); !errors.Is(err, mooncakestore.ErrSetupFailed) || !errors.Is(err, base.ErrNotSupported) {
		t.Fatalf("etcd master: %v", err)
	}
	if err := s.Setup("h", "P2PHANDSHAKE", 0, 0, "tcp", "", ""); !errors.Is(err, mooncakestore.ErrSetupFailed) {
		t.Fatalf("no master: %v", err)
	}
	if _, err := mooncakestore.NewWithType(mooncakestore.MOONCAKE_CLIENT_DUMMY); !errors.Is(err, base.ErrNotSupported) {
		t.Fatalf("dummy client: %v", err)
	}
	if err := s.DummySetup(0, 0, "", ""); !errors.Is(err, mooncakestore.ErrSetupFailed) {
		t.Fatalf("DummySetup: %v", err)
	}
}
