package worker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/rpcsrv"
	"github.com/mooncake-go/mooncake/transfer"
)

const (
	// registerPageObjects and registerPageBytes bound one page of a registration's inventory
	// (whichever is reached first): 65,536 entries with 64-byte keys encode to 6.2 MiB, and
	// 16 MiB of entries stays well under the 64 MiB body limit whatever the keys' length.
	// An inventory that fits one page is sent as one unpaged request (understood by masters
	// that predate paging).
	registerPageObjects = 1 << 16
	registerPageBytes   = 16 << 20
	// maxRedirects bounds NOT_LEADER hops within one registration attempt.
	maxRedirects = 5
	// maxRetryDelay caps the pause between failed registration rounds: short, because after a
	// failover the workers must reach the new leader before puts can be placed on them.
	maxRetryDelay = 500 * time.Millisecond
	// minHeartbeatTimeout is the least a heartbeat call may take, whatever client_ttl says.
	minHeartbeatTimeout = 100 * time.Millisecond
	// minResyncInterval spaces re-registrations asked by the engine losing objects (cache
	// evictions): each sends the whole inventory, so a worker evicting all the time re-registers
	// at most this often.
	minResyncInterval = 5 * time.Second
)

// controlLoop is the worker's control goroutine (docs/threads.md). It owns the conversation
// with the masters: register (with the inventory), then heartbeat the leader every
// HeartbeatInterval, apply the drops the replies carry, follow NOT_LEADER redirects, and
// register again when the leader does not know this worker (new leader, marked dead) or when
// the engine lost objects the master still lists.
func (w *Worker) controlLoop() {
	defer w.loops.Done()
	leader := ""
	// silent is the leader whose heartbeat last failed: it is tried last until a registration
	// succeeds, so a leader whose host went silent costs one heartbeat timeout, not two.
	silent := ""
	registered := false
	delay := 50 * time.Millisecond
	failures := 0
	var lastRegister time.Time
	resyncEvery := minResyncInterval
	if w.cfg.Test.ResyncInterval > 0 {
		resyncEvery = w.cfg.Test.ResyncInterval
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		resync := registered && w.resync.Load() && time.Since(lastRegister) >= resyncEvery
		if !registered || resync || w.reregister.Load() {
			w.resync.Store(false)
			w.reregister.Store(false)
			addr, err := w.register(leader, silent)
			if err != nil {
				failures++
				if failures == 1 || failures%30 == 0 {
					w.log.Warn("cannot register with a master; retrying", "masters", w.cfg.MasterAddresses, "attempts", failures, "err", err)
				}
				t.Reset(delay)
				delay = min(2*delay, maxRetryDelay)
				continue
			}
			failures, delay = 0, 50*time.Millisecond
			leader, registered, silent = addr, true, ""
			lastRegister = time.Now()
			w.leader.Store(leader)
		}
		err := w.heartbeat(leader)
		var nl *transfer.NotLeaderError
		switch {
		case err == nil:
			if w.reregister.Load() {
				t.Reset(0)
				continue
			}
		case errors.As(err, &nl) && nl.LeaderAddr != "":
			leader = nl.LeaderAddr
			registered = false // the new leader reconciles this worker at registration
			t.Reset(0)
			continue
		case errors.Is(err, base.ErrSegmentNotFound):
			registered = false
			t.Reset(0)
			continue
		default:
			w.log.Debug("heartbeat failed; registering again", "leader", leader, "err", err)
			leader, registered, silent = "", false, leader
			t.Reset(delay)
			continue
		}
		t.Reset(w.cfg.HeartbeatInterval)
	}
}

