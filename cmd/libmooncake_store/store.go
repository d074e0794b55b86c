package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/client/mooncakestore"
	"github.com/mooncake-go/mooncake/cmd/internal/mcconfig"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/config"
	"github.com/mooncake-go/mooncake/server/worker"
)

// This file is the library's Go side with no cgo in it: the store a handle names, its setup
// and close, the replicate config, and the mapping of errors to Mooncake's codes. exports.go
// converts C arguments and calls it.

// errorCode maps an error to Mooncake's code: the numbers of mooncakestore.ErrorCode (the
// Go binding's, so Go, C and Python callers see the same ones); a store not set up is
// UNAVAILABLE_IN_CURRENT_STATUS, as a closed one.
func errorCode(err error) int {
	if errors.Is(err, errNotSetUp) {
		return mooncakestore.ErrorCode(base.ErrClosed)
	}
	return mooncakestore.ErrorCode(err)
}

// errNotSetUp marks a call on a store that setup has not connected (or close disconnected).
var errNotSetUp = errors.New("mooncake: the store is not set up (call mooncake_store_setup)")

// softPinDefaultTTL is the soft pin of MOONCAKE_SOFT_PIN_ENABLE without a TTL: Mooncake
// master's default_kv_soft_pin_ttl (30 minutes).
const softPinDefaultTTL = 30 * time.Minute

// workerReadyTimeout bounds setup: reaching a master and, with a segment, the embedded
// worker's registration (asynchronous; it usually takes one heartbeat).
const workerReadyTimeout = 30 * time.Second

// store is what a handle names. Its methods are safe for concurrent use.
type store struct {
	mu sync.Mutex // guards the fields below; never held across a network call of an operation
	// cl is nil until setup and after close. Operations take it under mu and call it
	// without: a close in between makes their calls fail with ErrClosed.
	cl *client.Client
	// worker is the embedded worker (setup with global_segment_size > 0), else nil.
	worker   *worker.Worker
	hostname string
	// bufs records registered buffers: start address -> length (see register).
	bufs map[uintptr]uintptr
	// segments caches worker address -> id for preferred segments given as addresses.
	segments map[string]base.WorkerID
	// mounted are the segments mount_segment added (segments.go), by id; masters and
	// clusterID are setup's, for starting them.
	mounted   map[base.WorkerID]*worker.Worker
	masters   []string
	clusterID string
	// tenant is the tenant the next setup's client is in (mooncake_store_set_tenant_id; "" is
	// the default tenant). It outlives close, as the handle does.
	tenant string
}

// handles maps handle numbers to stores. Handles are small integers handed to C as
// pointers-sized values: C never holds a Go pointer (the cgo rules).
var handles struct {
	sync.RWMutex
	m    map[uintptr]*store
	next uintptr
}

func newHandle() uintptr {
	handles.Lock()
	defer handles.Unlock()
	if handles.m == nil {
		handles.m = map[uintptr]*store{}
	}
	handles.next++
	handles.m[handles.next] = &store{bufs: map[uintptr]uintptr{}}
	return handles.next
}

func lookupHandle(h uintptr) (*store, error) {
	handles.RLock()
	s := handles.m[h]
	handles.RUnlock()
	if s == nil {
		return nil, fmt.Errorf("%w: %#x is not a store handle (never created, or destroyed)", base.ErrInvalidParams, h)
	}
	return s, nil
}

func dropHandle(h uintptr) *store {
	handles.Lock()
	defer handles.Unlock()
	s := handles.m[h]
	delete(handles.m, h)
	return s
}

// client returns the connected client, or errNotSetUp.
func (s *store) client() (*client.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl == nil {
		return nil, errNotSetUp
	}
	return s.cl, nil
}

// setupArgs are mooncake_store_setup's seven values.
type setupArgs struct {
	localHostname, metadataServer string
	globalSegmentSize             uint64
	localBufferSize               uint64
	protocol, deviceName          string
	masterServerAddr              string
}

