package master

import (
	"context"
	"errors"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/transfer"
)

// masterHandler serves the master calls over transfer. It translates wire messages to the
// Master's methods and errors back: a raftmeta.NotLeaderError becomes transfer's NOT_LEADER
// carrying the leader's id and RPC address.
type masterHandler struct {
	transfer.UnimplementedHandler
	m *Master
}

// wireErr converts errors for the wire.
func wireErr(err error) error {
	var nl *raftmeta.NotLeaderError
	if errors.As(err, &nl) {
		return &transfer.NotLeaderError{LeaderID: nl.LeaderID, LeaderAddr: nl.LeaderRPCAddr, Msg: "mooncake: not leader"}
	}
	return err
}

func itemErrs(errs []error) []transfer.ItemError {
	out := make([]transfer.ItemError, len(errs))
	for i, e := range errs {
		out[i] = transfer.ItemErrorOf(wireErr(e))
	}
	return out
}

// firstErr returns the first non-nil error of errs (nil when every item succeeded): the error
// of a single-item call, or what a batch call's failure counter counts.
func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// putEndRecord returns the record a PutEnd commits: the client's, with the pins its config
// asks for (base.Object.SoftPinUntil, by this leader's clock).
func (m *Master) putEndRecord(r *transfer.PutEndRequest) base.Object {
	o := r.Object
	o.SoftPinUntil = base.SoftPinDeadline(m.now(), r.Config.SoftPinTTL)
	o.HardPin = r.Config.HardPin
	return o
}

// applyCtx bounds a call that commits through raft (the memory and model calls; the table's
// calls get theirs from masterCall.timeout).
func (h *masterHandler) applyCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, applyTimeout)
}
