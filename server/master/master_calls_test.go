package master

import (
	"context"
	"testing"

	"github.com/mooncake-go/mooncake/transfer"
)

// TestCallsNow: the calls served on the connection's read loop are the short ones that never
// block (no raft commit, no wait on another master or worker); none is while a test hook may
// block before every call.
func TestCallsNow(t *testing.T) {
	h := &masterHandler{m: &Master{}}
	f := func(op transfer.Op, want bool) {
		t.Helper()
		if got := h.CallsNow(op); got != want {
			t.Errorf("CallsNow(%s) = %v, want %v", op, got, want)
		}
	}
	f(transfer.OpPutStart, true)
	f(transfer.OpPutRevoke, true)
	f(transfer.OpPing, true)
	for _, op := range []transfer.Op{transfer.OpPutEnd, transfer.OpBatchPutEnd, transfer.OpBatchPutStart,
		transfer.OpLookup, transfer.OpExists, transfer.OpRemove, transfer.OpRegisterWorker,
		transfer.OpHeartbeat, transfer.OpAttachWorker, transfer.OpRead} {
		f(op, false)
	}
	h.m.cfg.Test.BeforeCall = func(context.Context, transfer.Message) {}
	f(transfer.OpPutStart, false)
}
