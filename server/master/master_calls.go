package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
	"github.com/mooncake-go/mooncake/transfer"
)

// masterCall is one entry of the master's RPC table: every call gets the same treatment from
// HandleCall, so limits, metrics and error mapping cannot drift from one call to another.
type masterCall struct {
	// op is the Mooncake counter the call counts under; noOp for internal and operator calls.
	op masterOp
	// opFor, when set, picks the counter from the request instead (CreateTask: by type).
	opFor func(req transfer.Message) masterOp
	// items returns a batch call's item count, checked against raftmeta.MaxBatch before the
	// call runs (INVALID_PARAMS past it); nil for a call of one item.
	items func(req transfer.Message) int
	// timeout bounds the call's context: applyTimeout for writes through raft, zero for the
	// caller's deadline alone.
	timeout time.Duration
	// now marks a call that never blocks and is short (no raft commit, no I/O, one object):
	// it is served on the connection's read loop, without a goroutine of its own
	// (transfer.CallNowHandler).
	now bool
	// serve runs the call. A batch call returns its items' first error in itemErr: it counts
	// as a failure of the call, and the items travel in resp (err is for the whole call).
	serve func(ctx context.Context, m *Master, req transfer.Message) (resp transfer.Message, itemErr, err error)
}

// noOp marks a call without a Mooncake counter.
const noOp masterOp = -1

// masterCalls is the RPC table, by opcode. Ping and the Empty-bodied calls (RemoveAll,
// Status) are keyed by their op like the others.
var masterCalls = map[transfer.Op]masterCall{
	transfer.OpPing: {op: noOp, now: true, serve: func(context.Context, *Master, transfer.Message) (transfer.Message, error, error) {
		return nil, nil, nil
	}},
	transfer.OpPutStart:       {op: opPutStart, now: true, serve: servePutStart},
	transfer.OpBatchPutStart:  {op: opBatchPutStart, items: batchLen, serve: serveBatchPutStart},
	transfer.OpPutEnd:         {op: opPutEnd, timeout: applyTimeout, serve: servePutEnd},
	transfer.OpBatchPutEnd:    {op: opBatchPutEnd, items: batchLen, timeout: applyTimeout, serve: serveBatchPutEnd},
	transfer.OpPutRevoke:      {op: opPutRevoke, now: true, serve: servePutRevoke},
	transfer.OpBatchPutRevoke: {op: opPutRevoke, items: batchLen, serve: serveBatchPutRevoke},
	transfer.OpLookup:         {op: opLookup, serve: serveLookup},
	transfer.OpBatchLookup:    {op: opBatchLookup, items: batchLen, serve: serveBatchLookup},
	transfer.OpExists:         {op: opExists, serve: serveExists},
	transfer.OpBatchExists:    {op: opBatchExists, items: batchLen, serve: serveBatchExists},
	transfer.OpRemove:         {op: opRemove, timeout: applyTimeout, serve: serveRemove},
	transfer.OpBatchRemove:    {op: opBatchRemove, items: batchLen, timeout: applyTimeout, serve: serveBatchRemove},
	transfer.OpRemoveByRegex:  {op: opRemoveByRegex, timeout: applyTimeout, serve: serveRemoveByRegex},
	transfer.OpRemoveAll:      {op: opRemoveAll, timeout: applyTimeout, serve: serveRemoveAll},
	transfer.OpList:           {op: opList, serve: serveList},
	// Registration reconciles a whole inventory in several raft commits: four apply bounds.
	transfer.OpRegisterWorker: {op: opRegisterWorker, timeout: 4 * applyTimeout, serve: serveRegisterWorker},
	transfer.OpHeartbeat:      {op: opHeartbeat, serve: serveHeartbeat},
	transfer.OpStatus:         {op: opStatus, serve: serveStatus},
	// Internal master-to-master and operator calls: no Mooncake counter; each change is logged.
	transfer.OpRegisterMaster: {op: noOp, serve: func(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
		r := req.(*transfer.RegisterMasterRequest)
		return nil, nil, m.registerMaster(ctx, r.MasterID, r.RPCAddr)
	}},
	transfer.OpAddMaster: {op: noOp, serve: func(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
		r := req.(*transfer.AddMasterRequest)
		return nil, nil, m.addMaster(ctx, r.MasterID, r.RaftAddr, r.RPCAddr)
	}},
	transfer.OpRemoveMaster: {op: noOp, serve: func(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
		return nil, nil, m.removeMaster(ctx, req.(*transfer.RemoveMasterRequest).MasterID)
	}},
	transfer.OpDrainWorker: {op: noOp, serve: func(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
		r := req.(*transfer.DrainWorkerRequest)
		return nil, nil, m.drainWorker(ctx, r.WorkerID, r.Cancel)
	}},
	transfer.OpRetireWorker: {op: noOp, serve: func(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
		return nil, nil, m.retireWorker(ctx, req.(*transfer.RetireWorkerRequest).WorkerID)
	}},
	// A worker's unmount (master_leave.go): a raft commit, bounded by applyTimeout.
	transfer.OpLeaveWorker: {op: noOp, timeout: applyTimeout, serve: func(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
		return nil, nil, m.leaveWorker(ctx, req.(*transfer.LeaveWorkerRequest).WorkerID)
	}},
	// Copy and move tasks (master_tasks.go): queued on the leader, answered at once.
	transfer.OpCreateTask: {opFor: createTaskOp, serve: serveCreateTask},
	transfer.OpQueryTask:  {op: opQueryTask, serve: serveQueryTask},
	// Held open while the worker's connection lives: no timeout.
	transfer.OpAttachWorker: {op: noOp, serve: func(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
		return nil, nil, m.attachWorker(ctx, req.(*transfer.AttachWorkerRequest).WorkerID)
	}},
}

