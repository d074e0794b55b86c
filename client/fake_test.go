package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// fakeCluster is an in-memory stand-in for masters and workers behind the rpc interface: it
// answers like the real services (NOT_LEADER redirects, typed errors, versions, checksums)
// so the client's logic can be tested without the server package. Messages go through the
// wire codec (Marshal/Unmarshal) so shapes are checked too.
type fakeCluster struct {
	mu       sync.Mutex // protects everything below
	masters  []string
	leader   int // index into masters; -1: no leader
	down     map[string]bool
	workers  map[string]*fakeWorker // by address
	wids     []string               // worker addresses in placement order
	objects  map[string]fakeObject
	pending  map[string]base.Version
	version  base.Version
	listPage int
	calls    map[transfer.Op]int
	// lastStart and lastWrite are the last PutStart and Write requests seen.
	lastStart transfer.PutStartRequest
	lastWrite transfer.WriteRequest
	// failWrites names a worker whose Writes fail with a server error.
	failWrites string
	// dropFirstPutEndReply makes the next PutEnd commit and then fail like a broken
	// connection, as when a leader dies after committing.
	dropFirstPutEndReply bool
	// dropFirstBatchPutEndReply does the same for the next BatchPutEnd.
	dropFirstBatchPutEndReply bool
	// failPutEnd refuses the PutEnd (or BatchPutEnd item) of these keys with the error.
	failPutEnd map[string]error
	// leftBeforeCommit refuses this many PutEnds (or BatchPutEnd items) of each key with
	// SEGMENT_NOT_FOUND, as the leader does when a placed worker left after the write.
	leftBeforeCommit map[string]int
	// holds stops the next call of an op until the test releases it (see hold).
	holds map[transfer.Op]*heldCall
	// waiters holds the channels reached returned, closed when calls[op] gets to n.
	waiters []callsReached
}

type callsReached struct {
	op   transfer.Op
	n    int
	done chan struct{}
}

// heldCall stops one call: arrived is closed when the call reaches the fake, which then
// waits for release to be closed before serving it.
type heldCall struct{ arrived, release chan struct{} }

// hold makes the next call of op wait (before it is served) until the returned release is
// called; the returned arrived channel is closed when the call is waiting.
func (f *fakeCluster) hold(op transfer.Op) (arrived <-chan struct{}, release func()) {
	h := &heldCall{arrived: make(chan struct{}), release: make(chan struct{})}
	f.mu.Lock()
	if f.holds == nil {
		f.holds = map[transfer.Op]*heldCall{}
	}
	f.holds[op] = h
	f.mu.Unlock()
	return h.arrived, func() { close(h.release) }
}

type fakeObject struct {
	tokens   int64
	model    string
	version  base.Version
	size     int64
	checksum uint64
	replicas []base.WorkerID
}

type fakeWorker struct {
	id base.WorkerID
	// bootID, when set, is the boot id ShmOpen answers (else ShmOpen is not supported, as
	// from a worker whose arena is private).
	bootID string
	reads  int // Reads served
	// staleByRef is the number of reads with ReadRequest.Verifies still to answer with a
	// flipped byte, as a worker whose by-reference send raced a reuse of the range does.
	staleByRef int
	verifies   []bool // ReadRequest.Verifies of each read, in order
	cached     []bool // ReadRequest.Cached of each read, in order
	// refuseCached answers reads with ReadRequest.Cached INVALID_VERSION, as a worker that
	// has not heard from the leader lately does.
	refuseCached bool
	// noCachedFlag answers reads with ReadRequest.Cached INVALID_PARAMS, as a worker built
	// before the flag does.
	noCachedFlag bool

	pending map[string][]byte // key@version -> bytes
	data    map[string]fakeData
}

type fakeData struct {
	version base.Version
	b       []byte
}

var errConnRefused = errors.New("dial tcp: connection refused")

func newFakeCluster(nMasters, nWorkers int) *fakeCluster {
	f := &fakeCluster{leader: 0, down: map[string]bool{}, workers: map[string]*fakeWorker{},
		objects: map[string]fakeObject{}, pending: map[string]base.Version{}, listPage: 2, calls: map[transfer.Op]int{}}
	for i := range nMasters {
		f.masters = append(f.masters, fmt.Sprintf("10.0.0.%d:50051", i+1))
	}
	for i := range nWorkers {
		addr := fmt.Sprintf("10.0.1.%d:12300", i+1)
		f.workers[addr] = &fakeWorker{id: base.WorkerID(fmt.Sprintf("w%d", i+1)), pending: map[string][]byte{}, data: map[string]fakeData{}}
		f.wids = append(f.wids, addr)
	}
	return f
}