// register sends RegisterWorker to the leader: first hint, then each configured master (avoid
// last), following NOT_LEADER redirects. It applies the drops of the reply and returns the address
// of the master that accepted.
//
// An inventory larger than one page (registerPageObjects / registerPageBytes) goes in pages,
// in order, all to one master, sharing a random session id (sendPages). Any failure (a
// redirect, a broken connection, a page the master refuses) abandons the attempt; the next
// one, to the redirected or the next master, starts over from page 0 with a new session.
func (w *Worker) register(hint, avoid string) (string, error) {
	// Find the leader with a cheap call first, so the inventory goes to one master only.
	if l, err := w.findLeader(hint, avoid); err == nil {
		hint = l
	}
	if f := w.cfg.Test.BeforeRegister; f != nil {
		f()
	}
	failures := w.vouch.registering() // before the inventory: its reconciliation covers them
	inv := w.eng.Inventory()
	req := &transfer.RegisterWorkerRequest{WorkerID: w.id, Address: w.Addr(), DRAMCapacity: w.arena.Capacity()}
	if w.store != nil {
		req.NVMeCapacity = w.store.Metrics().Capacity
	}
	maxObjects := registerPageObjects
	if w.cfg.Test.RegisterPageObjects > 0 {
		maxObjects = w.cfg.Test.RegisterPageObjects
	}
	pages := inventoryPages(inv, maxObjects, registerPageBytes)
	return w.toLeader(hint, avoid, func(addr string) (bool, error) {
		select {
		case <-w.stop:
			return true, fmt.Errorf("%w: worker shutting down", base.ErrClosed)
		default:
		}
		resp, err := w.sendPages(addr, req, pages)
		if err != nil {
			// A configuration error: retrying elsewhere will not help.
			var nl *transfer.NotLeaderError
			stop := !errors.As(err, &nl) && (errors.Is(err, base.ErrClusterMismatch) || errors.Is(err, base.ErrInvalidParams))
			return stop, err
		}
		w.applyDrops(resp.Drop)
		w.vouch.registered(failures)
		w.registered.Add(1)
		select {
		case w.regCh <- struct{}{}:
		default:
		}
		w.log.Info("registered with the leader", "master", addr, "inventory", len(inv), "pages", len(pages),
			"dropped_unknown", len(resp.Drop))
		return true, nil
	})
}

// sendPages makes one registration attempt at addr: the pages of the inventory, in order,
// each its own call bounded by rpcsrv.RegisterTimeout. One page goes as an unpaged request (session
// 0); more share a new random non-zero session, numbered from 0, More set on all but the
// last. It returns the final page's reply (the only one with drops), or the first error.
func (w *Worker) sendPages(addr string, tmpl *transfer.RegisterWorkerRequest, pages [][]base.ObjectMeta) (*transfer.RegisterWorkerResponse, error) {
	var session uint64
	for len(pages) > 1 && session == 0 {
		session = rand.Uint64()
	}
	resp := &transfer.RegisterWorkerResponse{}
	for i, p := range pages {
		req := *tmpl
		req.Inventory = p
		if session != 0 {
			req.Session, req.Page, req.More = session, uint32(i), i < len(pages)-1
		}
		*resp = transfer.RegisterWorkerResponse{}
		ctx, cancel := context.WithTimeout(w.ctx, rpcsrv.RegisterTimeout)
		err := w.callMaster(ctx, addr, &req, resp)
		cancel()
		if err != nil {
			if i > 0 {
				return nil, fmt.Errorf("registration page %d of %d: %w", i, len(pages), err)
			}
			return nil, err
		}
	}
	return resp, nil
}

// inventoryPages splits inv into pages of at most maxObjects entries and maxBytes of encoded
// entries (at least one entry per page); an empty inventory is one empty page. The pages
// share inv's backing array.
func inventoryPages(inv []base.ObjectMeta, maxObjects, maxBytes int) [][]base.ObjectMeta {
	var pages [][]base.ObjectMeta
	start, bytes := 0, 0
	for i := range inv {
		n := 4 + len(inv[i].Key) + 24 // the entry's encoding: key (u32 length + bytes), version, size, checksum
		if i > start && (i-start == maxObjects || bytes+n > maxBytes) {
			pages = append(pages, inv[start:i:i])
			start, bytes = i, 0
		}
		bytes += n
	}
	return append(pages, inv[start:])
}

// findLeader returns the address of the master that leads, asking hint first, then each
// configured master (avoid last), following NOT_LEADER redirects. It probes with a Heartbeat: the leader
// answers it (or refuses it with SEGMENT_NOT_FOUND when it does not know this worker yet),
// followers redirect.
func (w *Worker) findLeader(hint, avoid string) (string, error) {
	return w.toLeader(hint, avoid, func(addr string) (bool, error) {
		err := w.heartbeat(addr)
		var nl *transfer.NotLeaderError
		var ce *base.CodeError
		switch {
		case err == nil, errors.Is(err, base.ErrSegmentNotFound):
			return true, nil
		case errors.As(err, &nl):
			return false, err
		case errors.As(err, &ce):
			return true, nil // a master answered as the leader would (e.g. cluster mismatch): let register report it
		}
		return false, err
	})
}

// toLeader walks the masters in masterAddrs(hint, avoid) order, following each NOT_LEADER
// redirect that names another master (at most maxRedirects hops from each). try makes one
// attempt at addr: stop ends the walk there with its error, else the walk goes on (err is
// kept as the last failure). It returns the address try stopped at, or "" and the last
// failure (ErrUnavailable when there was no address at all).
func (w *Worker) toLeader(hint, avoid string, try func(addr string) (stop bool, err error)) (string, error) {
	var lastErr error
	for _, addr := range w.masterAddrs(hint, avoid) {
		for hop := 0; hop < maxRedirects && addr != ""; hop++ {
			stop, err := try(addr)
			if stop {
				return addr, err
			}
			lastErr = err
			var nl *transfer.NotLeaderError
			if !errors.As(err, &nl) || nl.LeaderAddr == "" || nl.LeaderAddr == addr {
				break
			}
			addr = nl.LeaderAddr
		}
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("%w: no master address", base.ErrUnavailable)
	}
	return "", lastErr
}

