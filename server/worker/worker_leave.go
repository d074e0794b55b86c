package worker

import (
	"context"
	"errors"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// The worker's side of going away (master_leave.go has the leader's):
//
//   - attachLoop holds an AttachWorker call open to the leader on a connection of its own
//     (attach.cli), from the first registration until Shutdown. If this process dies, the
//     kernel closes that connection and the leader stops placing on the worker at once.
//   - Shutdown of an Ephemeral worker (the C library's embedded one) unmounts it (leave)
//     before anything else closes; a server worker announces leaving to restart instead.
//     Either way the leader is told before the attached connection closes.

const (
	// leaveTimeout bounds the unmount of an ephemeral worker at Shutdown: one raft commit on
	// the leader, a redirect or two.
	leaveTimeout = 5 * time.Second
	// attachRetryMin is the pause before attaching again after the attached call ended; it
	// doubles up to maxRetryDelay while attaching fails, so a reconnect lands well within the
	// leader's client_disconnect_grace.
	attachRetryMin = 50 * time.Millisecond
)

// attachment is the worker's AttachWorker call and what stops it.
type attachment struct {
	cli    *transfer.Client // one connection per master, used for AttachWorker only
	ctx    context.Context  // ends the call in flight (stop)
	cancel context.CancelFunc
	done   chan struct{} // closed when attachLoop returns
}

// stop ends the attachment: the call in flight ends and its connection closes, which the
// leader sees as the connection's loss unless the worker told it first why.
func (a *attachment) stop() {
	if a.cli == nil {
		return
	}
	a.cancel()
	<-a.done
	a.cli.Close()
}

// attachLoop holds AttachWorker open to the leader the control loop last talked to, attaching
// again whenever the call ends (the connection broke, the master stopped leading, the worker
// is not registered there yet).
func (w *Worker) attachLoop() {
	a := &w.attach
	defer close(a.done)
	refused := 0 // consecutive answers refusing the attachment
	for {
		delay := attachRetryMin
		if addr, _ := w.leader.Load().(string); addr != "" && w.registered.Load() > 0 {
			if w.cfg.Test.BeforeAttach != nil {
				w.cfg.Test.BeforeAttach()
			}
			err := a.cli.Call(a.ctx, addr, &transfer.AttachWorkerRequest{WorkerID: w.id}, nil)
			if a.ctx.Err() != nil {
				return
			}
			// A master's answer (not the leader, not registered there yet) is retried with
			// backoff while the control loop finds the leader; a broken connection at once.
			var ce *base.CodeError
			var nl *transfer.NotLeaderError
			if errors.As(err, &ce) || errors.As(err, &nl) {
				refused++
				delay = min(attachRetryMin<<min(refused, 4), maxRetryDelay)
			} else {
				refused = 0
			}
			w.log.Debug("attachment to the leader ended; attaching again", "leader", addr, "err", err, "retry_in", delay)
		}
		t := time.NewTimer(delay)
		select {
		case <-a.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// callLeader makes one call to the leader: the one the control loop last talked to, then
// each configured master, following NOT_LEADER redirects. Bounded by ctx.
func (w *Worker) callLeader(ctx context.Context, req, resp transfer.Message) (string, error) {
	hint, _ := w.leader.Load().(string)
	return w.toLeader(hint, "", func(addr string) (bool, error) {
		err := w.callMaster(ctx, addr, req, resp)
		return err == nil || ctx.Err() != nil, err
	})
}

// leave unmounts this worker (LeaveWorker) at the Shutdown of an Ephemeral worker: when it
// returns OK the leader places nothing more here and the objects only this worker held are
// gone from the metadata. Bounded by ctx and leaveTimeout; a failure is logged (the leader
// then finds the worker gone when its attached connection closes).
func (w *Worker) leave(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, leaveTimeout)
	defer cancel()
	start := time.Now()
	addr, err := w.callLeader(ctx, &transfer.LeaveWorkerRequest{WorkerID: w.id}, nil)
	if err != nil {
		w.log.Warn("could not unmount from the leader; it drops this worker when its connection closes",
			"err", err, "took", time.Since(start))
		return
	}
	w.log.Info("unmounted: the leader places nothing more here and forgot what only this worker held",
		"leader", addr, "took", time.Since(start))
}
