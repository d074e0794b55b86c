package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// lookup asks the leader where key lives (a linearizable read).
func (c *Client) lookup(ctx context.Context, key string) (*transfer.LookupResponse, error) {
	var lr transfer.LookupResponse
	if err := c.masterCall(ctx, &transfer.LookupRequest{Key: key}, &lr, nil); err != nil {
		return nil, err
	}
	if len(lr.Replicas) == 0 {
		return nil, fmt.Errorf("%w: %q has no live replica", base.ErrObjectNotFound, key)
	}
	return &lr, nil
}

// Get returns a copy of the object's bytes.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	key, err := c.storedKey(key)
	if err != nil {
		return nil, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var buf []byte
	_, err = c.getInto(ctx, key, func(size int64) ([]byte, error) {
		buf = make([]byte, size)
		return buf, nil
	})
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// GetInto reads the object into buf and returns its size. buf must hold the whole object;
// a short buffer fails with an error wrapping base.ErrInvalidParams (use Size first).
func (c *Client) GetInto(ctx context.Context, key string, buf []byte) (int, error) {
	key, err := c.storedKey(key)
	if err != nil {
		return 0, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	return c.getInto(ctx, key, func(size int64) ([]byte, error) {
		if int64(len(buf)) < size {
			return nil, fmt.Errorf("%w: get %q: buffer of %d bytes for an object of %d", base.ErrInvalidParams, key, len(buf), size)
		}
		return buf[:size], nil
	})
}

// GetIntoNoWait reads the object into buf only if that needs no network round trip and no
// wait: its lookup is cached and its replica on this host can be copied from shared memory
// without a pin (client/shm.go readShm), verified as any get. It returns the size and true
// when buf holds the object; false when it read nothing usable (buf's bytes are then
// unspecified) and the caller should call GetInto. It never blocks on the network, so a
// caller on a thread that is costly to wake (a C thread in a cgo export) can try it first.
func (c *Client) GetIntoNoWait(key string, buf []byte) (int, bool) {
	stored, n, ok, due := c.noWait(key, buf)
	if due {
		c.refreshLookup(stored) // in the background: a key copied this way keeps its entry
	}
	return n, ok
}

// BatchGetIntoNoWait is GetIntoNoWait of each keys[i] into bufs[i] (len(bufs) == len(keys)):
// ok[i] says bufs[i] holds sizes[i] bytes of the object. The lookup refreshes it asks for
// are queued together, so they leave in one call (as a batch get's do).
func (c *Client) BatchGetIntoNoWait(keys []string, bufs [][]byte) (sizes []int, ok []bool) {
	sizes, ok = make([]int, len(keys)), make([]bool, len(keys))
	var refresh []string
	for i, k := range keys {
		stored, n, copied, due := c.noWait(k, bufs[i])
		sizes[i], ok[i] = n, copied
		if due {
			refresh = append(refresh, stored)
		}
	}
	c.refreshLookup(refresh...)
	return sizes, ok
}

// noWait is GetIntoNoWait without the refresh: due says that key's cached lookup is due for
// one (getRefresh marked it) and the caller queues stored, key's stored key.
func (c *Client) noWait(key string, buf []byte) (stored string, n int, ok, due bool) {
	if !c.noWaitOn() {
		return "", 0, false, false
	}
	stored, err := c.storedKey(key)
	if err != nil {
		return "", 0, false, false
	}
	lr, hit, due := c.lookups.getRefresh(stored)
	if !hit {
		return stored, 0, false, due
	}
	n, ok = c.copyNoWait(stored, lr, func(size int64) ([]byte, error) {
		if int64(len(buf)) < size {
			return nil, base.ErrInvalidParams // GetInto reports it
		}
		return buf[:size], nil
	})
	return stored, n, ok, due
}

// noWaitOn says whether a get may copy with no call at all: only through shared memory,
// and only when it verifies what it copies.
func (c *Client) noWaitOn() bool {
	return !c.cfg.DisableSharedMemory && !c.cfg.SkipChecksumVerify
}

// copyNoWait is the no-wait gets' copy, given key's cached lookup lr (the caller asked the cache,
// and queued a refresh if it was due).
func (c *Client) copyNoWait(key string, lr *transfer.LookupResponse, alloc Alloc) (int, bool) {
	if !c.noWaitOn() || !c.shm.known(base.KeyVersion{Key: key, Version: lr.Version}) {
		return 0, false
	}
	buf, err := alloc(lr.Size)
	if err != nil || int64(len(buf)) != lr.Size {
		return 0, false
	}
	for _, r := range orderReplicas(lr.Replicas, c.replicaRank) {
		if c.readShmNoWait(key, r, lr, buf) {
			c.reads.shm.Add(1)
			return len(buf), true
		}
	}
	return 0, false
}

// getInto looks the key up (in the lookup cache, else at the leader, coalesced with
// concurrent misses: getcoalesce.go) and reads it from the best replica, verifying the
// checksum and failing over to the next replica on any error. A cached lookup that fails in any way is dropped and the get starts over with a fresh one.
// When every replica of a fresh lookup says the object is gone or has another version (it was
// replaced or removed since the lookup), it looks up once more.
func (c *Client) getInto(ctx context.Context, key string, dst func(size int64) ([]byte, error)) (int, error) {
	lr, ok, refresh := c.lookups.getRefresh(key)
	kept := false
	if !ok {
		lr, ok = c.keptLookup(key)
		kept = ok
	}
	var kf *keptFailure // a failed read from a kept lookup, for getLookedUp
	if ok {
		if refresh {
			c.refreshLookup(key) // in the background, beside this read
		}
		buf, err := dst(lr.Size)
		if err == nil {
			var n int
			if n, err = c.readReplicas(ctx, key, lr, buf, kept); err == nil {
				return n, nil
			}
		}
		c.lookups.drop(key)
		if ctx.Err() != nil {
			return 0, fmt.Errorf("get %q: %w", key, err)
		}
		c.log.Debug("client: get with a cached lookup failed; looking up again", "key", key, "err", err)
		if kept {
			kf = &keptFailure{lr, err}
		}
	}
	return c.getLookedUp(ctx, key, dst, kf)
}

// keptFailure is a read from a kept lookup that failed, for keptRefused.
type keptFailure struct {
	lr  *transfer.LookupResponse
	err error
}

// getLookedUp is getInto with a fresh lookup. kf is the failed read from a kept lookup that
// led here, if one did (keptRefused learns from the fresh lookup why it failed).
func (c *Client) getLookedUp(ctx context.Context, key string, dst func(size int64) ([]byte, error), kf *keptFailure) (int, error) {
	for attempt := 0; ; attempt++ {
		tok, sent := c.lookups.token(key), time.Now()
		lr, err := c.lookupCoalesced(ctx, key)
		if kf != nil {
			c.keptRefused(kf.lr, kf.err, lr)
			kf = nil
		}
		if err != nil {
			return 0, fmt.Errorf("get %q: %w", key, err)
		}
		buf, err := dst(lr.Size)
		if err != nil {
			return 0, err
		}
		n, err := c.readReplicas(ctx, key, lr, buf, false)
		if err == nil {
			c.lookups.put(key, lr, tok, sent)
			return n, nil
		}
		stale := errors.Is(err, base.ErrObjectNotFound) || errors.Is(err, base.ErrInvalidVersion)
		if !stale || attempt > 0 || ctx.Err() != nil {
			return 0, fmt.Errorf("get %q: %w", key, err)
		}
	}
}

// readReplicas tries the replicas in preference order (orderReplicas), each within its share
// of the time left (readAttempt). When no replica could be read because their workers are
// unreachable or no longer hold the object, the error wraps base.ErrObjectNotFound: to the
// caller the object is gone (it is, until a worker returns). kept says lr is a kept lookup
// (lookupCache.getKept): it is read over TCP only, asking the worker to vouch for it
// (ReadRequest.Cached).
func (c *Client) readReplicas(ctx context.Context, key string, lr *transfer.LookupResponse, buf []byte, kept bool) (int, error) {
	var errs []error
	reps := orderReplicas(lr.Replicas, c.replicaRank)
	gone := true // every attempt so far failed as a missing replica would
	for n, r := range reps {
		actx, cancel := readAttempt(ctx, len(reps)-n)
		err := c.readOne(actx, key, r, lr, buf, kept)
		cancel()
		if err == nil {
			return len(buf), nil
		}
		errs = append(errs, fmt.Errorf("worker %s (%s): %w", r.WorkerID, r.Address, err))
		c.log.Debug("client: read failed, trying the next replica", "key", key, "worker", r.WorkerID, "err", err)
		if ctx.Err() != nil {
			return 0, errors.Join(errs...)
		}
		gone = gone && replicaGone(err)
	}
	if gone && len(errs) > 0 {
		return 0, fmt.Errorf("%w: no replica of %q could be read: %w", base.ErrObjectNotFound, key, errors.Join(errs...))
	}
	return 0, errors.Join(errs...)
}

// replicaGone reports whether a read failed as a replica that is not there fails: its worker
// unreachable (no answer, or UNAVAILABLE: shutting down) or without that version.
func replicaGone(err error) bool {
	return !isServerError(err) || errors.Is(err, base.ErrUnavailable) || errors.Is(err, base.ErrObjectNotFound) ||
		errors.Is(err, base.ErrInvalidVersion)
}

// readAttempt bounds the read of one replica when left replicas (this one included) remain
// to be tried: to its share of the time left, so a worker that hangs leaves time for the
// others. The last replica gets all the time left.
func readAttempt(ctx context.Context, left int) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok || left <= 1 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Until(d)/time.Duration(left))
}

