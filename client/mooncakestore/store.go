package mooncakestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
)

// ClientType is Mooncake's kind of client handle.
type ClientType int

// MOONCAKE_CLIENT_REAL is the only kind this package has; MOONCAKE_CLIENT_DUMMY (a client of a
// local mooncake_client service) is not supported. The names are Mooncake's, kept for
// programs written against its binding.
const (
	//lint:ignore ST1003 Mooncake's name.
	MOONCAKE_CLIENT_REAL ClientType = 0 //nolint:revive // Mooncake's names
	//lint:ignore ST1003 Mooncake's name.
	MOONCAKE_CLIENT_DUMMY ClientType = 1 //nolint:revive // Mooncake's names
)

// defaultSoftPinTTL is how long WithSoftPin keeps an object from eviction: Mooncake's default
// default_kv_soft_pin_ttl (30 minutes).
const defaultSoftPinTTL = 30 * time.Minute

// batchParallelism bounds the gets of one BatchGetInto and the puts of one BatchPutFrom in
// flight at once.
const batchParallelism = 8

var errNotSetUp = errors.New("Setup has not been called")

// setupWait bounds how long Setup waits for the masters to have a leader (a cluster that is
// starting elects one within a second or two).
const setupWait = 30 * time.Second

// waitLeader polls the status until a leader is known, for up to d.
func waitLeader(c *client.Client, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		st, err := c.Status(ctx)
		if err == nil && st.Leader != "" {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: waited %v for the masters to elect a leader (last error: %v)", base.ErrUnavailable, d, err)
		case <-t.C:
		}
	}
}

// Store is a Mooncake store client. New, then Setup, then use it; Close releases it.
type Store struct {
	mu sync.Mutex // protects the fields below
	c  *client.Client
	// closed is set by Close; every call after it fails with ErrStoreNil.
	closed   bool
	hostname string
	// bufs are the registered regions, sorted by start. Invariant: they do not overlap.
	bufs []region
	// segs maps segment names (worker addresses and ids) to worker ids, for PreferredSegments;
	// refreshed from the master's status when a name is missing.
	segs map[string]base.WorkerID
	// tenant is the tenant Setup connects in (SetTenantID; "" is the default tenant).
	tenant string
}

// region is one registered buffer.
type region struct {
	start uintptr
	size  uint64
}

// New returns a Store; call Setup before anything else.
func New() (*Store, error) { return &Store{}, nil }

// NewWithType returns a Store of the given kind; only MOONCAKE_CLIENT_REAL is supported.
func NewWithType(t ClientType) (*Store, error) {
	if t != MOONCAKE_CLIENT_REAL {
		return nil, wrap(ErrStoreNil, fmt.Errorf("%w: client type %d (only MOONCAKE_CLIENT_REAL)", base.ErrNotSupported, t))
	}
	return New()
}

// Setup connects to the masters at masterServerAddr ("host:port" or "a:1,b:2"). See the
// package documentation for the arguments that have no effect here.
func (s *Store) Setup(localHostname, metadataServer string, globalSegmentSize, localBufferSize uint64,
	protocol, deviceName, masterServerAddr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrStoreNil
	}
	if s.c != nil {
		return wrap(ErrSetupFailed, fmt.Errorf("%w: Setup was called already", base.ErrInvalidParams))
	}
	var masters []string
	for _, a := range strings.Split(masterServerAddr, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if strings.Contains(a, "://") {
			return wrap(ErrSetupFailed, fmt.Errorf("%w: master address %q: discovery through a metadata service is not supported; list the masters as host:port,host:port", base.ErrNotSupported, a))
		}
		masters = append(masters, a)
	}
	if len(masters) == 0 {
		return wrap(ErrSetupFailed, fmt.Errorf("%w: no master address", base.ErrInvalidParams))
	}
	c, err := client.Connect(context.Background(), client.Config{MasterAddresses: masters, TenantID: s.tenant})
	if err != nil {
		return wrap(ErrSetupFailed, err)
	}
	if err := waitLeader(c, setupWait); err != nil {
		c.Close()
		return wrap(ErrSetupFailed, err)
	}
	s.c = c
	s.hostname = localHostname
	return nil
}

// DummySetup is not supported: the Go client talks to masters and workers directly.
func (s *Store) DummySetup(memPoolSize, localBufferSize uint64, serverAddress, ipcSocketPath string) error {
	return wrap(ErrSetupFailed, fmt.Errorf("%w: dummy clients (use Setup with the masters' address)", base.ErrNotSupported))
}