// warnings are printed once per process each (Mooncake's values this build accepts and
// ignores).
var warnOnce struct{ metadata, protocol, device sync.Once }

// stderrLogger is the log of the library and its embedded worker: warnings and errors to
// stderr (an application's own output is not the place for a worker's info lines).
var stderrLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// resolveMasters picks the master list: the argument, else $MOONCAKE_MASTER, else the config
// file's master_server_address, else the default (as the mooncake CLI does).
func resolveMasters(arg string, getenv func(string) string, file *mcconfig.ClientFile) ([]string, error) {
	switch {
	case strings.TrimSpace(arg) != "":
		return mcconfig.ParseAddressList(arg)
	case getenv(mcconfig.EnvMaster) != "":
		m, err := mcconfig.ParseAddressList(getenv(mcconfig.EnvMaster))
		if err != nil {
			return nil, fmt.Errorf("$%s: %w", mcconfig.EnvMaster, err)
		}
		return m, nil
	case len(file.MasterServerAddress) > 0:
		return file.MasterServerAddress, nil
	}
	return []string{client.DefaultMasterAddress}, nil
}

// Mooncake's client, given a local_hostname without a port, takes its transfer engine's port
// from this range and get_hostname answers "<local_hostname>:<port>"; the embedded worker here
// listens on a port picked the same way, so get_hostname has Mooncake's form.
const (
	hostPortMin = 12300
	hostPortMax = 14300
)

// localAddress splits local_hostname ("host" or "host:port"; "" is localhost) into the host
// and the port; without a port, pick chooses one (pickHostPort). picked reports that it did.
func localAddress(localHostname string, pick func(host string) int) (addr string, picked bool, err error) {
	h := strings.TrimSpace(localHostname)
	if h == "" {
		h = "localhost"
	}
	if _, _, err := net.SplitHostPort(h); err != nil {
		h, picked = net.JoinHostPort(strings.Trim(h, "[]"), strconv.Itoa(pick(h))), true
	}
	if err := mcconfig.CheckHostPort(h, false); err != nil {
		return "", false, fmt.Errorf("local_hostname %q: %w", localHostname, err)
	}
	return h, picked, nil
}

// pickHostPort returns a port of [hostPortMin, hostPortMax] that host can listen on now,
// trying from a random one on; when none can be bound (a host name that is not this
// machine's), a random one of the range.
func pickHostPort(host string) int {
	n := hostPortMax - hostPortMin + 1
	start := rand.IntN(n)
	for i := range 64 {
		port := hostPortMin + (start+i*31)%n
		l, err := net.Listen("tcp", net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port)))
		if err == nil {
			l.Close()
			return port
		}
	}
	return hostPortMin + start
}