// replicaRank ranks the worker at addr for reads: its distance (replicaLocal, replicaUnknown,
// replicaRemote) and this client's reads in flight from it.
func (c *Client) replicaRank(addr string) (replicaDistance, int64) {
	var d replicaDistance
	switch c.shm.host(addr) {
	case hostSame:
		d = replicaLocal
	case hostOther:
		d = replicaRemote
	default:
		// Not known by host identity (shared memory off on either side, or not asked yet):
		// an address of this host is local; anything else may be local and is tried before
		// the workers known to be elsewhere.
		d = replicaUnknown
		if isLocal(addr) {
			d = replicaLocal
		}
	}
	return d, c.readLoad(addr).Load()
}

// readLoad returns the counter of this client's reads in flight from addr.
func (c *Client) readLoad(addr string) *atomic.Int64 {
	if v, ok := c.loads.Load(addr); ok {
		return v.(*atomic.Int64)
	}
	v, _ := c.loads.LoadOrStore(addr, new(atomic.Int64))
	return v.(*atomic.Int64)
}

func (c *Client) readOne(ctx context.Context, key string, r base.Placement, lr *transfer.LookupResponse, buf []byte, kept bool) error {
	load := c.readLoad(r.Address)
	load.Add(1)
	defer load.Add(-1)
	// A kept lookup is not read through shared memory: the worker vouches for it on the TCP
	// read (and its shared arena's no-call copies would not ask it).
	if !c.cfg.DisableSharedMemory && !kept {
		if err := c.readShm(ctx, key, r, lr, buf); err != errShmFallback {
			if err == nil {
				c.reads.shm.Add(1)
			}
			return err
		}
	}
	if err := c.readTCP(ctx, key, r, lr, buf, kept); err != nil {
		return err
	}
	if kept {
		c.keptBackoff.served(r.Address)
	}
	c.reads.tcp.Add(1)
	return nil
}

