package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// rpc is the part of transfer.Client this package uses. transferRPC adapts the real one;
// tests substitute fakes.
type rpc interface {
	// Call sends req to addr and decodes the OK response into resp. Errors the server
	// returned are *base.CodeError (or *transfer.NotLeaderError); anything else means the
	// call may or may not have reached the server.
	Call(ctx context.Context, addr string, req, resp transfer.Message) error
	// Write sends p as the whole object req describes and commits it on the worker
	// (striping a large p over several connections, then a Commit call).
	Write(ctx context.Context, addr string, req *transfer.WriteRequest, p []byte) error
	// Read reads the object (or range) req names into dst and returns the response, the
	// number of payload bytes read and, when sum is set, base.Checksum of those bytes
	// (computed as they arrive, see transfer.Client.ReadSum).
	Read(ctx context.Context, addr string, req *transfer.ReadRequest, dst []byte, sum bool) (*transfer.ReadResponse, int, uint64, error)
	Close() error
}

// Client talks to a mooncake-go cluster. It is safe for concurrent use; Close releases its
// connections.
type Client struct {
	cfg Config
	rpc rpc
	log interface {
		Debug(msg string, args ...any)
	}

	// lookups caches Lookup answers for gets; nil when Config.LookupCacheTTL is negative.
	lookups *lookupCache
	// shm maps the arenas of workers on this host (shm.go); unused with DisableSharedMemory.
	shm shmPeers
	// stage holds the staging areas of workers on this host, for puts (shmput.go); unused
	// with DisableSharedMemory.
	stage shmStagers
	// group coalesces concurrent puts' PutStart and PutEnd calls (put.go).
	group groupCommits
	// lookupB coalesces the lookups of gets that miss the cache and refreshes cached
	// lookups ahead of their expiry (getcoalesce.go).
	lookupB lookupBatches
	// loads counts this client's reads in flight per worker address (string ->
	// *atomic.Int64), the "least loaded" of orderReplicas.
	loads sync.Map
	// keptBackoff spaces reads from kept lookups to workers that refused to vouch (keptreads.go).
	keptBackoff keptBackoff
	// reads counts completed object reads by path (ReadStats).
	reads struct{ shm, unpinned, tcp, copyRetries atomic.Int64 }
	// sess holds the open put and get sessions (session.go).
	sess sessionTables

	mu struct {
		sync.Mutex // protects the fields below
		// masters lists every master address known: the configured ones, then those
		// learned from NOT_LEADER redirects. Never empty.
		masters []string
		// leader is the address that last answered as leader ("" unknown).
		leader string
	}
}

// Connect checks the configuration and reaches a master. It fails with an error wrapping
// base.ErrUnavailable when no master answers within cfg.DialTimeout each.
func Connect(ctx context.Context, cfg Config) (*Client, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r, err := newTransferRPC(cfg)
	if err != nil {
		return nil, err
	}
	c, err := connectWith(ctx, cfg, r)
	if err != nil {
		r.Close()
		return nil, err
	}
	return c, nil
}

// connectWith builds a client over r and pings the masters until one answers, for up to
// cfg.ConnectWait (one round when it is negative).
func connectWith(ctx context.Context, cfg Config, r rpc) (*Client, error) {
	c := &Client{cfg: cfg, rpc: r, log: cfg.Logger, lookups: newLookupCache(cfg.LookupCacheTTL, cfg.LookupCacheEntries)}
	c.mu.masters = slices.Clone(cfg.MasterAddresses)
	deadline := time.Now().Add(max(cfg.ConnectWait, 0))
	backoff := 20 * time.Millisecond
	for {
		var errs []error
		for _, addr := range cfg.MasterAddresses {
			pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
			err := r.Call(pctx, addr, transfer.NewEmpty(transfer.OpPing), transfer.NewEmpty(transfer.OpPing))
			cancel()
			if err == nil {
				c.mu.leader = addr // a guess; the first call corrects it
				return c, nil
			}
			if errors.Is(err, base.ErrClusterMismatch) || errors.Is(err, base.ErrProtocolVersion) {
				return nil, fmt.Errorf("master %s: %w", addr, err)
			}
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			if ctx.Err() != nil {
				break
			}
		}
		wait := backoff + rand.N(backoff/2+1)
		if ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return nil, fmt.Errorf("%w: no master reachable (waited %v for one to answer, dial timeout %v): %w",
				base.ErrUnavailable, max(cfg.ConnectWait, 0), cfg.DialTimeout, errors.Join(errs...))
		}
		c.log.Debug("client: no master answers yet, retrying", "masters", cfg.MasterAddresses, "err", errors.Join(errs...))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		backoff = min(2*backoff, cfg.MaxBackoff)
	}
}