// CallsNow reports whether the call with op is served on its connection's read loop
// (transfer.CallNowHandler): the table's short calls that never block, unless a test hook
// may block before any call.
func (h *masterHandler) CallsNow(op transfer.Op) bool {
	return masterCalls[op].now && h.m.cfg.Test.BeforeCall == nil
}

// HandleCall serves one master call through the table: the batch limit, the context bound,
// the call's counter (a batch with a failed item counts as failed), and the wire mapping of
// errors (a raftmeta.NotLeaderError becomes NOT_LEADER with the leader's address).
func (h *masterHandler) HandleCall(ctx context.Context, req transfer.Message) (transfer.Message, error) {
	if h.m.cfg.Test.BeforeCall != nil {
		h.m.cfg.Test.BeforeCall(ctx, req)
	}
	c, ok := masterCalls[req.Op()]
	if !ok {
		// The memory and model calls (memory_master.go) serve themselves.
		start := time.Now()
		resp, handled, err := h.callMemory(ctx, req)
		if !handled {
			resp, handled, err = h.callKVSession(ctx, req)
		}
		if !handled {
			return nil, fmt.Errorf("%w: %s is not a master call", base.ErrNotSupported, req.Op())
		}
		h.m.met.mc.observeCall(req, resp, time.Since(start), err)
		if err != nil {
			return nil, wireErr(err)
		}
		return resp, nil
	}
	start := time.Now()
	var resp transfer.Message
	var itemErr, err error
	if c.items != nil && c.items(req) > raftmeta.MaxBatch {
		err = fmt.Errorf("%w: batch of %d items, the limit is %d", base.ErrInvalidParams, c.items(req), raftmeta.MaxBatch)
	} else {
		if c.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.timeout)
			defer cancel()
		}
		resp, itemErr, err = c.serve(ctx, h.m, req)
	}
	// Mooncake's names and latency histograms (metrics_compat.go) count every call.
	h.m.met.mc.observeCall(req, resp, time.Since(start), err)
	if c.opFor != nil {
		c.op = c.opFor(req)
	}
	if c.op != noOp {
		h.m.met.observe(c.op, errors.Join(err, itemErr))
	}
	if err != nil {
		return nil, wireErr(err)
	}
	return resp, nil
}

// batchLen is the item count of every batch request.
func batchLen(req transfer.Message) int {
	switch r := req.(type) {
	case *transfer.BatchPutStartRequest:
		return len(r.Items)
	case *transfer.BatchPutEndRequest:
		return len(r.Items)
	case *transfer.BatchPutRevokeRequest:
		return len(r.Items)
	case *transfer.BatchLookupRequest:
		return len(r.Keys)
	case *transfer.BatchExistsRequest:
		return len(r.Keys)
	case *transfer.BatchRemoveRequest:
		return len(r.Keys)
	}
	return 0
}

// isNotLeader reports whether err redirects the whole call (a batch stops at the first item
// that finds this master no longer leads).
func isNotLeader(err error) bool {
	var nl *raftmeta.NotLeaderError
	return errors.As(err, &nl)
}

func servePutStart(_ context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	rep, err := m.putStart(req.(*transfer.PutStartRequest))
	if err != nil {
		return nil, nil, err
	}
	return &rep, nil, nil
}

