package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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

func (h *masterHandler) HandleCall(ctx context.Context, req transfer.Message) (transfer.Message, error) {
	resp, op, err := h.call(ctx, req)
	if op >= 0 {
		h.m.met.observe(op, err)
	}
	if err != nil {
		return nil, wireErr(err)
	}
	return resp, nil
}

func (h *masterHandler) applyCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, applyTimeout)
}

func softPinUntil(now time.Time, ttl time.Duration) time.Time {
	if ttl <= 0 {
		return time.Time{}
	}
	return now.Add(ttl)
}

func putStartArgs(r *transfer.PutStartRequest) PutStartArgs {
	return PutStartArgs{Key: r.Key, Size: r.Size, Replicas: int(r.Config.Replicas), PreferredWorker: r.Config.PreferredWorker, Upsert: r.Config.Upsert}
}

func toReplicas(rs []Replica) []transfer.Replica {
	out := make([]transfer.Replica, len(rs))
	for i, r := range rs {
		out[i] = transfer.Replica{WorkerID: r.WorkerID, Address: r.Address}
	}
	return out
}

func lookupResponse(l LookupReply) transfer.LookupResponse {
	return transfer.LookupResponse{Version: l.Version, Size: l.Size, Checksum: l.Checksum, Replicas: toReplicas(l.Replicas)}
}

func (h *masterHandler) putEndItem(r *transfer.PutEndRequest) PutEndItem {
	return PutEndItem{Key: r.Key, Version: r.Version, Size: r.Size, Checksum: r.Checksum, Replicas: r.Replicas,
		SoftPinUntil: softPinUntil(h.m.now(), r.Config.SoftPinTTL), HardPin: r.Config.HardPin}
}

