package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Kind is a set of process kinds: the commands that take a setting as a flag.
type Kind uint16

const (
	// KindMaster is `mooncake master` and mooncake_master.
	KindMaster Kind = 1 << iota
	// KindWorker is `mooncake worker` and mooncake_client.
	KindWorker
	// KindMooncakeClient is mooncake_client only: Mooncake's client flags beyond the worker's.
	KindMooncakeClient
	// KindStandalone is `mooncake standalone` (a master and a worker in one process).
	KindStandalone
	// KindAPI marks a default of the Go API (master.Config, worker.Config) that
	// no flag sets; such a setting is registered by no command.
	KindAPI
	// KindMetadataHTTP is mooncake_http_metadata_server (Mooncake's HTTP metadata store).
	KindMetadataHTTP
	// KindFile marks a mooncake.json key or MOONCAKE_* variable: every command reads the
	// file MOONCAKE_CONFIG_PATH names and the variables (ParseFile, ApplyEnv).
	KindFile
	// KindEmbedded marks the keys the C library (cmd/libmooncake_store) reads for its client
	// and embedded worker; it leaves the file's other keys alone.
	KindEmbedded
)

// Mooncake binaries whose flags a Setting can be.
const (
	BinMaster = "mooncake_master"
	BinClient = "mooncake_client"
)

// Mooncake is a flag of Mooncake's binaries as its source declares it (gflags DEFINE_*).
type Mooncake struct {
	// Bins are the binaries that declare it (BinMaster, BinClient).
	Bins []string
	// Type is the gflags type: bool, int32, int64, uint32, uint64, double, string. Values of
	// a flag without effect are checked against it, so a typo is an error as in Mooncake.
	Type string
	// Default is Mooncake's default, as its source writes it.
	Default string
	// Ours names the flag or setting that implements it here ("" when Status says it has
	// no effect).
	Ours string
	// Why says how it maps (or, with no Ours, why it has no effect).
	Why string
}

// Setting is one setting, declared once. The field it fills is named by Master or Worker
// (or both: standalone fills the master's); a setting with neither is accepted with no
// effect, and Status (or Mooncake.Why) says why.
type Setting struct {
	// Name is the flag name (a Mooncake flag keeps Mooncake's spelling) and the key in the
	// effective-config log line and docs.
	Name string
	// Short is a one-letter shorthand ("v").
	Short string
	// Kinds are the commands that register it.
	Kinds Kind
	// Unit of a number: "s" (a plain number is seconds; Go durations too), "bytes" (sizes
	// with Mooncake's units, GB = 2^30), "ratio", "port"; "" for others.
	Unit string
	// Default is the value a command starts from, of the field's Go type ("" / 0 / false
	// written out where that is the default).
	Default any
	// Check reports what is wrong with a value ("must be positive"), nil when it is fine.
	Check func(v any) error
	// Help is the --help text.
	Help string
	// Mooncake is Mooncake's flag of this name, nil when Mooncake has none.
	Mooncake *Mooncake
	// JSON is the mooncake.json key, "" none. Env are the MOONCAKE_* variables.
	JSON string
	Env  []string
	// EnvParse reads a variable's value when the field's type does not say how (it checks
	// what it reads; nil, nil leaves the field unset). EnvHelp is what the variable does,
	// for docs, when Help does not say it.
	EnvParse func(string) (any, error)
	EnvHelp  string
	// Status is "" for a setting with an effect; otherwise why a key or variable is
	// accepted with no effect here (for Mooncake's flags: Mooncake.Why).
	Status string
	// Master and Worker point at the field the setting fills; File at its field of a
	// mooncake.json (with the MOONCAKE_* variables).
	Master func(*Master) any
	Worker func(*Worker) any
	File   func(*File) any
}

// Takes reports whether the command kind registers s.
func (s *Setting) Takes(kind Kind) bool { return s.Kinds&kind != 0 }

// Wired reports whether s fills a field.
func (s *Setting) Wired() bool { return s.Master != nil || s.Worker != nil }

// Lookup returns the setting name of kind (the first one the table declares), or nil.
func Lookup(kind Kind, name string) *Setting {
	for i := range table {
		if s := &table[i]; s.Name == name && s.Takes(kind) {
			return s
		}
	}
	return nil
}

// Settings returns the table, in its declared order (read-only).
func Settings() []Setting { return table }

// mustLookup is Lookup for names the code knows are declared.
func mustLookup(kind Kind, name string) *Setting {
	s := Lookup(kind, name)
	if s == nil {
		panic("config: no setting " + name) // a bug in this package: the table test finds it
	}
	return s
}

// Check runs the check of setting name (of kind) on v and returns an error wrapping
// base.ErrInvalidParams that reads "<prefix><name> <what is wrong>", e.g.
// Check(KindWorker, "--", "global_segment_size", b) gives "--global_segment_size must be
// positive". A setting without a check accepts anything.
func Check(kind Kind, prefix, name string, v any) error {
	s := mustLookup(kind, name)
	if s.Check == nil {
		return nil
	}
	return checked(s.Check(v), prefix+name)
}