func serveBatchPutStart(_ context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	r := req.(*transfer.BatchPutStartRequest)
	out := &transfer.BatchPutStartResponse{Items: make([]transfer.PutStartResult, len(r.Items))}
	errs := make([]error, len(r.Items))
	for i := range r.Items {
		rep, err := m.putStart(&r.Items[i])
		if isNotLeader(err) {
			return nil, nil, err
		}
		if err != nil {
			out.Items[i].Err, errs[i] = transfer.ItemErrorOf(err), err
			continue
		}
		out.Items[i].PutStartResponse = rep
	}
	return out, firstErr(errs), nil
}

func servePutEnd(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	r := req.(*transfer.PutEndRequest)
	errs, err := m.putEnd(ctx, []base.Object{m.putEndRecord(r)}, r.Config.Upsert)
	if err == nil {
		err = firstErr(errs)
	}
	return nil, nil, err
}

// serveBatchPutEnd commits a batch of PutEnds. NB: one raft entry carries one Upsert flag; a
// batch mixing upserts and plain puts is split in two commits so neither changes meaning.
func serveBatchPutEnd(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	r := req.(*transfer.BatchPutEndRequest)
	errs := make([]error, len(r.Items))
	for _, up := range []bool{false, true} {
		var idx []int
		var sub []base.Object
		for i := range r.Items {
			if r.Items[i].Config.Upsert == up {
				idx = append(idx, i)
				sub = append(sub, m.putEndRecord(&r.Items[i]))
			}
		}
		if len(sub) == 0 {
			continue
		}
		subErrs, err := m.putEnd(ctx, sub, up)
		if err != nil {
			return nil, nil, err
		}
		for j, i := range idx {
			errs[i] = subErrs[j]
		}
	}
	return transfer.NewBatchResponse(transfer.OpBatchPutEnd, itemErrs(errs)), firstErr(errs), nil
}

func servePutRevoke(_ context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	r := req.(*transfer.PutRevokeRequest)
	return nil, nil, m.putRevoke(r.Key, r.Version)
}

func serveBatchPutRevoke(_ context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	r := req.(*transfer.BatchPutRevokeRequest)
	errs := make([]error, len(r.Items))
	for i, it := range r.Items {
		errs[i] = m.putRevoke(it.Key, it.Version)
		if isNotLeader(errs[i]) {
			return nil, nil, errs[i]
		}
	}
	return transfer.NewBatchResponse(transfer.OpBatchPutRevoke, itemErrs(errs)), firstErr(errs), nil
}

func serveLookup(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	r := req.(*transfer.LookupRequest)
	if err := m.readCheck(ctx, r.AllowStale); err != nil {
		return nil, nil, err
	}
	reps, errs := m.lookupLocal([]string{r.Key})
	if errs[0] != nil {
		return nil, nil, errs[0]
	}
	return &reps[0], nil, nil
}

func serveBatchLookup(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	r := req.(*transfer.BatchLookupRequest)
	if err := m.readCheck(ctx, r.AllowStale); err != nil {
		return nil, nil, err
	}
	reps, errs := m.lookupLocal(r.Keys)
	out := &transfer.BatchLookupResponse{Items: make([]transfer.LookupResult, len(r.Keys))}
	for i := range r.Keys {
		if errs[i] != nil {
			out.Items[i].Err = transfer.ItemErrorOf(errs[i])
			continue
		}
		out.Items[i].LookupResponse = reps[i]
	}
	return out, firstErr(errs), nil
}

func serveExists(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	r := req.(*transfer.ExistsRequest)
	if err := base.ValidateKey(r.Key); err != nil {
		return nil, nil, err
	}
	if err := m.readCheck(ctx, r.AllowStale); err != nil {
		return nil, nil, err
	}
	_, ok := m.node.Lookup(r.Key)
	out := &transfer.ExistsResponse{Exists: ok}
	if ok && r.Placements {
		if reps, errs := m.lookupLocal([]string{r.Key}); errs[0] == nil {
			out.Lookup = &reps[0]
		}
	}
	return out, nil, nil
}

func serveBatchExists(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	r := req.(*transfer.BatchExistsRequest)
	if err := m.readCheck(ctx, r.AllowStale); err != nil {
		return nil, nil, err
	}
	out := &transfer.BatchExistsResponse{Exists: make([]bool, len(r.Keys))}
	for i, k := range r.Keys {
		_, out.Exists[i] = m.node.Lookup(k)
	}
	if r.Placements {
		// Where each object is, as a BatchLookup would answer: a client's gets after its
		// exists then go straight to the workers (client lookup cache).
		reps, errs := m.lookupLocal(r.Keys)
		out.Lookups = make([]transfer.LookupResult, len(r.Keys))
		for i := range r.Keys {
			if errs[i] != nil {
				out.Lookups[i].Err = transfer.ItemErrorOf(errs[i])
				continue
			}
			out.Lookups[i].LookupResponse = reps[i]
		}
	}
	return out, nil, nil
}