// setup connects the store and, with a segment, starts and registers the embedded worker.
// getenv reads the environment (the C library passes C's getenv, which sees variables the
// application set after the library was loaded; os.Getenv sees only those it started with).
func (s *store) setup(a setupArgs, getenv func(string) string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl != nil {
		return fmt.Errorf("%w: the store is already set up; close it first", base.ErrInvalidParams)
	}
	if a.metadataServer != "" {
		warnOnce.metadata.Do(func() {
			stderrLogger.Warn("mooncake: metadata_server is ignored: the masters' raft replaces Mooncake's metadata server", "metadata_server", a.metadataServer)
		})
	}
	if p := strings.ToLower(a.protocol); p != "" && p != "tcp" {
		warnOnce.protocol.Do(func() {
			stderrLogger.Warn("mooncake: protocol is not in this build; using tcp", "protocol", a.protocol)
		})
	}
	if a.deviceName != "" {
		warnOnce.device.Do(func() {
			stderrLogger.Warn("mooncake: device_name is ignored (RDMA is not in this build)", "device_name", a.deviceName)
		})
	}
	file, err := mcconfig.LoadClient(getenv)
	if err != nil {
		return err
	}
	masters, err := resolveMasters(a.masterServerAddr, getenv, file)
	if err != nil {
		return err
	}
	if a.globalSegmentSize > 0 { // 0: no embedded worker
		if err := config.Check(config.KindFile, "", "global_segment_size", a.globalSegmentSize); err != nil {
			return err
		}
	}
	addr, picked, err := localAddress(a.localHostname, pickHostPort)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), workerReadyTimeout)
	defer cancel()
	cl, err := client.Connect(ctx, client.Config{MasterAddresses: masters, ClusterID: file.ClusterID, Logger: stderrLogger, TenantID: s.tenant})
	if err != nil {
		return err
	}
	// Dead embedded workers of earlier processes (exited without closing) are retired first.
	retireDeadEmbedded(ctx, cl)
	if a.globalSegmentSize > 0 {
		w, err := startEmbedded(ctx, cl, file.ClusterID, masters, addr, int64(a.globalSegmentSize))
		for try := 0; picked && errors.Is(err, syscall.EADDRINUSE) && try < 3; try++ {
			// The picked port was taken between the check and the bind: pick again.
			addr, _, _ = localAddress(a.localHostname, pickHostPort)
			w, err = startEmbedded(ctx, cl, file.ClusterID, masters, addr, int64(a.globalSegmentSize))
		}
		if err != nil {
			cl.Close()
			return err
		}
		s.worker = w
	}
	// get_hostname answers in Mooncake's form, local_hostname as given plus the port.
	s.hostname = addr
	s.cl = cl
	s.masters, s.clusterID = masters, file.ClusterID
	return nil
}

// setTenant sets the tenant of the next setup (see mooncake_store_set_tenant_id).
func (s *store) setTenant(t string) error {
	if err := base.ValidateTenant(t); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl != nil {
		return fmt.Errorf("%w: set_tenant_id: the store is set up; close it first", base.ErrInvalidParams)
	}
	s.tenant = t
	return nil
}

// close disconnects the store and unmounts its embedded workers, setup's and those
// mount_segment added (see stopEmbedded: when it returns, no put goes to them and the objects
// only they held are gone).
func (s *store) close() {
	s.mu.Lock()
	cl, ws := s.cl, append(s.takeMountedLocked(), s.worker)
	s.cl, s.worker, s.segments = nil, nil, nil
	s.mu.Unlock()
	stopEmbedded(cl, ws...) // takes over cl
}

// getHostname is "<local_hostname>:<port>": the embedded worker's port, else one picked from
// Mooncake's range at setup.
func (s *store) getHostname() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hostname
}

