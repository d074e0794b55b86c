package master

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

// registerSelf, on a follower, asks the leader to record this master's RPC address in the
// masters table (RegisterMaster) while the table, as replicated here, lacks it: raftmeta only
// registers a leader's own address (and peers configured with one), so without this a master
// that never led would be missing from every status. It makes at most one call per tick,
// bounded by registerMasterTimeout; it does nothing while no leader (or no leader address) is
// known, and stops once the entry has reached this node. Failures (an election in progress, a
// leader that predates the call) are retried next tick and logged at debug only.
func (m *Master) registerSelf() {
	self := m.Addr()
	for _, ms := range m.node.Masters() {
		if ms.ID == m.cfg.ID && ms.RPCAddr == self {
			return
		}
	}
	lid, laddr := m.node.Leader()
	if lid == "" || laddr == "" || lid == m.cfg.ID || laddr == m.regRefusedBy {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), registerMasterTimeout)
	defer cancel()
	err := m.cli.Call(ctx, laddr, &transfer.RegisterMasterRequest{MasterID: m.cfg.ID, RPCAddr: self}, nil)
	if errors.Is(err, base.ErrInvalidParams) {
		m.regRefusedBy = laddr
		m.log.Info("the leader refused RegisterMaster (it may predate the call); not asking it again until another master leads",
			"leader", lid, "leader_addr", laddr, "err", err)
		return
	}
	if err != nil {
		m.log.Debug("register master address with the leader failed; retrying next tick",
			"leader", lid, "leader_addr", laddr, "rpc_address", self, "err", err)
		return
	}
	m.log.Info("registered master address with the leader", "leader", lid, "rpc_address", self)
}

// registerMaster records a master's RPC address in the masters table on the leader. The id
// must be a member of the raft configuration and the address non-empty (removal is what
// membership changes do). It commits nothing when the table already holds that address, so
// a follower's retries are cheap.
func (m *Master) registerMaster(ctx context.Context, id, rpcAddr string) error {
	cmd := raftmeta.RegisterMaster{ID: id, RPCAddr: rpcAddr}
	if rpcAddr == "" {
		return fmt.Errorf("%w: RegisterMaster needs an rpc address", base.ErrInvalidParams)
	}
	if err := cmd.Validate(); err != nil {
		return err
	}
	if !m.ensureLeader() {
		return m.notLeader()
	}
	servers, err := m.node.Servers()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(servers, func(p raftmeta.Peer) bool { return p.ID == id }) {
		return fmt.Errorf("%w: master %q is not a member of the raft configuration", base.ErrInvalidParams, id)
	}
	for _, ms := range m.node.Masters() {
		if ms.ID == id && ms.RPCAddr == rpcAddr {
			return nil
		}
	}
	actx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	_, err = m.node.Apply(actx, cmd)
	return err
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