// InitAll has nothing to mount here (the cluster's DRAM comes from its workers); it succeeds
// once Setup has.
func (s *Store) InitAll(protocol, deviceName string, mountSegmentSize uint64) error {
	_, err := s.client(ErrInitAllFailed)
	return err
}

// HealthCheck asks a master for the cluster status: nil when a leader answers.
func (s *Store) HealthCheck() error {
	c, err := s.client(ErrHealthCheck)
	if err != nil {
		return err
	}
	st, err := c.Status(context.Background())
	if err == nil && st.Leader == "" {
		err = fmt.Errorf("%w: no leader", base.ErrUnavailable)
	}
	return wrap(ErrHealthCheck, err)
}

// Close releases the client. Later calls fail with ErrStoreNil.
func (s *Store) Close() {
	s.mu.Lock()
	c := s.c
	s.c, s.closed, s.bufs = nil, true, nil
	s.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// client returns the connected client, or an error of kind.
func (s *Store) client(kind error) (*client.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, ErrStoreNil
	case s.c == nil:
		return nil, wrap(kind, errNotSetUp)
	}
	return s.c, nil
}

// replicate turns Mooncake's config into the client's (nil: one replica).
func (s *Store) replicate(c *client.Client, cfg *ReplicateConfig) (client.ReplicateConfig, error) {
	if cfg == nil {
		return client.ReplicateConfig{Replicas: 1}, nil
	}
	if cfg.ReplicaNum <= 0 {
		return client.ReplicateConfig{}, ErrInvalidArgument
	}
	rc := client.ReplicateConfig{Replicas: cfg.ReplicaNum, HardPin: cfg.WithHardPin}
	if cfg.WithSoftPin {
		rc.SoftPinTTL = defaultSoftPinTTL
	}
	if len(cfg.PreferredSegments) > 0 {
		rc.PreferredWorker = s.segment(c, cfg.PreferredSegments[0])
	}
	return rc, nil
}

// segment returns the worker a segment name (a worker's address or id) names, "" if none.
func (s *Store) segment(c *client.Client, name string) base.WorkerID {
	s.mu.Lock()
	id, ok := s.segs[name]
	s.mu.Unlock()
	if ok {
		return id
	}
	st, err := c.Status(context.Background())
	if err != nil {
		return ""
	}
	m := map[string]base.WorkerID{}
	for _, w := range st.Workers {
		m[w.ID], m[w.Address] = base.WorkerID(w.ID), base.WorkerID(w.ID)
	}
	s.mu.Lock()
	s.segs = m
	s.mu.Unlock()
	return m[name]
}

// put stores value; a key that exists already counts as stored, as in Mooncake (a KV-cache
// key names its content).
func put(c *client.Client, key string, value []byte, rc client.ReplicateConfig) error {
	err := c.Put(context.Background(), key, value, rc)
	if errors.Is(err, base.ErrObjectAlreadyExists) {
		return nil
	}
	return err
}

// Put stores a copy of value under key.
func (s *Store) Put(key string, value []byte, config *ReplicateConfig) error {
	c, err := s.client(ErrPut)
	if err != nil {
		return err
	}
	rc, err := s.replicate(c, config)
	if err != nil {
		return err
	}
	return wrap(ErrPut, put(c, key, value, rc))
}

// PutFrom stores size bytes at ptr, which must lie in a registered buffer.
func (s *Store) PutFrom(key string, ptr uintptr, size uint64, config *ReplicateConfig) error {
	c, err := s.client(ErrPut)
	if err != nil {
		return err
	}
	if ptr == 0 || size == 0 {
		return ErrInvalidArgument
	}
	buf, err := s.registered(ptr, size)
	if err != nil {
		return err
	}
	rc, err := s.replicate(c, config)
	if err != nil {
		return err
	}
	return wrap(ErrPut, put(c, key, buf, rc))
}