// masterAddrs is the order in which register and findLeader try the masters: hint (the
// leader last known, when there is one), then every configured master, and avoid (a master
// whose heartbeat just failed, "" for none) last of all.
func (w *Worker) masterAddrs(hint, avoid string) []string {
	out := make([]string, 0, len(w.cfg.MasterAddresses)+2)
	if hint != "" {
		out = append(out, hint)
	}
	out = append(out, w.cfg.MasterAddresses...)
	if avoid != "" {
		out = append(slices.DeleteFunc(out, func(a string) bool { return a == avoid }), avoid)
	}
	return out
}

// callMaster makes one master call.
func (w *Worker) callMaster(ctx context.Context, addr string, req, resp transfer.Message) error {
	start := time.Now()
	err := w.cli.Call(ctx, addr, req, resp)
	w.met.mc.client.observeMasterCall(req.Op(), time.Since(start), err, time.Now())
	return err
}

// heartbeatTimeout bounds one heartbeat call: five heartbeat intervals (at least 1 s), and
// once a master has said the cluster's client_ttl (HeartbeatResponse.ClientTTL), at most a
// quarter of it. A worker whose leader's host goes silent spends one heartbeat interval and
// one timeout noticing, then looks for the new leader (the silent one last: controlLoop);
// that leader marks it dead client_ttl after its election unless it registers, so the
// timeout must leave room inside client_ttl for both (with 5 s and a 3 s client_ttl, every
// worker was dead after a failover).
func (w *Worker) heartbeatTimeout() time.Duration {
	d := max(5*w.cfg.HeartbeatInterval, time.Second)
	if ttl := time.Duration(w.clientTTL.Load()); ttl > 0 {
		d = min(d, max(ttl/4, minHeartbeatTimeout))
	}
	return d
}

// heartbeatRequest is the worker's heartbeat: per tier, the arena's bytes in use (what
// placement needs) and the object counts; an object with a copy in both tiers counts in
// both. Without a store the NVMe figures are 0. stats adds the cumulative counters: only the
// control loop's heartbeats carry them, one at a time, since the master sums their increments
// (an older snapshot arriving after a newer one, as a concurrent drop fetch could, would read
// as a restarted worker and be counted again).
func (w *Worker) heartbeatRequest(stats bool) *transfer.HeartbeatRequest {
	m := w.eng.Metrics()
	req := &transfer.HeartbeatRequest{WorkerID: w.id, DRAMUsed: m.ArenaUsedBytes, DRAMObjects: m.DRAM.Objects,
		HasNVMeObjects: true, HasLeaving: true}
	if stats {
		req.HasStats, req.Stats = true, w.heartbeatStats(m)
		req.AskClientTTL = true
		req.AskSettled = true // reads from kept lookups (vouch.go)
	}
	if w.store != nil {
		req.NVMeUsed, req.NVMeObjects = m.NVMe.Bytes, m.NVMe.Objects
	}
	return req
}

// maxCatchUpBeats bounds the heartbeats heartbeat sends in a row while the leader owes
// more drops than one answer carries (lifecycle.Config.MaxDropsPerHeartbeat, 4,096: 64 beats
// bring 262,144), so a flood of removals cannot hold the control loop from its other duties.
const maxCatchUpBeats = 64

// heartbeat sends one heartbeat to addr and applies the reply. While an answer says more drops
// are owed (owed from heartbeatDrops: a large removal), it sends the next one soon rather than
// an interval later: the bytes are let go sooner, and the worker's answers are settled again
// (vouch.go), so reads from kept lookups are served again. Paced: before each next beat it
// waits three times as long as the last one took, its drops applied, so the control loop
// takes at most a quarter of a core from the reads; when that wait would reach the interval
// the regular beat brings the rest. Drops of DRAM objects are quick (a large removal is caught
// up in tens of ms); a drop of an object on NVMe deletes its index entry (tens of µs each:
// 49,000 back to back halved the gets beside them, one wait as long as the beat still cost
// them a fifth). The beats go from this loop, in order, as the stats sections they carry
// must (heartbeatRequest).
func (w *Worker) heartbeat(addr string) error {
	var err error
	for i := 0; i < maxCatchUpBeats; i++ {
		start := time.Now()
		var owed bool
		if _, owed, err = w.heartbeatDrops(addr, true); err != nil || !owed {
			break
		}
		wait := 3 * time.Since(start)
		if wait >= w.cfg.HeartbeatInterval {
			break
		}
		select {
		case <-w.stop:
			return err
		case <-time.After(wait): // NB: since Go 1.23 an unfired timer is collected
		}
	}
	if err == nil && w.beats.Add(1)%tenantSharesEvery == 1 {
		w.refreshTenantShares(addr)
	}
	return err
}