func (f *fakeCluster) Close() error { return nil }

func (f *fakeCluster) Call(ctx context.Context, addr string, req, resp transfer.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	if h := f.holds[req.Op()]; h != nil {
		delete(f.holds, req.Op())
		f.mu.Unlock()
		close(h.arrived)
		<-h.release
		f.mu.Lock()
	}
	out, err := f.callLocked(addr, req)
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if out == nil {
		out = transfer.NewEmpty(req.Op())
	}
	_, err = transfer.UnmarshalResponse(req.Op(), transfer.Marshal(out), resp)
	return err
}

func codeErr(err error, format string, args ...any) error {
	return base.NewCodeError(base.CodeOf(err), fmt.Sprintf(format, args...))
}

// callLocked serves one call. REQUIRES: f.mu.
func (f *fakeCluster) callLocked(addr string, req transfer.Message) (transfer.Message, error) {
	if f.down[addr] {
		return nil, errConnRefused
	}
	f.countLocked(req.Op())
	if w, ok := f.workers[addr]; ok {
		return f.workerCallLocked(w, req)
	}
	i := slices.Index(f.masters, addr)
	if i < 0 {
		return nil, errConnRefused
	}
	if req.Op() == transfer.OpPing {
		return nil, nil
	}
	if i != f.leader {
		if f.leader < 0 {
			return nil, &transfer.NotLeaderError{}
		}
		return nil, &transfer.NotLeaderError{LeaderID: fmt.Sprintf("m%d", f.leader+1), LeaderAddr: f.masters[f.leader]}
	}
	switch r := req.(type) {
	case *transfer.PutStartRequest:
		return f.putStartLocked(r)
	case *transfer.PutEndRequest:
		if err := f.putEndLocked(r); err != nil {
			return nil, err
		}
		if f.dropFirstPutEndReply {
			f.dropFirstPutEndReply = false
			f.leader = (f.leader + 1) % len(f.masters) // the old leader is gone; a new one knows the object
			return nil, errors.New("read tcp: connection reset by peer")
		}
		return nil, nil
	case *transfer.PutRevokeRequest:
		delete(f.pending, r.Key)
		return nil, nil
	case *transfer.LookupRequest:
		o, ok := f.objects[r.Key]
		if !ok {
			return nil, codeErr(base.ErrObjectNotFound, "object %q not found", r.Key)
		}
		lr := &transfer.LookupResponse{ObjectMeta: base.ObjectMeta{Version: o.version, Size: o.size, Checksum: o.checksum}}
		for _, a := range f.wids {
			if slices.Contains(o.replicas, f.workers[a].id) {
				lr.Replicas = append(lr.Replicas, base.Placement{WorkerID: f.workers[a].id, Address: a})
			}
		}
		return lr, nil
	case *transfer.ExistsRequest:
		_, ok := f.objects[r.Key]
		return &transfer.ExistsResponse{Exists: ok}, nil
	case *transfer.RemoveRequest:
		if _, ok := f.objects[r.Key]; !ok {
			return nil, codeErr(base.ErrObjectNotFound, "object %q not found", r.Key)
		}
		delete(f.objects, r.Key)
		return nil, nil
	case *transfer.RemoveByRegexRequest:
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return nil, codeErr(base.ErrInvalidParams, "bad regex")
		}
		n := int64(0)
		for k := range f.objects {
			if re.MatchString(k) {
				delete(f.objects, k)
				n++
			}
		}
		return transfer.NewCountResponse(transfer.OpRemoveByRegex, n), nil
	case *transfer.Empty:
		switch r.Op() {
		case transfer.OpRemoveAll:
			n := int64(len(f.objects))
			clear(f.objects)
			return transfer.NewCountResponse(transfer.OpRemoveAll, n), nil
		case transfer.OpStatus:
			st := map[string]any{"leader": fmt.Sprintf("m%d", f.leader+1), "keys": len(f.objects)}
			b, _ := json.Marshal(st)
			return &transfer.StatusResponse{JSON: b}, nil
		}
	case *transfer.ListRequest:
		var keys []string
		for k := range f.objects {
			if strings.HasPrefix(k, r.Prefix) && k > r.Cursor {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		resp := &transfer.ListResponse{}
		for _, k := range keys {
			if len(resp.Items) == f.listPage {
				resp.NextCursor = resp.Items[len(resp.Items)-1].Key
				break
			}
			resp.Items = append(resp.Items, transfer.ListItem{Key: k, Size: f.objects[k].size})
		}
		return resp, nil
	case *transfer.BatchPutStartRequest:
		resp := &transfer.BatchPutStartResponse{}
		for i := range r.Items {
			pl, err := f.putStartLocked(&r.Items[i])
			it := transfer.PutStartResult{Err: transfer.ItemErrorOf(err)}
			if err == nil {
				it.PutStartResponse = *pl
			}
			resp.Items = append(resp.Items, it)
		}
		return resp, nil
	case *transfer.BatchPutEndRequest:
		var items []transfer.ItemError
		for i := range r.Items {
			items = append(items, transfer.ItemErrorOf(f.putEndLocked(&r.Items[i])))
		}
		if f.dropFirstBatchPutEndReply {
			f.dropFirstBatchPutEndReply = false
			f.leader = (f.leader + 1) % len(f.masters)
			return nil, errors.New("read tcp: connection reset by peer")
		}
		return transfer.NewBatchResponse(transfer.OpBatchPutEnd, items), nil
	case *transfer.BatchLookupRequest:
		resp := &transfer.BatchLookupResponse{}
		for _, k := range r.Keys {
			lr, err := f.callLocked(addr, &transfer.LookupRequest{Key: k})
			it := transfer.LookupResult{Err: transfer.ItemErrorOf(err)}
			if err == nil {
				it.LookupResponse = *lr.(*transfer.LookupResponse)
			}
			resp.Items = append(resp.Items, it)
		}
		return resp, nil
	case *transfer.BatchExistsRequest:
		resp := &transfer.BatchExistsResponse{}
		for _, k := range r.Keys {
			_, ok := f.objects[k]
			resp.Exists = append(resp.Exists, ok)
		}
		return resp, nil
	case *transfer.BatchRemoveRequest:
		var items []transfer.ItemError
		for _, k := range r.Keys {
			_, err := f.callLocked(addr, &transfer.RemoveRequest{Key: k})
			items = append(items, transfer.ItemErrorOf(err))
		}
		return transfer.NewBatchResponse(transfer.OpBatchRemove, items), nil
	}
	return nil, codeErr(base.ErrNotSupported, "fake: %s not served", req.Op())
}

func (f *fakeCluster) putStartLocked(r *transfer.PutStartRequest) (*transfer.PutStartResponse, error) {
	f.lastStart = *r
	if _, ok := f.objects[r.Key]; ok && !r.Config.Upsert {
		return nil, codeErr(base.ErrObjectAlreadyExists, "object %q already exists", r.Key)
	}
	n := max(int(r.Config.Replicas), 1)
	var live []string
	for _, a := range f.wids {
		if !f.down[a] && !slices.Contains(r.Exclude, f.workers[a].id) {
			live = append(live, a)
		}
	}
	if len(r.Exclude) > 0 && n > len(live) { // as the master (lifecycle.PlaceExcluding)
		return nil, codeErr(base.ErrNoSpace, "no worker with room left after excluding %v", r.Exclude)
	}
	if len(live) == 0 { // as the master: a cluster without a live worker is starting
		return nil, codeErr(base.ErrUnavailable, "%d replicas asked, no worker is alive yet", n)
	}
	if n > len(live) {
		return nil, codeErr(base.ErrNoSpace, "%d replicas asked, %d workers alive", n, len(live))
	}
	f.version++
	f.pending[r.Key] = f.version
	resp := &transfer.PutStartResponse{Version: f.version}
	for _, a := range live[:n] {
		resp.Replicas = append(resp.Replicas, base.Placement{WorkerID: f.workers[a].id, Address: a})
	}
	return resp, nil
}

func (f *fakeCluster) putEndLocked(r *transfer.PutEndRequest) error {
	if err := f.failPutEnd[r.Key]; err != nil {
		return err
	}
	if f.leftBeforeCommit[r.Key] > 0 {
		f.leftBeforeCommit[r.Key]--
		delete(f.pending, r.Key)
		return codeErr(base.ErrSegmentNotFound, "put %q: a replica's worker is not active", r.Key)
	}
	if _, ok := f.objects[r.Key]; ok && !r.Config.Upsert {
		return codeErr(base.ErrObjectAlreadyExists, "object %q already exists", r.Key)
	}
	if f.pending[r.Key] != r.Version {
		return codeErr(base.ErrInvalidVersion, "no pending put of %q at %d", r.Key, r.Version)
	}
	delete(f.pending, r.Key)
	f.objects[r.Key] = fakeObject{version: r.Version, size: r.Size, checksum: r.Checksum, replicas: r.Replicas,
		tokens: r.Tokens, model: r.Model}
	return nil
}

func (f *fakeCluster) workerCallLocked(w *fakeWorker, req transfer.Message) (transfer.Message, error) {
	switch r := req.(type) {
	case *transfer.Empty:
		if r.Op() == transfer.OpShmOpen {
			if w.bootID == "" {
				return nil, codeErr(base.ErrNotSupported, "arena is private")
			}
			// Nothing a client could map: the client learns the host and reads over TCP.
			return &transfer.ShmOpenResponse{BootID: w.bootID}, nil
		}
		return nil, nil
	case *transfer.CommitRequest:
		return nil, w.commitLocked(r.Key, r.Version, r.Checksum)
	}
	return nil, codeErr(base.ErrNotSupported, "fake worker: %s", req.Op())
}

func pendingKey(k string, v base.Version) string { return fmt.Sprintf("%s@%d", k, v) }

func (w *fakeWorker) commitLocked(key string, v base.Version, sum uint64) error {
	b, ok := w.pending[pendingKey(key, v)]
	if !ok {
		return codeErr(base.ErrObjectNotFound, "nothing pending for %q", key)
	}
	if sum != 0 && base.Checksum(b) != sum {
		return codeErr(base.ErrCorruption, "checksum mismatch")
	}
	delete(w.pending, pendingKey(key, v))
	w.data[key] = fakeData{version: v, b: b}
	return nil
}

func (f *fakeCluster) Write(ctx context.Context, addr string, req *transfer.WriteRequest, p []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.workers[addr]
	if w == nil || f.down[addr] {
		return errConnRefused
	}
	f.countLocked(transfer.OpWrite)
	f.lastWrite = *req
	if addr == f.failWrites {
		return codeErr(base.ErrNoSpace, "arena full")
	}
	// Like transfer.Client.Write: the whole object, committed.
	w.pending[pendingKey(req.Key, req.Version)] = append([]byte(nil), p...)
	return w.commitLocked(req.Key, req.Version, req.Checksum)
}

func (f *fakeCluster) Read(ctx context.Context, addr string, req *transfer.ReadRequest, dst []byte, sum bool) (*transfer.ReadResponse, int, uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.workers[addr]
	if w == nil || f.down[addr] {
		return nil, 0, 0, errConnRefused
	}
	f.countLocked(transfer.OpRead)
	w.reads++
	w.cached = append(w.cached, req.Cached)
	if req.Cached && w.refuseCached {
		return nil, 0, 0, codeErr(base.ErrInvalidVersion, "not heard from the leader lately")
	}
	if req.Cached && w.noCachedFlag {
		return nil, 0, 0, codeErr(base.ErrInvalidParams, "trailing bytes in a read request")
	}
	d, ok := w.data[req.Key]
	if !ok {
		return nil, 0, 0, codeErr(base.ErrObjectNotFound, "not here")
	}
	if req.Version != 0 && d.version != req.Version {
		return nil, 0, 0, codeErr(base.ErrInvalidVersion, "have %d", d.version)
	}
	resp := transfer.NewReadResponse(transfer.OpRead)
	resp.Version, resp.Size, resp.Checksum = d.version, int64(len(d.b)), base.Checksum(d.b)
	if len(dst) < len(d.b) {
		return nil, 0, 0, codeErr(base.ErrInvalidParams, "short buffer")
	}
	n := copy(dst, d.b)
	w.verifies = append(w.verifies, req.Verifies)
	if req.Verifies && w.staleByRef > 0 && n > 0 {
		w.staleByRef--
		dst[0] ^= 0xff
	}
	var digest uint64
	if sum {
		digest = base.Checksum(dst[:n])
	}
	return resp, n, digest, nil
}

// corrupt flips a byte of key's copy on the worker at addr.
func (f *fakeCluster) corrupt(addr, key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.workers[addr].data[key].b[0] ^= 0xff
}

func (f *fakeCluster) setDown(addr string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[addr] = down
}

func (f *fakeCluster) setLeader(i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leader = i
}

// countLocked counts a call of op and closes the reached channels it completes.
// REQUIRES: f.mu.
func (f *fakeCluster) countLocked(op transfer.Op) {
	f.calls[op]++
	f.waiters = slices.DeleteFunc(f.waiters, func(r callsReached) bool {
		if r.op == op && f.calls[op] >= r.n {
			close(r.done)
			return true
		}
		return false
	})
}

// reached returns a channel closed once the fake has served n calls of op in all.
func (f *fakeCluster) reached(op transfer.Op, n int) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := callsReached{op: op, n: n, done: make(chan struct{})}
	if f.calls[op] >= n {
		close(r.done)
	} else {
		f.waiters = append(f.waiters, r)
	}
	return r.done
}

func (f *fakeCluster) count(op transfer.Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}