// call dispatches one request; op is the metric it counts under (-1: none).
func (h *masterHandler) call(ctx context.Context, req transfer.Message) (transfer.Message, masterOp, error) {
	m := h.m
	switch r := req.(type) {
	case *transfer.PutStartRequest:
		rep, err := m.putStart(putStartArgs(r))
		if err != nil {
			return nil, opPutStart, err
		}
		return &transfer.PutStartResponse{Version: rep.Version, Replicas: toReplicas(rep.Replicas)}, opPutStart, nil

	case *transfer.BatchPutStartRequest:
		out := &transfer.BatchPutStartResponse{Items: make([]transfer.PutStartResult, len(r.Items))}
		var failed error
		for i := range r.Items {
			rep, err := m.putStart(putStartArgs(&r.Items[i]))
			if err != nil {
				var nl *raftmeta.NotLeaderError
				if errors.As(err, &nl) {
					return nil, opBatchPutStart, err
				}
				out.Items[i].Err = transfer.ItemErrorOf(err)
				failed = err
				continue
			}
			out.Items[i].PutStartResponse = transfer.PutStartResponse{Version: rep.Version, Replicas: toReplicas(rep.Replicas)}
		}
		m.met.observe(opBatchPutStart, failed)
		return out, -1, nil

	case *transfer.PutEndRequest:
		actx, cancel := h.applyCtx(ctx)
		defer cancel()
		errs, err := m.putEnd(actx, []PutEndItem{h.putEndItem(r)}, r.Config.Upsert)
		if err == nil {
			err = firstErr(errs)
		}
		return nil, opPutEnd, err

	case *transfer.BatchPutEndRequest:
		if len(r.Items) > raftmeta.MaxBatch {
			return nil, opBatchPutEnd, fmt.Errorf("%w: batch of %d items, the limit is %d", base.ErrInvalidParams, len(r.Items), raftmeta.MaxBatch)
		}
		items := make([]PutEndItem, len(r.Items))
		for i := range r.Items {
			items[i] = h.putEndItem(&r.Items[i])
		}
		// NB: one raft entry carries one Upsert flag; a batch mixing upserts and plain puts is
		// split in two commits so neither changes meaning.
		actx, cancel := h.applyCtx(ctx)
		defer cancel()
		errs := make([]error, len(items))
		for _, up := range []bool{false, true} {
			var idx []int
			var sub []PutEndItem
			for i := range items {
				if r.Items[i].Config.Upsert == up {
					idx = append(idx, i)
					sub = append(sub, items[i])
				}
			}
			if len(sub) == 0 {
				continue
			}
			subErrs, err := m.putEnd(actx, sub, up)
			if err != nil {
				return nil, opBatchPutEnd, err
			}
			for j, i := range idx {
				errs[i] = subErrs[j]
			}
		}
		m.met.observe(opBatchPutEnd, firstErr(errs))
		return transfer.NewBatchResponse(transfer.OpBatchPutEnd, itemErrs(errs)), -1, nil

	case *transfer.PutRevokeRequest:
		return nil, opPutRevoke, m.putRevoke(r.Key, r.Version)

	case *transfer.RegisterMasterRequest:
		// Internal master-to-master call: no Mooncake counter (op -1).
		return nil, -1, m.registerMaster(ctx, r.MasterID, r.RPCAddr)

	case *transfer.AddMasterRequest:
		// Operator calls (membership): no Mooncake counter (op -1); each change is logged.
		return nil, -1, m.addMaster(ctx, r.MasterID, r.RaftAddr, r.RPCAddr)

	case *transfer.DrainWorkerRequest:
		// An operator call: no Mooncake counter (op -1); each change is logged.
		return nil, -1, m.drainWorker(ctx, r.WorkerID, r.Cancel)

	case *transfer.RemoveMasterRequest:
		return nil, -1, m.removeMaster(ctx, r.MasterID)

	case *transfer.BatchPutRevokeRequest:
		errs := make([]error, len(r.Items))
		for i, it := range r.Items {
			errs[i] = m.putRevoke(it.Key, it.Version)
			var nl *raftmeta.NotLeaderError
			if errors.As(errs[i], &nl) {
				return nil, opPutRevoke, errs[i]
			}
		}
		return transfer.NewBatchResponse(transfer.OpBatchPutRevoke, itemErrs(errs)), opPutRevoke, nil

	case *transfer.LookupRequest:
		if err := m.readCheck(ctx, r.AllowStale); err != nil {
			return nil, opLookup, err
		}
		reps, errs := m.lookupLocal([]string{r.Key})
		if errs[0] != nil {
			return nil, opLookup, errs[0]
		}
		lr := lookupResponse(reps[0])
		return &lr, opLookup, nil

	case *transfer.BatchLookupRequest:
		if err := m.readCheck(ctx, r.AllowStale); err != nil {
			return nil, opBatchLookup, err
		}
		reps, errs := m.lookupLocal(r.Keys)
		out := &transfer.BatchLookupResponse{Items: make([]transfer.LookupResult, len(r.Keys))}
		for i := range r.Keys {
			if errs[i] != nil {
				out.Items[i].Err = transfer.ItemErrorOf(errs[i])
				continue
			}
			out.Items[i].LookupResponse = lookupResponse(reps[i])
		}
		return out, opBatchLookup, nil

	case *transfer.ExistsRequest:
		if err := base.ValidateKey(r.Key); err != nil {
			return nil, opExists, err
		}
		if err := m.readCheck(ctx, r.AllowStale); err != nil {
			return nil, opExists, err
		}
		_, ok := m.node.Lookup(r.Key)
		return &transfer.ExistsResponse{Exists: ok}, opExists, nil

	case *transfer.BatchExistsRequest:
		if err := m.readCheck(ctx, r.AllowStale); err != nil {
			return nil, opBatchExists, err
		}
		out := &transfer.BatchExistsResponse{Exists: make([]bool, len(r.Keys))}
		for i, k := range r.Keys {
			_, out.Exists[i] = m.node.Lookup(k)
		}
		return out, opBatchExists, nil

	case *transfer.RemoveRequest:
		actx, cancel := h.applyCtx(ctx)
		defer cancel()
		errs, err := m.remove(actx, []string{r.Key})
		if err == nil {
			err = firstErr(errs)
		}
		return nil, opRemove, err

	case *transfer.BatchRemoveRequest:
		if len(r.Keys) > raftmeta.MaxBatch {
			return nil, opBatchRemove, fmt.Errorf("%w: batch of %d keys, the limit is %d", base.ErrInvalidParams, len(r.Keys), raftmeta.MaxBatch)
		}
		actx, cancel := h.applyCtx(ctx)
		defer cancel()
		errs, err := m.remove(actx, r.Keys)
		if err != nil {
			return nil, opBatchRemove, err
		}
		m.met.observe(opBatchRemove, firstErr(errs))
		return transfer.NewBatchResponse(transfer.OpBatchRemove, itemErrs(errs)), -1, nil

	case *transfer.RemoveByRegexRequest:
		actx, cancel := h.applyCtx(ctx)
		defer cancel()
		n, err := m.removeByRegex(actx, r.Pattern)
		if err != nil {
			return nil, opRemoveByRegex, err
		}
		return transfer.NewCountResponse(transfer.OpRemoveByRegex, int64(n)), opRemoveByRegex, nil

	case *transfer.ListRequest:
		if err := m.readCheck(ctx, true); err != nil {
			return nil, opList, err
		}
		items, next := m.list(r.Prefix, r.Cursor, int(r.Limit))
		out := &transfer.ListResponse{Items: make([]transfer.ListItem, len(items)), NextCursor: next}
		for i, it := range items {
			out.Items[i] = transfer.ListItem{Key: it.Key, Size: it.Size}
		}
		return out, opList, nil

	case *transfer.RegisterWorkerRequest:
		actx, cancel := context.WithTimeout(ctx, 4*applyTimeout)
		defer cancel()
		// Session 0: a whole registration in one message (a worker whose inventory fits one
		// page, or one that predates paging). Otherwise one page of a paged registration:
		// only the final page's reply carries drops.
		drops, err := m.registerPage(actx, RegisterArgs{WorkerID: r.WorkerID, Address: r.Address,
			DRAMCapacity: r.DRAMCapacity, NVMeCapacity: r.NVMeCapacity, Inventory: r.Inventory}, r.Session, r.Page, r.More)
		if err != nil {
			return nil, opRegisterWorker, err
		}
		return &transfer.RegisterWorkerResponse{Drop: toWireKV(drops), HeartbeatInterval: DefaultHeartbeatInterval}, opRegisterWorker, nil

	case *transfer.HeartbeatRequest:
		// A worker built before HeartbeatRequest carried NVMeObjects sends none: its count
		// stays 0 in Status (unknown), as it always was. Leaving is set on a worker's final
		// heartbeat of a graceful shutdown only.
		rep, err := m.heartbeat(r.WorkerID, WorkerUsage{DRAMUsed: r.DRAMUsed, NVMeUsed: r.NVMeUsed,
			DRAMObjects: r.DRAMObjects, NVMeObjects: r.NVMeObjects}, r.Leaving)
		if err != nil {
			return nil, opHeartbeat, err
		}
		return &transfer.HeartbeatResponse{Drop: toWireKV(rep.Drops), Reregister: rep.Reregister}, opHeartbeat, nil

	case *transfer.Empty:
		switch r.Op() {
		case transfer.OpPing:
			return nil, -1, nil
		case transfer.OpRemoveAll:
			actx, cancel := h.applyCtx(ctx)
			defer cancel()
			n, err := m.removeAll(actx)
			if err != nil {
				return nil, opRemoveAll, err
			}
			return transfer.NewCountResponse(transfer.OpRemoveAll, int64(n)), opRemoveAll, nil
		case transfer.OpStatus:
			b, err := json.Marshal(m.status())
			if err != nil {
				return nil, opStatus, fmt.Errorf("%w: status: %v", base.ErrInternal, err)
			}
			return &transfer.StatusResponse{JSON: b}, opStatus, nil
		}
	}
	return nil, -1, fmt.Errorf("%w: %s is not a master call", base.ErrNotSupported, req.Op())
}

func toWireKV(kvs []raftmeta.KeyVersion) []transfer.KeyVersion {
	out := make([]transfer.KeyVersion, len(kvs))
	for i, kv := range kvs {
		out[i] = transfer.KeyVersion{Key: kv.Key, Version: kv.Version}
	}
	return out
}
