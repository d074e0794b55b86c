package master

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
	"github.com/mooncake-go/mooncake/transfer"
)

// KV sessions (issue 21 item 2): the leader answers Mooncake's pin_kv_session ...
// attach_kv_session over the registry raftmeta keeps (raftmeta/kvsession.go). Changes are
// raft commits; reads are linearizable reads of the leader's FSM (readCheck).
// Update and close walk the session in pages and detach what the keep set lacks, page by page,
// as Mooncake's MasterService::UpdateKvSession does: neither is a whole-session transaction,
// and an attach racing them may or may not survive.

// callKVSession answers the KV-session calls (ops 140-145); handled is false for any other.
func (h *masterHandler) callKVSession(ctx context.Context, req transfer.Message) (resp transfer.Message, handled bool, err error) {
	m := h.m
	switch r := req.(type) {
	case *transfer.KVSessionListRequest:
		return m.kvSessionList(ctx, r)
	case *transfer.KVSessionRequest:
		if err := base.ValidateStoredKVSessionID(r.ID); err != nil {
			return nil, true, err
		}
		// A linearizable read (a new leader first applies what its predecessor committed);
		// the changes are raft commits, which check leadership themselves.
		if err := m.readCheck(ctx, false); err != nil {
			return nil, true, err
		}
		switch r.Call {
		case transfer.OpKVSessionGet:
			info, err := m.node.KVSession(r.ID)
			if err != nil {
				return nil, true, err
			}
			return &transfer.KVSessionInfoResponse{ID: info.ID, Pinned: info.Pinned, MemberCount: uint64(info.MemberCount)}, true, nil
		case transfer.OpKVSessionPin, transfer.OpKVSessionUnpin:
			op := raftmeta.KVSessionPin
			if r.Call == transfer.OpKVSessionUnpin {
				op = raftmeta.KVSessionUnpin
			}
			actx, cancel := h.applyCtx(ctx)
			defer cancel()
			res, err := m.node.Apply(actx, raftmeta.KVSession{Op: op, ID: r.ID})
			if err == nil {
				err = res.Err
			}
			if err == nil {
				m.pushSessionPins(ctx, r.ID, op == raftmeta.KVSessionPin)
			}
			return nil, true, err
		case transfer.OpKVSessionUpdate:
			return nil, true, m.kvSessionUpdate(ctx, r.ID, r.Keys)
		case transfer.OpKVSessionAttach:
			items, err := m.kvSessionAttach(ctx, r.ID, r.Keys)
			if err != nil {
				return nil, true, err
			}
			return transfer.NewBatchResponse(transfer.OpKVSessionAttach, items), true, nil
		}
	}
	return nil, false, nil
}

func (m *Master) kvSessionList(ctx context.Context, r *transfer.KVSessionListRequest) (transfer.Message, bool, error) {
	if err := base.ValidateStoredKVSessionID(r.ID); err != nil {
		return nil, true, err
	}
	if r.Limit == 0 || r.Limit > raftmeta.MaxKVSessionBatch {
		return nil, true, fmt.Errorf("%w: KV session list limit %d, want 1 to %d", base.ErrInvalidParams, r.Limit, raftmeta.MaxKVSessionBatch)
	}
	if err := m.readCheck(ctx, false); err != nil {
		return nil, true, err
	}
	keys, next, err := m.node.KVSessionKeys(r.ID, r.Cursor, int(r.Limit))
	if err != nil {
		return nil, true, err
	}
	return &transfer.KVSessionPageResponse{Keys: keys, NextCursor: next}, true, nil
}

// kvSessionAttach adds keys to session id: one item per key. The whole call fails
// (INVALID_PARAMS) for more than MaxKVSessionBatch keys, as Mooncake's.
func (m *Master) kvSessionAttach(ctx context.Context, id string, keys []string) ([]transfer.ItemError, error) {
	if len(keys) > raftmeta.MaxKVSessionBatch {
		return nil, fmt.Errorf("%w: attach of %d keys, the limit is %d", base.ErrInvalidParams, len(keys), raftmeta.MaxKVSessionBatch)
	}
	items := make([]transfer.ItemError, len(keys))
	if len(keys) == 0 {
		return items, nil
	}
	actx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	res, err := m.node.Apply(actx, raftmeta.KVSession{Op: raftmeta.KVSessionAttach, ID: id, Keys: keys})
	if err != nil {
		return nil, err
	}
	if res.Items == nil {
		return nil, res.Err
	}
	var added []string
	for i, e := range res.Items {
		items[i] = transfer.ItemErrorOf(e)
		if e == nil {
			added = append(added, keys[i])
		}
	}
	// A pinned session's new members are pinned on their workers too.
	if info, err := m.node.KVSession(id); err == nil && info.Pinned {
		m.pushPins(ctx, added, true)
	}
	return items, nil
}