// ReadStats counts the object reads a client completed, by path.
type ReadStats struct {
	// SharedMemory counts reads copied out of a worker's shared arena on this host.
	SharedMemory int64
	// SharedMemoryUnpinned counts the SharedMemory reads that needed no call to the worker
	// (an earlier pin's location, verified by checksum; client/shm.go readShm).
	SharedMemoryUnpinned int64
	// TCP counts reads transferred over TCP.
	TCP int64
	// TCPCopyRetries counts verified TCP reads that failed their checksum (or that a worker
	// without by-reference sends refused) and were read again by copy (Client.readTCP).
	TCPCopyRetries int64
}

// ReadStats returns how many reads took each path since Connect.
func (c *Client) ReadStats() ReadStats {
	return ReadStats{SharedMemory: c.reads.shm.Load(), SharedMemoryUnpinned: c.reads.unpinned.Load(), TCP: c.reads.tcp.Load(),
		TCPCopyRetries: c.reads.copyRetries.Load()}
}

// readTCP reads the object from the replica over TCP. A verifying client says so in the
// request (ReadRequest.Verifies), which lets the worker send the bytes by reference
// (sendfile from its arena): bytes rewritten in the arena after the send (the object removed
// and its range reused) would then reach this client. So a verifying read that fails its
// checksum is read once more without Verifies (by copy) before the replica counts as
// corrupt; so is one a worker built before the flag refused (INVALID_PARAMS).
func (c *Client) readTCP(ctx context.Context, key string, r base.Placement, lr *transfer.LookupResponse, buf []byte, kept bool) error {
	verify := !c.cfg.SkipChecksumVerify
	err := c.readTCPOnce(ctx, r.Address, &transfer.ReadRequest{Key: key, Version: lr.Version, Verifies: verify, Cached: kept}, lr, buf)
	if verify && (errors.Is(err, base.ErrCorruption) || errors.Is(err, base.ErrInvalidParams)) && ctx.Err() == nil {
		c.reads.copyRetries.Add(1)
		err = c.readTCPOnce(ctx, r.Address, &transfer.ReadRequest{Key: key, Version: lr.Version, Cached: kept}, lr, buf)
	}
	return err
}