// healthCheck returns 0 (a master answers), 1 (not set up) or 2 (no master answers).
func (s *store) healthCheck() int {
	cl, err := s.client()
	if err != nil {
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cl.Status(ctx); err != nil {
		return 2
	}
	return 0
}

// register records [addr, addr+n) (see mooncake_store_register_buffer).
func (s *store) register(addr, n uintptr) error {
	if addr == 0 || n == 0 || addr+n < addr {
		return fmt.Errorf("%w: register_buffer: address %#x, size %d", base.ErrInvalidParams, addr, n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bufs[addr] = n
	return nil
}

func (s *store) unregister(addr uintptr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.bufs[addr]; !ok {
		return fmt.Errorf("%w: unregister_buffer: no buffer is registered at %#x", base.ErrInvalidParams, addr)
	}
	delete(s.bufs, addr)
	return nil
}

// registered reports whether [addr, addr+n) lies inside one registered buffer.
func (s *store) registered(addr, n uintptr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for start, size := range s.bufs {
		if addr >= start && addr-start <= size && n <= size-(addr-start) {
			return true
		}
	}
	return false
}

// rcArgs is mooncake_replicate_config_t in Go terms (exports.go fills it).
type rcArgs struct {
	replicaNum    uint64
	hardPin       bool
	preferred     []string
	softPinAction int
	hasSoftPinTTL bool
	softPinTTLms  uint64
	persistence   int
	upsert        bool // not in the struct: the upsert calls set it
}

// Soft pin actions (enum mooncake_soft_pin_action).
const (
	softPinPreserve = 0
	softPinEnable   = 1
	softPinDisable  = 2
)

// replicateConfig checks a and resolves its preferred segments.
func (s *store) replicateConfig(cl *client.Client, a rcArgs) (client.ReplicateConfig, error) {
	rc := client.ReplicateConfig{Replicas: int(min(a.replicaNum, 1<<16)), HardPin: a.hardPin, Upsert: a.upsert}
	if a.replicaNum > 255 {
		return rc, fmt.Errorf("%w: replica_num must be 1 to 255, got %d", base.ErrInvalidParams, a.replicaNum)
	}
	if a.hasSoftPinTTL && a.softPinAction != softPinEnable {
		// Mooncake's master refuses a TTL without ENABLE (INVALID_PARAMS) rather than drop it.
		return rc, fmt.Errorf("%w: soft_pin_ttl_ms is set but soft_pin_action is not ENABLE", base.ErrInvalidParams)
	}
	switch a.softPinAction {
	case softPinPreserve, softPinDisable:
	case softPinEnable:
		rc.SoftPinTTL = softPinDefaultTTL
		if a.hasSoftPinTTL {
			if a.softPinTTLms == 0 || a.softPinTTLms > uint64(100*365*24*time.Hour/time.Millisecond) {
				return rc, fmt.Errorf("%w: soft_pin_ttl_ms %d is out of range", base.ErrInvalidParams, a.softPinTTLms)
			}
			rc.SoftPinTTL = time.Duration(a.softPinTTLms) * time.Millisecond
		}
	default:
		return rc, fmt.Errorf("%w: soft_pin_action %d is not one of 0 (preserve), 1 (enable), 2 (disable)", base.ErrInvalidParams, a.softPinAction)
	}
	if a.persistence < 0 || a.persistence > int(base.PersistenceDurable) {
		return rc, fmt.Errorf("%w: persistence %d is not one of 0 (default), 1 (cache), 2 (spill), 3 (durable)", base.ErrInvalidParams, a.persistence)
	}
	rc.Persistence = base.Persistence(a.persistence)
	rc.PreferredWorker = s.resolvePreferred(cl, a.preferred)
	return rc, nil
}

// resolvePreferred returns the worker id the first usable entry names: a worker id as is, a
// worker address ("host:port") through the leader's status (cached). "" when none is usable.
func (s *store) resolvePreferred(cl *client.Client, segs []string) base.WorkerID {
	for _, seg := range segs {
		seg = strings.TrimSpace(seg)
		if seg == "" {
			continue
		}
		if !strings.Contains(seg, ":") {
			if base.ValidateWorkerID(base.WorkerID(seg)) == nil {
				return base.WorkerID(seg)
			}
			continue
		}
		s.mu.Lock()
		if s.worker != nil && (s.worker.Addr() == seg || s.hostname == seg) {
			id := s.worker.ID()
			s.mu.Unlock()
			return id
		}
		if id := s.mountedSegmentLocked(seg); id != "" {
			s.mu.Unlock()
			return id
		}
		id, ok := s.segments[seg]
		s.mu.Unlock()
		if ok {
			return id
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cl.Status(ctx)
		cancel()
		if err != nil {
			continue
		}
		m := map[string]base.WorkerID{}
		for _, w := range st.Workers {
			m[w.Address] = base.WorkerID(w.ID)
		}
		s.mu.Lock()
		s.segments = m
		s.mu.Unlock()
		if id, ok := m[seg]; ok {
			return id
		}
	}
	return ""
}

// okIfExists applies Mooncake's put semantics: an existing key is success (the stored value
// stays) for a plain put.
func okIfExists(err error, a rcArgs) error {
	if !a.upsert && errors.Is(err, base.ErrObjectAlreadyExists) {
		return nil
	}
	return err
}
