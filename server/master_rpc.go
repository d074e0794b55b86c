package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
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
	start := time.Now()
	resp, op, err := h.call(ctx, req)
	h.m.met.mc.observeCall(req, resp, time.Since(start), err)
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
		SoftPinUntil: softPinUntil(h.m.now(), r.Config.SoftPinTTL), HardPin: r.Config.HardPin, Tokens: r.Tokens, Model: r.Model}
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
	if resp, ok, err := h.callMemory(ctx, req); ok {
		return resp, -1, err
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

// raftProbeTimeout bounds AddMaster's checks of the new master (probeNewMaster): a TCP
// connect to its raft address, and a Status call to its RPC address when one is given.
const raftProbeTimeout = 2 * time.Second

// validateMasterID applies the worker id rules to a master id (1 to 255 bytes of letters,
// digits, '.', '_' and '-'), so ids are safe in paths, logs and flags.
func validateMasterID(id string) error {
	if err := base.ValidateWorkerID(base.WorkerID(id)); err != nil {
		return fmt.Errorf("%w: master id %q: want 1 to %d bytes of letters, digits, '.', '_' and '-'",
			base.ErrInvalidParams, id, base.MaxWorkerIDLen)
	}
	return nil
}

// validateMemberAddr checks a host:port with a host and a port from 1 to 65535 (port 0, "pick
// one", means nothing to other masters).
func validateMemberAddr(what, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil && host == "" {
		err = errors.New("no host")
	}
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 1 || n > 65535 {
			err = fmt.Errorf("bad port %q", port)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %s %q: want host:port: %v", base.ErrInvalidParams, what, addr, err)
	}
	return nil
}

// memberIDs lists the ids of a configuration for error messages.
func memberIDs(servers []raftmeta.Peer) string {
	ids := make([]string, len(servers))
	for i, p := range servers {
		ids[i] = p.ID
	}
	slices.Sort(ids)
	return strings.Join(ids, ", ")
}

// leaderServers returns the raft configuration when this master leads, NOT_LEADER otherwise.
func (m *Master) leaderServers() ([]raftmeta.Peer, error) {
	if !m.ensureLeader() {
		return nil, m.notLeader()
	}
	return m.node.Servers()
}

// addMaster adds a voter to the raft configuration (the AddMaster call) and, when rpcAddr is
// given, records its client address. Leader only. Repeating it is safe: a member already at
// raftAddr is left as it is (only the RPC address is recorded, when it differs). A member id
// at another raft address, or a raft address held by another member, is refused with
// ErrObjectAlreadyExists: a master that moves is removed and added again (docs/raftmeta.md).
//
// Before the change the leader probes the new master (probeNewMaster, bounded by
// raftProbeTimeout): a voter that is not running counts against the quorum from the moment the
// configuration entry is appended, so adding one while another member is down would stall
// every write; and a master with raft state of its own must never join. Either is refused
// with ErrInvalidParams telling the operator to start the new master with --join first.
func (m *Master) addMaster(ctx context.Context, id, raftAddr, rpcAddr string) error {
	if err := validateMasterID(id); err != nil {
		return err
	}
	if err := validateMemberAddr("raft address", raftAddr); err != nil {
		return err
	}
	if rpcAddr != "" {
		if err := validateMemberAddr("rpc address", rpcAddr); err != nil {
			return err
		}
	}
	servers, err := m.leaderServers()
	if err != nil {
		return err
	}
	member := false
	for _, p := range servers {
		switch {
		case p.ID == id && p.RaftAddr == raftAddr:
			member = true
		case p.ID == id:
			return fmt.Errorf("%w: master %q is already a member at raft address %s; to move it, remove it, then add it at %s",
				base.ErrObjectAlreadyExists, id, p.RaftAddr, raftAddr)
		case p.RaftAddr == raftAddr:
			return fmt.Errorf("%w: raft address %s is member %q's; remove %q first or give %q its own address",
				base.ErrObjectAlreadyExists, raftAddr, p.ID, p.ID, id)
		}
	}
	if !member {
		if err := m.probeNewMaster(ctx, id, raftAddr, rpcAddr); err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, applyTimeout)
		err = m.node.AddVoter(actx, id, raftAddr)
		cancel()
		if err != nil {
			return fmt.Errorf("add master %s at %s: %w", id, raftAddr, err)
		}
		m.log.Info("master added to the raft configuration", "master", id, "raft_address", raftAddr,
			"members", memberIDs(append(servers, raftmeta.Peer{ID: id})))
	}
	if rpcAddr == "" {
		return nil
	}
	return m.registerMaster(ctx, id, rpcAddr)
}

