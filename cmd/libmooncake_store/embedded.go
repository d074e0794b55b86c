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
)

// The embedded worker (setup with global_segment_size > 0): a server.Worker in the calling
// process, as Mooncake's client mounts a segment. Its life:
//
//  1. setup starts it with an id of its own (embeddedPrefix, host, pid, random: never reused,
//     since its memory dies with the process) and returns once the leader lists it active.
//  2. close (or destroy) stops it without the restart-grace heartbeat (Ephemeral): the leader
//     marks it dead after client_ttl, and its objects stop being readable.
//  3. The leader keeps a dead worker's replicas for its return until the worker is retired;
//     an embedded worker never returns, so close retires it in the background once the leader
//     lists it dead, and every setup retires the dead embedded workers it finds (left by
//     processes that exited without closing). Then its objects are gone from the metadata too.

// embeddedPrefix starts the id of every embedded worker, and only theirs.
const embeddedPrefix = "embedded-"

// retireWait bounds how long a closed store waits for the leader to find its worker dead
// before retiring it (client_ttl is 10 s by default); a later setup retires it otherwise.
const retireWait = 2 * time.Minute

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

// startEmbedded starts the worker and waits until the leader lists it active (bounded by ctx).
func startEmbedded(ctx context.Context, cl *client.Client, clusterID string, masters []string, addr string, size int64) (*server.Worker, error) {
	w, err := server.NewWorker(server.WorkerConfig{
		WorkerID:          embeddedID(),
		ClusterID:         clusterID,
		MasterAddresses:   masters,
		Address:           addr,
		GlobalSegmentSize: size,
		Ephemeral:         true,
		Logger:            stderrLogger,
	})
	if err != nil {
		return nil, err
	}
	if err := waitState(ctx, cl, w.ID(), "active"); err != nil {
		shutdownWorker(w)
		return nil, fmt.Errorf("%w: the embedded worker %s did not register in %v: %w", base.ErrUnavailable, w.ID(), workerReadyTimeout, err)
	}
	return w, nil
}

// waitState polls the leader's status until worker id is in state (bounded by ctx).
func waitState(ctx context.Context, cl *client.Client, id base.WorkerID, state string) error {
	for {
		st, err := cl.Status(ctx)
		if err == nil {
			for _, w := range st.Workers {
				if w.ID == string(id) && w.State == state {
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

func shutdownWorker(w *server.Worker) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		stderrLogger.Warn("mooncake: embedded worker shutdown", "err", err)
	}
}

// stopEmbedded stops w, then, in the background, waits for the leader to list it dead and
// retires it, and closes cl (which it takes over; nil: nothing to retire with).
func stopEmbedded(cl *client.Client, w *server.Worker) {
	shutdownWorker(w)
	if cl == nil {
		return
	}
	go func() {
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), retireWait)
		defer cancel()
		if err := waitState(ctx, cl, w.ID(), "dead"); err != nil {
			return // a later setup retires it
		}
		if err := cl.RetireWorker(ctx, w.ID()); err != nil {
			stderrLogger.Debug("mooncake: retire the closed embedded worker", "worker", w.ID(), "err", err)
		}
	}()
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