// CheckEach runs Check on each name and value of nameValues (name, value, name, value, ...),
// of kind or the Go API's settings: the Go API's values (master.Config, WorkerConfig)
// pass the same checks as flags, files and variables. It returns the first failure.
func CheckEach(kind Kind, prefix string, nameValues ...any) error {
	for i := 0; i+1 < len(nameValues); i += 2 {
		if err := Check(kind|KindAPI, prefix, nameValues[i].(string), nameValues[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// checked words a check's failure after name ("--global_segment_size must be positive"); a
// check that wrote its whole message (an error of a class) is returned as it is.
func checked(err error, name string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, base.ErrInvalidParams), errors.Is(err, base.ErrNotSupported):
		return err
	}
	return fmt.Errorf("%w: %s %v", base.ErrInvalidParams, name, err)
}

// Validate runs every check of kind's settings on the flag values in m and w (either may be
// nil), in the table's order, and returns the first failure as "--name what".
func Validate(kind Kind, m *Master, w *Worker) error {
	for i := range table {
		s := &table[i]
		if !s.Takes(kind) || s.Check == nil {
			continue
		}
		if p := s.field(m, w); p != nil {
			if err := Check(kind, "--", s.Name, reflect.ValueOf(p).Elem().Interface()); err != nil {
				return err
			}
		}
	}
	return nil
}

// field returns the pointer s fills in m or w (the master's first), or nil.
func (s *Setting) field(m *Master, w *Worker) any {
	switch {
	case s.Master != nil && m != nil:
		return s.Master(m)
	case s.Worker != nil && w != nil:
		return s.Worker(w)
	}
	return nil
}

// The checks. Each reports in words a flag, key or variable name can precede.

// positive: above zero.
func positive(v any) error {
	if num(v) <= 0 {
		return fmt.Errorf("must be positive")
	}
	return nil
}

// nonNegative: zero or more.
func nonNegative(v any) error {
	if num(v) < 0 {
		return fmt.Errorf("must not be negative")
	}
	return nil
}

// segmentSize: a DRAM arena above zero and not absurd (at most 1 PiB).
func segmentSize(v any) error {
	if err := positive(v); err != nil {
		return err
	}
	if n := num(v); n > 1<<50 {
		return fmt.Errorf("%d is implausible", int64(n))
	}
	return nil
}

// ratioUpTo1: in (0, 1].
func ratioUpTo1(v any) error {
	if f := num(v); !(f > 0 && f <= 1) {
		return fmt.Errorf("must be in (0, 1], got %v", v)
	}
	return nil
}

// ratioBelow1: in (0, 1).
func ratioBelow1(v any) error {
	if f := num(v); !(f > 0 && f < 1) {
		return fmt.Errorf("must be in (0, 1), got %v", v)
	}
	return nil
}

// port: 1..65535.
func port(v any) error {
	if n := num(v); n < 1 || n > 65535 {
		return fmt.Errorf("%v is not a port", v)
	}
	return nil
}

// portOrZero: 0 (a free one) or a port.
func portOrZero(v any) error {
	if num(v) == 0 {
		return nil
	}
	return port(v)
}

// num reads any number the table holds.
func num(v any) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint32:
		return float64(x)
	case uint64:
		return float64(x)
	case float64:
		return x
	case time.Duration:
		return float64(x)
	case base.Bytes:
		return float64(x)
	}
	return math.NaN()
}

// format writes a default as --help and docs show it.
func format(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case base.Bytes:
		return x.String()
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// connLimit: a connection limit is never 0, which would read as "the default" in the
// server's config (negative turns the limit off).
func connLimit(v any) error {
	if num(v) == 0 {
		return fmt.Errorf("must not be 0 (negative: no limit)")
	}
	return nil
}

// clusterID: what a directory name under root_fs_dir can hold ("" is the default's).
func clusterID(v any) error {
	if id := v.(string); id != "" {
		return ValidateClusterID(id)
	}
	return nil
}

// hostNoPort: a mooncake.json local_hostname is a host name or an IP, without a port.
func hostNoPort(v any) error {
	if h := v.(string); strings.ContainsAny(h, ":/ ") {
		return fmt.Errorf("%q must be a host name or IP without a port", h)
	}
	return nil
}

// hostFromEnv reads $MOONCAKE_LOCAL_HOSTNAME: Mooncake accepts host:port; the port is the
// worker's own flag here, so it is dropped.
func hostFromEnv(v string) (any, error) {
	if h, _, err := net.SplitHostPort(v); err == nil {
		v = h
	}
	if strings.ContainsAny(v, "/ ") {
		return nil, fmt.Errorf("%w: $MOONCAKE_LOCAL_HOSTNAME %q is not a host name", base.ErrInvalidParams, v)
	}
	return v, nil
}

// bytesOrNothing reads a size, or leaves the key unset when it is not one (for a key with
// no effect here, a bad value is no reason to refuse to start).
func bytesOrNothing(v string) (any, error) {
	if b, err := base.ParseBytes(v); err == nil {
		return &b, nil
	}
	return nil, nil
}