// probeNewMaster checks, before AddMaster changes the configuration, that the new master is
// running and empty. Its errors wrap ErrInvalidParams, not ErrUnavailable: clients retry the
// latter on other masters until their timeout, and no other master would answer differently.
//
//  1. Something must accept a TCP connection at raftAddr (one connect, closed at once).
//  2. With rpcAddr, the master there must answer Status (so its cluster id matches: the
//     handshake checks it) as master id, with no raft configuration and nothing applied. A
//     master started without --join has bootstrapped a cluster of its own, and one restarted
//     on an old data dir has an old log; joining either would merge two histories whose
//     entries share indexes and terms, which raft cannot detect. Without rpcAddr this check
//     is skipped (documented: give --rpc_address).
func (m *Master) probeNewMaster(ctx context.Context, id, raftAddr, rpcAddr string) error {
	pctx, cancel := context.WithTimeout(ctx, raftProbeTimeout)
	defer cancel()
	d := net.Dialer{}
	conn, err := d.DialContext(pctx, "tcp", raftAddr)
	if err != nil {
		return fmt.Errorf("%w: nothing accepts connections at raft address %s (%v); start the new master there with --join first",
			base.ErrInvalidParams, raftAddr, err)
	}
	conn.Close()
	if rpcAddr == "" {
		return nil
	}
	cli, err := transfer.NewClient(transfer.ClientOptions{ClusterID: m.cfg.ClusterID, Logger: m.log,
		ConnsPerPeer: 1, DialTimeout: raftProbeTimeout})
	if err != nil {
		return err
	}
	defer cli.Close()
	sr := &transfer.StatusResponse{}
	if err := cli.Call(pctx, rpcAddr, transfer.NewEmpty(transfer.OpStatus), sr); err != nil {
		return fmt.Errorf("%w: the new master does not answer at rpc address %s (%v); start it there with --join (and this cluster's --cluster_id) first",
			base.ErrInvalidParams, rpcAddr, err)
	}
	var st Status
	if err := json.Unmarshal(sr.JSON, &st); err != nil {
		return fmt.Errorf("%w: the master at %s sent a bad status: %v", base.ErrInvalidParams, rpcAddr, err)
	}
	switch {
	case st.Self != id:
		return fmt.Errorf("%w: the master at rpc address %s is %q, not %q", base.ErrInvalidParams, rpcAddr, st.Self, id)
	case len(st.Masters) > 0 || st.AppliedIndex > 0:
		ids := make([]string, len(st.Masters))
		for i, ms := range st.Masters {
			ids[i] = ms.ID
		}
		return fmt.Errorf("%w: master %q at %s already has raft state (configuration [%s], applied index %d): it was started without --join or on an old data dir; stop it, empty its --data_dir and start it with --join",
			base.ErrInvalidParams, id, rpcAddr, strings.Join(ids, " "), st.AppliedIndex)
	}
	return nil
}

// removeMaster removes a member from the raft configuration and its masters-table entry (the
// RemoveMaster call). Leader only. A master that is not a member is ErrObjectNotFound; the
// last voter is never removed (ErrInvalidParams).
//
// Removing the leader itself: this master first hands leadership to another voter (raft's
// leadership transfer), then answers NOT_LEADER naming the new leader; the caller repeats the
// call there (the Go client does so by itself, as for any redirect), and the new leader
// removes this master as a follower. Nothing is removed when the transfer fails.
func (m *Master) removeMaster(ctx context.Context, id string) error {
	if err := validateMasterID(id); err != nil {
		return err
	}
	servers, err := m.leaderServers()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(servers, func(p raftmeta.Peer) bool { return p.ID == id }) {
		return fmt.Errorf("%w: master %q is not a member of the raft configuration (members: %s)",
			base.ErrObjectNotFound, id, memberIDs(servers))
	}
	if len(servers) == 1 {
		return fmt.Errorf("%w: master %q is the only voter; removing it would leave no cluster", base.ErrInvalidParams, id)
	}
	if id == m.cfg.ID {
		tctx, cancel := context.WithTimeout(ctx, applyTimeout)
		err := m.node.LeadershipTransfer(tctx)
		cancel()
		if err != nil && !errors.Is(err, base.ErrNotLeader) {
			return fmt.Errorf("%w: master %q leads and could not hand leadership to another voter (%v); nothing was removed",
				base.ErrUnavailable, id, err)
		}
		m.log.Info("removing this master, the leader: leadership handed over; the new leader removes it", "master", id)
		return m.notLeader()
	}
	actx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	if err := m.node.RemoveServer(actx, id); err != nil {
		return fmt.Errorf("remove master %s: %w", id, err)
	}
	m.log.Info("master removed from the raft configuration", "master", id)
	return nil
}

// masterStatuses lists the masters for Status: the members of the raft configuration, with
// their raft addresses and, once registered, their RPC addresses, sorted by id. Entries of the
// masters table that are not members are left out: RemoveMaster deletes a member's entry, but
// a later leader re-registers every bootstrap peer that was given an RPC address
// (raftmeta's registerMasters, from --peer_rpc_addresses), removed ones included.
func masterStatuses(node *raftmeta.Node, leaderID string) []MasterStatus {
	out := []MasterStatus{}
	servers, err := node.Servers()
	if err != nil {
		return out // only while closing
	}
	for _, p := range servers {
		out = append(out, MasterStatus{ID: p.ID, RPCAddress: p.RPCAddr, RaftAddress: p.RaftAddr, Leader: p.ID == leaderID})
	}
	slices.SortFunc(out, func(a, b MasterStatus) int { return strings.Compare(a.ID, b.ID) })
	return out
}