// BatchPutFrom stores each keys[i] from ptrs[i] (sizes[i] bytes, in registered buffers) and
// returns a result per key: 0, or Mooncake's negative ErrorCode.
func (s *Store) BatchPutFrom(keys []string, ptrs []uintptr, sizes []uint64, config *ReplicateConfig) ([]int, error) {
	c, err := s.client(ErrBatchOp)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	if len(ptrs) != len(keys) || len(sizes) != len(keys) {
		return nil, ErrInvalidArgument
	}
	bufs := make([][]byte, len(keys))
	for i := range keys {
		if ptrs[i] == 0 || sizes[i] == 0 {
			return nil, ErrInvalidArgument
		}
		if bufs[i], err = s.registered(ptrs[i], sizes[i]); err != nil {
			return nil, err
		}
	}
	rc, err := s.replicate(c, config)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(keys))
	parallel(len(keys), func(i int) { out[i] = ErrorCode(put(c, keys[i], bufs[i], rc)) })
	return out, nil
}

// GetInto reads the object into the registered buffer at ptr (size bytes) and returns its size.
func (s *Store) GetInto(key string, ptr uintptr, size uint64) (int64, error) {
	c, err := s.client(ErrGet)
	if err != nil {
		return 0, err
	}
	buf, err := s.registered(ptr, size)
	if err != nil {
		return 0, err
	}
	n, err := c.GetInto(context.Background(), key, buf)
	return int64(n), wrap(ErrGet, err)
}

// Get reads the object into buf (no registration needed) and returns its size.
func (s *Store) Get(key string, buf []byte) (int64, error) {
	c, err := s.client(ErrGet)
	if err != nil {
		return 0, err
	}
	if len(buf) == 0 {
		return 0, ErrInvalidArgument
	}
	n, err := c.GetInto(context.Background(), key, buf)
	return int64(n), wrap(ErrGet, err)
}

// BatchGetInto reads each keys[i] into the registered buffer at ptrs[i] (sizes[i] bytes) and
// returns per key the bytes read, or Mooncake's negative ErrorCode.
func (s *Store) BatchGetInto(keys []string, ptrs []uintptr, sizes []uint64) ([]int64, error) {
	c, err := s.client(ErrBatchOp)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	if len(ptrs) != len(keys) || len(sizes) != len(keys) {
		return nil, ErrInvalidArgument
	}
	bufs := make([][]byte, len(keys))
	for i := range keys {
		if bufs[i], err = s.registered(ptrs[i], sizes[i]); err != nil {
			return nil, err
		}
	}
	out := make([]int64, len(keys))
	parallel(len(keys), func(i int) {
		n, err := c.GetInto(context.Background(), keys[i], bufs[i])
		if err != nil {
			out[i] = int64(ErrorCode(err))
			return
		}
		out[i] = int64(n)
	})
	return out, nil
}

// Exists reports whether key is stored.
func (s *Store) Exists(key string) (bool, error) {
	c, err := s.client(ErrExist)
	if err != nil {
		return false, err
	}
	ok, err := c.Exists(context.Background(), key)
	return ok, wrap(ErrExist, err)
}

// BatchExists reports for each key whether it is stored.
func (s *Store) BatchExists(keys []string) ([]bool, error) {
	c, err := s.client(ErrBatchOp)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	out, err := c.BatchExists(context.Background(), keys)
	if err != nil {
		return nil, wrap(ErrBatchOp, err)
	}
	return out, nil
}

// GetSize returns the size of the object stored under key.
func (s *Store) GetSize(key string) (int64, error) {
	c, err := s.client(ErrGetSize)
	if err != nil {
		return 0, err
	}
	n, err := c.Size(context.Background(), key)
	return n, wrap(ErrGetSize, err)
}

// Hostname returns the local hostname given to Setup (this host's name when it was empty).
func (s *Store) Hostname() (string, error) {
	if _, err := s.client(ErrHostname); err != nil {
		return "", err
	}
	s.mu.Lock()
	h := s.hostname
	s.mu.Unlock()
	if h != "" {
		return h, nil
	}
	h, err := os.Hostname()
	return h, wrap(ErrHostname, err)
}

// Remove deletes key. force has no effect (there are no leases to break).
func (s *Store) Remove(key string, force bool) error {
	c, err := s.client(ErrRemove)
	if err != nil {
		return err
	}
	return wrap(ErrRemove, c.Remove(context.Background(), key))
}

// RemoveByRegex deletes every key matching pattern (Go regexp syntax, RE2) and returns how many.
func (s *Store) RemoveByRegex(pattern string, force bool) (int64, error) {
	c, err := s.client(ErrRemove)
	if err != nil {
		return 0, err
	}
	n, err := c.RemoveByRegex(context.Background(), pattern)
	return n, wrap(ErrRemove, err)
}