// Close releases the client's connections. Calls in flight fail. Open put sessions are
// dropped (session.go): nothing of them becomes visible and their space is freed.
func (c *Client) Close() error {
	c.dropOpenSessions()
	c.closeLookups()
	c.shm.close()
	c.stage.close()
	return c.rpc.Close()
}

// withTimeout applies cfg.Timeout when ctx has no earlier deadline.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= c.cfg.Timeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.cfg.Timeout)
}

// attemptState records whether an earlier attempt of a master call failed in a way that
// leaves open whether the server applied it (a broken connection, a leader that died mid-call).
type attemptState struct{ ambiguous bool }

// masterCall sends req to the leader and decodes the answer into resp. It follows NOT_LEADER
// redirects and, when a master cannot be reached or has no leader, tries the other masters
// with a bounded exponential backoff until ctx ends. st (may be nil) learns whether an
// attempt failed ambiguously, so callers can resolve "already exists" / "not found" on retry.
func (c *Client) masterCall(ctx context.Context, req, resp transfer.Message, st *attemptState) error {
	backoff := 20 * time.Millisecond
	tried := 0 // attempts since the last backoff
	var lastErr error
	for {
		addr := c.pickMaster()
		err := c.rpc.Call(ctx, addr, req, resp)
		if err == nil {
			c.setLeader(addr)
			return nil
		}
		lastErr = err
		if ctx.Err() != nil {
			return fmt.Errorf("%w: gave up waiting for a leader and a live worker (last error from %s: %v)", ctx.Err(), addr, err)
		}
		var nl *transfer.NotLeaderError
		switch {
		case errors.As(err, &nl) && nl.LeaderAddr != "" && nl.LeaderAddr != addr:
			c.log.Debug("client: redirected to the leader", "from", addr, "leader", nl.LeaderID, "address", nl.LeaderAddr)
			c.learnLeader(nl.LeaderAddr)
		case !retryable(err):
			return err
		default:
			if !isServerError(err) {
				st.markAmbiguous()
			}
			c.log.Debug("client: master call failed, trying another master", "master", addr, "op", req.Op(), "err", err)
			c.nextMaster(addr)
		}
		tried++
		if tried < len(c.masterList())+1 {
			continue
		}
		// A whole round failed: wait before the next one (a new leader takes a moment).
		tried = 0
		t := time.NewTimer(backoff + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: gave up waiting for a leader and a live worker: %w", base.ErrUnavailable, lastErr)
		case <-t.C:
		}
		backoff = min(2*backoff, c.cfg.MaxBackoff)
	}
}

func (st *attemptState) markAmbiguous() {
	if st != nil {
		st.ambiguous = true
	}
}

// isServerError reports whether err came back from a server (so the call was refused as a
// whole and not applied), as opposed to a broken or refused connection.
func isServerError(err error) bool {
	var ce *base.CodeError
	var nl *transfer.NotLeaderError
	return errors.As(err, &ce) || errors.As(err, &nl)
}

// retryable reports whether another master (or a later attempt) may succeed.
func retryable(err error) bool {
	switch {
	case errors.Is(err, base.ErrNotLeader), errors.Is(err, base.ErrUnavailable), errors.Is(err, base.ErrTimeout):
		return true
	case errors.Is(err, base.ErrClusterMismatch), errors.Is(err, base.ErrProtocolVersion):
		return false
	case isServerError(err):
		return false
	}
	return true // a connection-level failure
}

func (c *Client) masterList() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.masters
}

// pickMaster returns the leader guess, else the first known master.
func (c *Client) pickMaster() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.leader != "" {
		return c.mu.leader
	}
	return c.mu.masters[0]
}

func (c *Client) setLeader(addr string) {
	c.mu.Lock()
	c.mu.leader = addr
	c.mu.Unlock()
}

// learnLeader records a leader address from a redirect, adding it to the known masters.
func (c *Client) learnLeader(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.leader = addr
	if !slices.Contains(c.mu.masters, addr) && len(c.mu.masters) < 64 {
		c.mu.masters = append(slices.Clone(c.mu.masters), addr)
	}
}

// nextMaster forgets failed as the leader and moves on to the master after it.
func (c *Client) nextMaster(failed string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.mu.masters, failed)
	c.mu.leader = c.mu.masters[(i+1)%len(c.mu.masters)]
}
