package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server"
	"github.com/mooncake-go/mooncake/server/worker"
)

// The embedded worker (setup with global_segment_size > 0): a worker.Worker in the calling
// process, as Mooncake's client mounts a segment. Its life:
//
//  1. setup starts it with an id of its own (embeddedPrefix, host, pid, random: never reused,
//     since its memory dies with the process) and returns once the leader lists it active
//     and attached. From then on it holds a connection to the leader open (AttachWorker).
//  2. close, destroy, and Python's atexit for a store never closed, unmount it, as Mooncake's
//     close unmounts a client's segment: the worker is Ephemeral, so its Shutdown tells the
//     leader it leaves (LeaveWorker, synchronous, bounded by the server's leaveTimeout within
//     shutdownWorker's 10 s) before anything closes. When close returns the leader places no
//     put on it and has forgotten it: objects it alone held are gone from the metadata
//     (is_exist 0, get b"" at once); objects with another replica lost only this one. It is
//     never "dead". The embedded worker has no NVMe tier, so nothing of it could come back:
//     the leader forgets it rather than keep its replicas as lost ones (with an NVMe tier and
//     a stable id it would keep them for re-adoption: raftmeta LeaveWorker's Keep).
//  3. A process that ends without closing (SIGKILL, a crash, a C program that never calls
//     destroy) closes its connection to the leader as it dies: the leader stops placing on
//     the worker at once and marks it dead after the master's client_disconnect_grace (2 s).
//     A dead worker's replicas are kept for a return that cannot happen here, so every setup
//     retires the dead embedded workers it finds; then their objects are gone too.

// embeddedPrefix starts the id of every embedded worker, and only theirs.
const embeddedPrefix = "embedded-"

// embeddedID returns a fresh worker id: embedded-<host>-<pid>-<random>.
func embeddedID() base.WorkerID {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, host)
	if len(host) > 64 {
		host = host[:64]
	}
	return base.WorkerID(fmt.Sprintf("%s%s-%d-%08x", embeddedPrefix, host, os.Getpid(), rand.Uint32()))
}

// startEmbedded starts the worker (server.Start), waits until it registered with the leader
// (the composer's readiness), then until the leader lists it attached (bounded by ctx).
func startEmbedded(ctx context.Context, cl *client.Client, clusterID string, masters []string, addr string, size int64) (*worker.Worker, error) {
	srv, err := server.Start(server.Config{Worker: &worker.Config{
		WorkerID:          embeddedID(),
		ClusterID:         clusterID,
		MasterAddresses:   masters,
		Address:           addr,
		GlobalSegmentSize: size,
		Ephemeral:         true,
		Logger:            stderrLogger,
	}})
	if err != nil {
		return nil, err
	}
	w := srv.Worker
	if err := srv.WaitReady(ctx); err != nil {
		shutdownWorker(w, 0)
		return nil, fmt.Errorf("%w: the embedded worker %s did not register in %v: %w", base.ErrUnavailable, w.ID(), workerReadyTimeout, err)
	}
	if err := waitAttached(ctx, cl, w.ID()); err != nil {
		shutdownWorker(w, 0)
		return nil, fmt.Errorf("%w: the embedded worker %s did not register in %v: %w", base.ErrUnavailable, w.ID(), workerReadyTimeout, err)
	}
	return w, nil
}

// waitAttached polls the leader's status until worker id is active and attached (bounded by
// ctx): the C library's one condition beyond the composer's readiness. Attached matters: until the worker holds its connection to the leader, a crash of
// this process would be found only by client_ttl, and puts would go on being placed on it.
func waitAttached(ctx context.Context, cl *client.Client, id base.WorkerID) error {
	for {
		st, err := cl.Status(ctx)
		if err == nil {
			for _, w := range st.Workers {
				if w.ID == string(id) && w.State == "active" && w.Attached {
					return nil
				}
			}
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			if err == nil {
				err = ctx.Err()
			}
			return err
		case <-t.C:
		}
	}
}

// shutdownWorker unmounts and stops w within 10 s plus grace: the leave comes first, then
// reads in flight finish their sends until that bound (Mooncake's grace_period_seconds).
func shutdownWorker(w *worker.Worker, grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second+grace)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		stderrLogger.Warn("mooncake: embedded worker shutdown", "err", err)
	}
}

// stopEmbedded unmounts and stops ws (each Shutdown tells the leader it leaves before it
// returns: see the life above; nil entries are skipped), then closes cl (which it takes
// over; nil: none).
func stopEmbedded(cl *client.Client, ws ...*worker.Worker) {
	for _, w := range ws {
		if w != nil {
			shutdownWorker(w, 0)
		}
	}
	if cl != nil {
		cl.Close()
	}
}

// retireDeadEmbedded retires every dead embedded worker the leader lists. Best effort: a
// failure is logged at debug level and setup goes on.
func retireDeadEmbedded(ctx context.Context, cl *client.Client) {
	st, err := cl.Status(ctx)
	if err != nil {
		return
	}
	for _, w := range st.Workers {
		if strings.HasPrefix(w.ID, embeddedPrefix) && w.State == "dead" {
			if err := cl.RetireWorker(ctx, base.WorkerID(w.ID)); err != nil {
				stderrLogger.Debug("mooncake: retire a dead embedded worker", "worker", w.ID, "err", err)
			}
		}
	}
}
