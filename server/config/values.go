package config

import (
	"reflect"
	"slices"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Conns are the connection limits of a server's RPC port (negative: no limit).
type Conns struct {
	IdleTimeout, FrameTimeout time.Duration
	MaxConnsPerPeer           int
}

// KVEvents are Mooncake's KV event publisher settings (the master's kv_events_* flags).
type KVEvents struct {
	Enabled, EmitObjectKey, EmitLegacyCompat bool
	BindEndpoint, BackendID, ModelName       string
	LoraName, AdditionalSalt                 string
	BlockSize, DPRank                        uint32
}

// Master holds a master's settings as the table fills them: from the flags of `mooncake
// master`, mooncake_master and the master half of standalone, or, for the Go API, the
// defaults (MasterDefaults). Each field's setting, default and check are in table.go.
type Master struct {
	ID, DataDir, RPCAddress, RaftAddress, Peers, PeerRPCAddresses string
	ClusterID, LocalHostname                                      string
	RPCPort, MetricsPort                                          int
	ClientTTL, PutTimeout                                         time.Duration
	WorkerRestartGrace, ClientDisconnectGrace                     time.Duration
	EvictionHighWatermarkRatio, EvictionRatio                     float64
	MaxValueSize                                                  base.Bytes
	Join, RaftFsync                                               bool
	Conns                                                         Conns
	KVEvents                                                      KVEvents
	DefaultTenantQuotaBytes                                       base.Bytes

	// Mooncake's mooncake_master flags with an effect here (compat).
	Port, Verbosity, HTTPMetadataServerPort, RPCConnTimeoutSeconds int
	ConfigPath, RootFSDir, MetricsHost, HTTPMetadataServerHost     string
	RPCInterface                                                   string
	EnableMetricReporting, EnableHTTPMetadataServer                bool
	PutStartDiscardTimeout                                         time.Duration

	// Go API only.
	RaftPort        int
	SummaryInterval time.Duration
	MasterID        string
}

// Worker holds a worker's settings as the table fills them (`mooncake worker`,
// mooncake_client, the worker half of standalone, the Go API's defaults).
type Worker struct {
	WorkerID, MasterServerAddress, WorkerAddress, RootFSDir string
	Persistence, ClusterID, Protocol, HugePages             string
	LocalHostname                                           string
	MetricsPort                                             int
	GlobalSegmentSize, SSDCapacity, PrefetchBudget          base.Bytes
	ShutdownTimeout                                         time.Duration
	WarmUp, SharedMemory, PrefaultArena, PopulateArena      bool
	TCPSendfile, DRAMOnly                                   bool
	Conns                                                   Conns

	// Mooncake's mooncake_client flags with an effect here (compat).
	Host                            string
	Port, Verbosity, HTTPPort       int
	EnableOffload, EnableHTTPServer bool

	// Go API only.
	WorkerPort                                          int
	HeartbeatInterval, ShmLeaseTTL, PendingWriteTimeout time.Duration
	StandaloneWorkerID                                  string
}

// Defaults returns the defaults of the settings kind takes (and the Go API's) in a Master
// and a Worker.
func Defaults(kind Kind) (Master, Worker) {
	var m Master
	var w Worker
	for i := range table {
		s := &table[i]
		if !s.Takes(kind | KindAPI) {
			continue
		}
		if s.Master != nil {
			setDefault(s.Master(&m), s.Default)
		}
		if s.Worker != nil {
			setDefault(s.Worker(&w), s.Default)
		}
	}
	return m, w
}

// setDefault stores def in the field p points at (TestTable checks their types agree).
func setDefault(p, def any) {
	if def == nil {
		return
	}
	reflect.ValueOf(p).Elem().Set(reflect.ValueOf(def))
}

// MasterDefaults are the defaults of a master (`mooncake master`) and of
// master.Config's zero fields. WorkerDefaults are a worker's.
var (
	MasterDefaults, _ = Defaults(KindMaster)
	_, WorkerDefaults = Defaults(KindWorker)
)

// Pass hands the settings in src (a *Master or *Worker, as the flags filled it) to dst, a
// pointer to the struct that receives them (master.Config, worker.Config): each
// field a wired setting of the table fills goes to dst's field of the same name, when that
// field's type is the same and the caller left it zero. The caller composes what is not a
// plain copy (addresses, ids, peers, units that differ) before; the rest needs no line of
// its own, so a new setting reaches the server by its declaration and the field of that
// name.
func Pass(src, dst any) {
	dv := reflect.ValueOf(dst).Elem()
	eachField(src, func(_ *Setting, name string, v reflect.Value) {
		d := dv.FieldByName(name)
		if d.IsValid() && d.CanSet() && d.Type() == v.Type() && d.IsZero() {
			d.Set(v)
		}
	})
}

// LogAttrs is the effective-config line of cfg (a master.Config or WorkerConfig, after
// its defaults): name, value for each setting of the table whose field (in Master, as src
// shows, or Worker) cfg has under the same name, in the table's order, sizes in units; then
// extra (what the server composes: peers, derived switches). skip names settings the line
// leaves out.
func LogAttrs(src, cfg any, skip []string, extra ...any) []any {
	cv := reflect.ValueOf(cfg)
	if cv.Kind() == reflect.Pointer {
		cv = cv.Elem()
	}
	var out []any
	eachField(src, func(s *Setting, name string, v reflect.Value) {
		f := cv.FieldByName(name)
		// The same kind of value (a size as int64 or base.Bytes, an id as string or
		// base.WorkerID); not a struct (the line is flat: the server composes those).
		if !f.IsValid() || slices.Contains(skip, s.Name) || f.Kind() != v.Kind() || f.Kind() == reflect.Struct ||
			!f.Type().ConvertibleTo(v.Type()) {
			return
		}
		val := f.Convert(v.Type()).Interface()
		if b, ok := val.(base.Bytes); ok {
			val = b.String()
		}
		out = append(out, s.Name, val)
	})
	return append(out, extra...)
}

// eachField calls fn with every wired setting of src (a *Master or *Worker) that fills a
// top-level field, with that field's name and value, in the table's order.
func eachField(src any, fn func(s *Setting, name string, v reflect.Value)) {
	sv := reflect.ValueOf(src).Elem()
	st := sv.Type()
	seen := map[string]bool{}
	for i := range table {
		s := &table[i]
		var p any
		switch src := src.(type) {
		case *Master:
			if s.Master != nil {
				p = s.Master(src)
			}
		case *Worker:
			if s.Worker != nil {
				p = s.Worker(src)
			}
		}
		if p == nil {
			continue
		}
		addr := reflect.ValueOf(p).Pointer()
		for j := 0; j < st.NumField(); j++ {
			f := sv.Field(j)
			if f.Addr().Pointer() != addr || f.Type() != reflect.ValueOf(p).Elem().Type() {
				continue
			}
			if name := st.Field(j).Name; !seen[name] {
				seen[name] = true // a field two settings fill (standalone's data_dir) once
				fn(s, name, f)
			}
			break
		}
	}
}
