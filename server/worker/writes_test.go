package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// newTestWorker starts a worker with an arena of arena bytes and no master (its registration
// retries in the background): enough for the write assembly, which needs none.
func newTestWorker(t *testing.T, arena int64) *Worker {
	t.Helper()
	w, err := NewWorker(Config{MasterAddresses: []string{"127.0.0.1:1"}, Address: "127.0.0.1:0",
		GlobalSegmentSize: arena, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Shutdown(context.Background()) })
	return w
}

// TestWriteChunksShareTheAllocation: the chunks of one object that arrive together (striped
// TCP writes, same-host staged chunks, ranged session writes) land in one arena range. Here
// the second chunk arrives while the first one's tier Put has allocated the object (3 MiB of
// a 4 MiB arena) and not yet made its pending entry. A second Put of the whole object would
// find no room and fail the write with NO_AVAILABLE_HANDLE (the cause of
// TestPythonSessions's failures under load: a session's first ranged write, and the
// polling put of a 20 MiB object into a 32 MiB worker, failed that way).
func TestWriteChunksShareTheAllocation(t *testing.T) {
	const size, half = 3 << 20, 3 << 19
	w := newTestWorker(t, 4<<20)
	req := func(off int64) *transfer.WriteRequest {
		return &transfer.WriteRequest{Key: "big", Version: 5, TotalSize: size, Offset: off}
	}
	// The first chunk's hook says when its range is allocated, and holds it there until the
	// second chunk either waits for that allocation or has its answer.
	allocated, secondParked := make(chan struct{}), make(chan struct{})
	hook := func(phase, key string, v base.Version) {
		switch phase {
		case "allocated":
			close(allocated)
			<-secondParked
		case "waiting":
			close(secondParked)
		}
	}
	w.testWritePhase.Store(&hook)
	type result struct {
		sink transfer.WriteSink
		err  error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() {
		sink, err := w.beginWrite(req(0), half)
		first <- result{sink, err}
	}()
	go func() {
		<-allocated
		sink, err := w.beginWrite(req(half), half)
		second <- result{sink, err}
	}()
	r2 := <-second // with the fix it comes only after the first chunk's entry is made
	select {
	case <-secondParked:
	default:
		close(secondParked) // answered without waiting for the first chunk's allocation
	}
	r1 := <-first
	if r1.err != nil || r2.err != nil {
		for _, r := range []result{r1, r2} {
			if r.err == nil {
				_ = r.sink.Done(errors.New("test failed")) // its range back before Shutdown
			}
		}
		t.Fatalf("chunks of one object written together: first %v, second %v", r1.err, r2.err)
	}
	for i := range r1.sink.Dst {
		r1.sink.Dst[i] = 1
	}
	for i := range r2.sink.Dst {
		r2.sink.Dst[i] = 2
	}
	if err := r1.sink.Done(nil); err != nil {
		t.Fatal(err)
	}
	if err := r2.sink.Done(nil); err != nil {
		t.Fatal(err)
	}
	if err := w.commit(&transfer.CommitRequest{Key: "big", Version: 5}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if info, err := w.eng.Info("big", 5); err != nil || info.Size != size {
		t.Fatalf("committed object: %+v, %v", info, err)
	}
	if got := w.eng.Metrics().PendingWrites.Objects; got != 0 {
		t.Fatalf("%d pending writes left after the commit (a second allocation leaked)", got)
	}
}