// readTCPOnce is one read of readTCP, verified when req.Verifies.
func (c *Client) readTCPOnce(ctx context.Context, addr string, req *transfer.ReadRequest, lr *transfer.LookupResponse, buf []byte) error {
	verify := !c.cfg.SkipChecksumVerify
	resp, n, got, err := c.rpc.Read(ctx, addr, req, buf, verify)
	if err != nil {
		return err
	}
	switch {
	case resp.Version != lr.Version:
		return fmt.Errorf("%w: worker sent version %d, want %d", base.ErrInvalidVersion, resp.Version, lr.Version)
	case int64(n) != lr.Size || resp.Size != lr.Size:
		return fmt.Errorf("%w: worker sent %d of %d bytes", base.ErrCorruption, n, lr.Size)
	}
	if !verify {
		return nil
	}
	if got != lr.Checksum {
		return fmt.Errorf("%w: checksum %016x, want %016x", base.ErrCorruption, got, lr.Checksum)
	}
	return nil
}

// replicaDistance orders replicas by where their worker runs relative to this client.
type replicaDistance uint8

const (
	replicaLocal   replicaDistance = iota // same host: by boot id, else by address
	replicaUnknown                        // not known
	replicaRemote                         // another host, by boot id
)

// orderReplicas returns the replicas in read preference order: the nearest first (rank's
// distance: this host, then unknown, then other hosts), then the least loaded (rank's reads
// in flight from this client), ties in random order so equal replicas share the reads.
func orderReplicas(rs []base.Placement, rank func(addr string) (replicaDistance, int64)) []base.Placement {
	if len(rs) < 2 {
		return rs // nothing to choose (the common case of one replica): no allocation
	}
	type ranked struct {
		r    base.Placement
		d    replicaDistance
		load int64
	}
	out := make([]ranked, len(rs))
	for i, r := range rs {
		d, load := rank(r.Address)
		out[i] = ranked{r, d, load}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	slices.SortStableFunc(out, func(a, b ranked) int {
		if a.d != b.d {
			return int(a.d) - int(b.d)
		}
		return cmp.Compare(a.load, b.load)
	})
	res := make([]base.Placement, len(out))
	for i, o := range out {
		res[i] = o.r
	}
	return res
}

// localIPs are this host's interface addresses (read once).
var localIPs = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return m
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			m[n.IP.String()] = true
		}
	}
	return m
})

// isLocal reports whether addr names this host: localhost, a loopback address or one of
// this host's interface addresses.
func isLocal(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	if host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return true
	}
	return ip != nil && localIPs()[ip.String()]
}