func serveRemove(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	errs, err := m.remove(ctx, []string{req.(*transfer.RemoveRequest).Key})
	if err == nil {
		err = firstErr(errs)
	}
	return nil, nil, err
}

func serveBatchRemove(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	errs, err := m.remove(ctx, req.(*transfer.BatchRemoveRequest).Keys)
	if err != nil {
		return nil, nil, err
	}
	return transfer.NewBatchResponse(transfer.OpBatchRemove, itemErrs(errs)), firstErr(errs), nil
}

func serveRemoveByRegex(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	n, err := m.removeByRegex(ctx, req.(*transfer.RemoveByRegexRequest).Pattern)
	if err != nil {
		return nil, nil, err
	}
	return transfer.NewCountResponse(transfer.OpRemoveByRegex, int64(n)), nil, nil
}

func serveRemoveAll(ctx context.Context, m *Master, _ transfer.Message) (transfer.Message, error, error) {
	n, err := m.removeAll(ctx)
	if err != nil {
		return nil, nil, err
	}
	return transfer.NewCountResponse(transfer.OpRemoveAll, int64(n)), nil, nil
}

func serveList(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	r := req.(*transfer.ListRequest)
	if err := m.readCheck(ctx, true); err != nil {
		return nil, nil, err
	}
	items, next := m.list(r.Prefix, r.Cursor, int(r.Limit))
	out := &transfer.ListResponse{Items: make([]transfer.ListItem, len(items)), NextCursor: next}
	for i, it := range items {
		out.Items[i] = transfer.ListItem{Key: it.Key, Size: it.Size}
	}
	return out, nil, nil
}

// serveRegisterWorker takes a whole registration (session 0: an inventory that fits one page,
// or a worker that predates paging) or one page of a paged one; only the final page's reply
// carries drops.
func serveRegisterWorker(ctx context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	r := req.(*transfer.RegisterWorkerRequest)
	drops, err := m.registerPage(ctx, RegisterArgs{WorkerID: r.WorkerID, Address: r.Address,
		DRAMCapacity: r.DRAMCapacity, NVMeCapacity: r.NVMeCapacity, Inventory: r.Inventory}, r.Session, r.Page, r.More)
	if err != nil {
		return nil, nil, err
	}
	return &transfer.RegisterWorkerResponse{Drop: drops, HeartbeatInterval: rpcsrv.DefaultHeartbeatInterval}, nil, nil
}

// serveHeartbeat: a worker built before HeartbeatRequest carried NVMeObjects sends none (its
// count stays 0 in Status, unknown). Leaving is set on a graceful shutdown's last heartbeat.
// The reply carries client_ttl and settled only to a worker that asks (one that predates the
// fields would refuse the longer reply).
func serveHeartbeat(_ context.Context, m *Master, req transfer.Message) (transfer.Message, error, error) {
	r := req.(*transfer.HeartbeatRequest)
	rep, err := m.heartbeat(r.WorkerID, WorkerUsage{DRAMUsed: r.DRAMUsed, NVMeUsed: r.NVMeUsed,
		DRAMObjects: r.DRAMObjects, NVMeObjects: r.NVMeObjects}, r.Leaving)
	if err != nil {
		return nil, nil, err
	}
	m.noteWorkerStats(r) // counters and per-model tallies (worker_stats.go)
	resp := &transfer.HeartbeatResponse{Drop: rep.Drops, Reregister: rep.Reregister}
	if r.AskClientTTL || r.AskSettled {
		resp.ClientTTL = m.cfg.ClientTTL // bounds the worker's heartbeat calls (server/worker/worker_loop.go)
	}
	// Whether the worker may vouch for reads from kept lookups (docs/protocol.md).
	resp.Settled = r.AskSettled && rep.Settled
	return resp, nil, nil
}

func serveStatus(_ context.Context, m *Master, _ transfer.Message) (transfer.Message, error, error) {
	b, err := json.Marshal(m.status())
	if err != nil {
		return nil, nil, fmt.Errorf("%w: status: %v", base.ErrInternal, err)
	}
	return &transfer.StatusResponse{JSON: b}, nil, nil
}