// kvSessionUpdate keeps only the members of session id that keep names (none: close). An
// absent session is no error. Pages of MaxKVSessionBatch members are read, and those keep
// lacks detached in one commit per page.
func (m *Master) kvSessionUpdate(ctx context.Context, id string, keep []string) error {
	if len(keep) > raftmeta.MaxKVSessionMembers {
		return fmt.Errorf("%w: keep set of %d keys, the limit is %d", base.ErrSessionLimitExceeded, len(keep), raftmeta.MaxKVSessionMembers)
	}
	set := make(map[string]struct{}, len(keep))
	for _, k := range keep {
		set[k] = struct{}{}
	}
	actx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	info, err := m.node.KVSession(id)
	if errors.Is(err, base.ErrSessionNotFound) {
		return nil
	}
	cursor := ""
	for {
		page, next, err := m.node.KVSessionKeys(id, cursor, raftmeta.MaxKVSessionBatch)
		if errors.Is(err, base.ErrSessionNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var drop []string
		for _, k := range page {
			if _, ok := set[k]; !ok {
				drop = append(drop, k)
			}
		}
		if len(drop) > 0 {
			res, err := m.node.Apply(actx, raftmeta.KVSession{Op: raftmeta.KVSessionDetach, ID: id, Keys: drop})
			if err == nil {
				err = res.Err
			}
			if err != nil {
				return err
			}
			if info.Pinned {
				m.pushPins(ctx, drop, false) // they left a pinned session
			}
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
}

// workerPinTimeout bounds one worker's KVSessionPins answer.
const workerPinTimeout = 5 * time.Second

// pushSessionPins marks (or unmarks) every member of session id on the workers holding it,
// after a pin or unpin committed.
func (m *Master) pushSessionPins(ctx context.Context, id string, pinned bool) {
	for cursor := ""; ; {
		page, next, err := m.node.KVSessionKeys(id, cursor, raftmeta.MaxKVSessionBatch)
		if err != nil {
			return // the session went meanwhile
		}
		m.pushPins(ctx, page, pinned)
		if next == "" {
			return
		}
		cursor = next
	}
}

// pushPins tells the workers holding keys to mark them as members of a pinned KV session (or
// to lift the mark), so their eviction keeps them with the soft pins: one KVSessionPins call
// per worker, in parallel. A key that still belongs to another pinned session keeps its mark.
// Best effort, as Mooncake's session pin is a retention hint: a worker that does not answer is
// logged and the call still succeeds (the registry change is committed).
func (m *Master) pushPins(ctx context.Context, keys []string, pinned bool) {
	addrs := map[base.WorkerID]string{}
	for _, s := range m.node.Segments() {
		if s.State == raftmeta.SegmentActive {
			addrs[s.ID] = s.Address
		}
	}
	byWorker := map[base.WorkerID][]base.KeyVersion{}
	for _, k := range keys {
		if !pinned && m.node.KVSessionPinned(k) {
			continue
		}
		o, ok := m.node.Lookup(k)
		if !ok {
			continue
		}
		for _, w := range o.Replicas {
			byWorker[w] = append(byWorker[w], base.KeyVersion{Key: k, Version: o.Version})
		}
	}
	var wg sync.WaitGroup
	for w, items := range byWorker {
		addr := addrs[w]
		if addr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, workerPinTimeout)
			defer cancel()
			resp := transfer.NewBatchResponse(transfer.OpKVSessionPins, nil)
			if err := m.cli.Call(cctx, addr, &transfer.KVSessionPinsRequest{Pinned: pinned, Items: items}, resp); err != nil {
				m.log.Warn("KV session pins not delivered to a worker", "worker", w, "keys", len(items), "pinned", pinned, "err", err)
			}
		}()
	}
	wg.Wait()
}