// Exists reports whether key is committed.
func (c *Client) Exists(ctx context.Context, key string) (bool, error) {
	key, err := c.storedKey(key)
	if err != nil {
		return false, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	// With the lookup cache on, the answer also says where the object is, and a get that
	// follows goes straight to its worker (lookupcache.go, "Seeded entries").
	tok, sent := c.lookups.token(key), time.Now()
	var resp transfer.ExistsResponse
	if err := c.masterCall(ctx, &transfer.ExistsRequest{Key: key, Placements: c.lookups != nil}, &resp, nil); err != nil {
		return false, fmt.Errorf("exists %q: %w", key, err)
	}
	if lr := resp.Lookup; lr != nil && len(lr.Replicas) > 0 {
		lr.Key = key
		c.lookups.put(key, lr, tok, sent)
	}
	return resp.Exists, nil
}

// Size returns the object's size; base.ErrObjectNotFound when there is none.
func (c *Client) Size(ctx context.Context, key string) (int64, error) {
	key, err := c.storedKey(key)
	if err != nil {
		return 0, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var lr transfer.LookupResponse
	if err := c.masterCall(ctx, &transfer.LookupRequest{Key: key}, &lr, nil); err != nil {
		return 0, fmt.Errorf("size %q: %w", key, err)
	}
	return lr.Size, nil
}

// Remove removes the object; base.ErrObjectNotFound when there is none. Readers already
// reading it finish; the workers free the bytes after.
func (c *Client) Remove(ctx context.Context, key string) error {
	key, err := c.storedKey(key)
	if err != nil {
		return err
	}
	return c.remove(ctx, key)
}

// remove is Remove of a stored key.
func (c *Client) remove(ctx context.Context, key string) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var st attemptState
	defer c.lookups.drop(key)
	err := c.masterCall(ctx, &transfer.RemoveRequest{Key: key}, transfer.NewEmpty(transfer.OpRemove), &st)
	if err != nil && st.ambiguous && errors.Is(err, base.ErrObjectNotFound) {
		return nil // an earlier attempt removed it before its answer was lost
	}
	if err != nil {
		return fmt.Errorf("remove %q: %w", key, err)
	}
	return nil
}

// RemoveByRegex removes every object of the client's tenant whose key matches the RE2
// pattern re and returns how many it removed (tenant.go: other tenants' objects are never
// matched).
func (c *Client) RemoveByRegex(ctx context.Context, re string) (int64, error) {
	if _, err := regexp.Compile(re); err != nil {
		return 0, fmt.Errorf("%w: regex %q: %v", base.ErrInvalidParams, re, err)
	}
	if re == "" {
		re = "^" // matches every key, as the empty pattern does; "" means all to removeInTenant
	}
	return c.removeInTenant(ctx, re)
}

// RemoveAll removes every object of the client's tenant and returns how many it removed.
func (c *Client) RemoveAll(ctx context.Context) (int64, error) {
	return c.removeInTenant(ctx, "")
}

// KeyInfo is one entry of List.
type KeyInfo struct {
	Key  string
	Size int64
}

// maxListKeys bounds what List collects (use the prefix to narrow a larger listing).
const maxListKeys = 10_000_000

// List returns the committed keys of the client's tenant starting with prefix, in key order,
// with their sizes.
func (c *Client) List(ctx context.Context, prefix string) ([]KeyInfo, error) {
	if len(prefix) > base.MaxKeyLen {
		return nil, fmt.Errorf("%w: prefix is over %d bytes", base.ErrInvalidKey, base.MaxKeyLen)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var out []KeyInfo
	cursor := ""
	// The default tenant's listing also walks the other tenants' keys (their stored keys sort
	// first) and leaves them out.
	stored := base.TenantPrefix(c.cfg.TenantID) + prefix
	for {
		var resp transfer.ListResponse
		if err := c.masterCall(ctx, &transfer.ListRequest{Prefix: stored, Cursor: cursor}, &resp, nil); err != nil {
			return nil, fmt.Errorf("list %q: %w", prefix, err)
		}
		for _, it := range resp.Items {
			if k, ok := c.userKey(it.Key); ok {
				out = append(out, KeyInfo{Key: k, Size: it.Size})
			}
		}
		if resp.NextCursor == "" || resp.NextCursor == cursor {
			return out, nil
		}
		if len(out) > maxListKeys {
			return nil, fmt.Errorf("%w: list %q: over %d keys; narrow the prefix", base.ErrTooLarge, prefix, maxListKeys)
		}
		cursor = resp.NextCursor
	}
}