// RemoveAll deletes every key and returns how many.
func (s *Store) RemoveAll(force bool) (int64, error) {
	c, err := s.client(ErrRemove)
	if err != nil {
		return 0, err
	}
	n, err := c.RemoveAll(context.Background())
	return n, wrap(ErrRemove, err)
}

// RegisterBuffer records [ptr, ptr+size) as a buffer PutFrom and GetInto may use. The memory
// must stay valid, and unmoved, until UnregisterBuffer. Overlapping an existing region fails.
func (s *Store) RegisterBuffer(ptr uintptr, size uint64) error {
	if ptr == 0 || size == 0 || uint64(ptr)+size < uint64(ptr) {
		return ErrInvalidArgument
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrStoreNil
	}
	i, _ := slices.BinarySearchFunc(s.bufs, ptr, func(r region, p uintptr) int { return cmpUintptr(r.start, p) })
	if (i > 0 && uint64(s.bufs[i-1].start)+s.bufs[i-1].size > uint64(ptr)) || (i < len(s.bufs) && uint64(ptr)+size > uint64(s.bufs[i].start)) {
		return wrap(ErrRegisterBuffer, fmt.Errorf("%w: [%#x, +%d) overlaps a registered buffer", base.ErrInvalidParams, ptr, size))
	}
	s.bufs = slices.Insert(s.bufs, i, region{start: ptr, size: size})
	return nil
}

// UnregisterBuffer forgets the buffer registered at ptr.
func (s *Store) UnregisterBuffer(ptr uintptr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrStoreNil
	}
	i, ok := slices.BinarySearchFunc(s.bufs, ptr, func(r region, p uintptr) int { return cmpUintptr(r.start, p) })
	if !ok {
		return wrap(ErrUnregisterBuffer, ErrBufferNotFound)
	}
	s.bufs = slices.Delete(s.bufs, i, i+1)
	return nil
}

// RegisteredBufferInfo describes one registered buffer.
type RegisteredBufferInfo struct {
	Ptr     uintptr
	Size    uint64
	IsLocal bool
}

// RegisteredBufferCount returns the number of registered buffers.
func (s *Store) RegisteredBufferCount() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrStoreNil
	}
	return len(s.bufs), nil
}

// RegisteredBufferAt returns the index-th registered buffer (in address order).
func (s *Store) RegisteredBufferAt(index int) (*RegisteredBufferInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrStoreNil
	}
	if index < 0 || index >= len(s.bufs) {
		return nil, ErrBufferNotFound
	}
	r := s.bufs[index]
	return &RegisteredBufferInfo{Ptr: r.start, Size: r.size, IsLocal: true}, nil
}

// UnregisterAllBuffers forgets every registered buffer and returns how many there were.
func (s *Store) UnregisterAllBuffers() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrStoreNil
	}
	n := len(s.bufs)
	s.bufs = nil
	return n, nil
}

// IsHotCachePtr reports false: there is no client-side hot cache here.
func (s *Store) IsHotCachePtr(ptr uintptr) bool { return false }

// registered returns the registered memory [ptr, ptr+size) as a slice, or an error when it
// does not lie inside one registered buffer.
func (s *Store) registered(ptr uintptr, size uint64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := slices.BinarySearchFunc(s.bufs, ptr, func(r region, p uintptr) int { return cmpUintptr(r.start, p) })
	if !ok {
		i--
	}
	if ptr == 0 || size == 0 || i < 0 || uint64(ptr)+size > uint64(s.bufs[i].start)+s.bufs[i].size {
		return nil, fmt.Errorf("%w: [%#x, +%d) is not inside a registered buffer (RegisterBuffer)", ErrInvalidArgument, ptr, size)
	}
	// NB: the caller vouched, by registering it, that this memory is valid and stays put; the
	// double conversion keeps vet's unsafeptr check from flagging a uintptr that did not come
	// from a Go pointer in this expression (it came from the caller).
	p := *(*unsafe.Pointer)(unsafe.Pointer(&ptr))
	return unsafe.Slice((*byte)(p), size), nil
}

func cmpUintptr(a, b uintptr) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parallel runs fn(0..n-1) with at most batchParallelism at once.
func parallel(n int, fn func(i int)) {
	sem := make(chan struct{}, batchParallelism)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}