// heartbeatDrops is one heartbeat (with the stats section when stats is set); it returns how
// many drops the reply carried, and owed: the reply carried drops and was not settled, so the
// leader may owe more than one reply carries (or queued some since; a master built before
// Settled answers so to every reply that carries drops, which costs one more beat).
func (w *Worker) heartbeatDrops(addr string, stats bool) (n int, owed bool, err error) {
	if addr == "" {
		return 0, false, fmt.Errorf("%w: no leader", base.ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(w.ctx, w.heartbeatTimeout())
	defer cancel()
	resp := &transfer.HeartbeatResponse{}
	fetch := !stats // an early drop fetch (worker_drop.go)
	if fetch {
		w.vouch.fetchStarted()
	}
	sent := w.now()
	err = w.callMaster(ctx, addr, w.heartbeatRequest(stats), resp)
	if lose := w.cfg.Test.LoseHeartbeatAnswer; err == nil && lose != nil && lose(resp.Drop) {
		err = fmt.Errorf("%w: heartbeat answer lost (test hook)", base.ErrUnavailable)
	}
	if err != nil {
		// Its answer may have been sent, and its drops are then lost: no vouching until a
		// registration reconciles them (the control loop registers after its own failures).
		w.vouch.failed(fetch)
		if fetch {
			w.reregister.Store(true)
		}
		return 0, false, err
	}
	w.applyDrops(resp.Drop)
	if resp.Reregister {
		w.reregister.Store(true)
	}
	w.vouch.answered(fetch, resp.Settled, resp.Reregister, sent, vouchWindow(w.cfg.HeartbeatInterval))
	if resp.ClientTTL > 0 {
		w.clientTTL.Store(int64(resp.ClientTTL))
	}
	return len(resp.Drop), len(resp.Drop) > 0 && !resp.Settled && !resp.Reregister, nil
}

// announceLeaving sends the final heartbeat of a graceful shutdown, with Leaving set, to the
// leader the control loop last talked to (following NOT_LEADER redirects), so the leader
// keeps this worker and its replicas for its restart grace instead of ClientTTL. It must run
// after the control loop has stopped: a later heartbeat or registration from this process
// would be taken as the worker being back. Bounded by ctx and one heartbeat timeout; the
// result is only logged (without it the worker is marked dead soon after its attached
// connection closes: the master's client_disconnect_grace).
func (w *Worker) announceLeaving(ctx context.Context) {
	if addr, _ := w.leader.Load().(string); addr == "" || w.cfg.Test.NoLeavingBeat || w.cfg.Ephemeral {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, w.heartbeatTimeout())
	defer cancel()
	req := w.heartbeatRequest(true)
	req.Leaving, req.HasLeaving = true, true
	resp := &transfer.HeartbeatResponse{}
	addr, err := w.callLeader(ctx, req, resp)
	if err != nil {
		w.log.Warn("could not tell the leader this worker is restarting; it will be marked dead soon after its connection closes",
			"err", err)
		return
	}
	// The tier is still open: drops owed are applied now rather than at the next
	// registration's reconciliation.
	w.applyDrops(resp.Drop)
	w.log.Info("told the leader this worker is leaving to restart", "leader", addr)
}

// sweepLoop drops pending writes never committed within PendingWriteTimeout and ends
// shared-memory leases held past ShmLeaseTTL (docs/threads.md: "pending-write sweeper").
func (w *Worker) sweepLoop() {
	defer w.loops.Done()
	every := min(time.Second, max(w.cfg.PendingWriteTimeout/4, 10*time.Millisecond))
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		now := w.now()
		abort, keys := w.pend.expire(now)
		for _, p := range abort {
			p.w.Abort()
		}
		if n := w.shm.expire(now); n > 0 {
			w.log.Warn("ended shared-memory leases never released", "count", n, "ttl", w.cfg.ShmLeaseTTL)
		}
		if len(keys) > 0 {
			first := slices.MinFunc(keys, func(a, b pendKey) int { return strings.Compare(a.key, b.key) })
			w.log.Info("dropped writes never committed", "count", len(keys), "first_key", first.key, "timeout", w.cfg.PendingWriteTimeout)
		}
	}
}
