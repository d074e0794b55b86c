package config

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/mooncake-go/mooncake/internal/base"
)

var allKinds = []Kind{KindMaster, KindWorker, KindMooncakeClient, KindStandalone, KindMetadataHTTP, KindAPI}

// TestTable: every setting fills a field of its default's type (or, without a field, is one
// of Mooncake's flags with a gflags default and a reason), its default passes its own check,
// and no command takes one name twice.
func TestTable(t *testing.T) {
	for _, k := range allKinds { // the commands' flags and the Go API's defaults
		seen := map[string]bool{}
		for i := range table {
			s := &table[i]
			if !s.Takes(k) {
				continue
			}
			if seen[s.Name] {
				t.Errorf("kind %d takes --%s twice", k, s.Name)
			}
			seen[s.Name] = true
		}
	}
	keys := map[string]bool{}
	for i := range table {
		if s := &table[i]; s.JSON != "" {
			if keys[s.JSON] {
				t.Errorf("mooncake.json key %q declared twice", s.JSON)
			}
			keys[s.JSON] = true
		}
	}
	var m Master
	var w Worker
	for i := range table {
		s := &table[i]
		if s.Kinds == 0 {
			t.Errorf("%s: no kind", s.Name)
		}
		if s.Kinds&^(KindFile|KindEmbedded) == 0 {
			// A key or variable only: it fills a field of File, or says why it does not.
			if s.File == nil && s.Status == "" && s.EnvHelp == "" {
				t.Errorf("%s: a key or variable with no field and no reason", s.Name)
			}
			continue
		}
		if !s.Wired() {
			if s.Mooncake == nil || s.Mooncake.Why == "" || CheckGflag(s.Mooncake.Type, s.Mooncake.Default) != nil {
				t.Errorf("%s: no field, and not a Mooncake flag with a reason and a default of its type", s.Name)
			}
			continue
		}
		if s.Help == "" {
			t.Errorf("%s: no help", s.Name)
		}
		for _, p := range []any{s.field(&m, nil), s.field(nil, &w)} {
			if p == nil {
				continue
			}
			if ft, dt := reflect.TypeOf(p).Elem(), reflect.TypeOf(s.Default); ft != dt {
				t.Errorf("%s: field of type %v, default of type %v", s.Name, ft, dt)
			}
		}
		if s.Check != nil {
			if err := s.Check(s.Default); err != nil {
				t.Errorf("%s: the default %v fails its own check: %v", s.Name, s.Default, err)
			}
		}
	}
}

// TestRegister: every command kind's flags register (each field type has a flag type), at
// the table's defaults, and parse back into the fields.
func TestRegister(t *testing.T) {
	for _, k := range allKinds[:5] {
		var m Master
		var w Worker
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		Register(fs, k, &m, &w)
		if err := Validate(k, &m, &w); err != nil {
			t.Errorf("kind %d: the defaults do not validate: %v", k, err)
		}
	}
	var m Master
	fs := pflag.NewFlagSet("master", pflag.ContinueOnError)
	Register(fs, KindMaster, &m, nil)
	if m.ClientTTL != 10*time.Second || m.PutTimeout != MasterDefaults.PutTimeout || !m.RaftFsync || m.Port != MasterDefaults.RPCPort {
		t.Fatalf("defaults: %+v", m)
	}
	if err := fs.Parse([]string{"--client_ttl", "20", "--max_value_size", "1GiB", "--enable_ha", "-v=2", "--cxl_size=7"}); err != nil {
		t.Fatal(err)
	}
	if m.ClientTTL != 20*time.Second || m.MaxValueSize != 1<<30 || m.Verbosity != 2 {
		t.Fatalf("parsed: %+v", m)
	}
	if lines := NoEffect(fs, KindMaster); len(lines) != 2 || lines[0] != "--enable_ha=true: accepted, no effect here: "+whyHA {
		t.Fatalf("no-effect lines %q", lines)
	}
	if err := fs.Parse([]string{"--cxl_size=-1"}); err == nil {
		t.Fatal("a uint64 flag without effect took -1")
	}
	if err := fs.Parse([]string{"--eviction_ratio", "1.5"}); err != nil {
		t.Fatal(err)
	}
	if err := Validate(KindMaster, &m, nil); !errors.Is(err, base.ErrInvalidParams) || err.Error() != base.ErrInvalidParams.Error()+": --eviction_ratio must be in (0, 1), got 1.5" {
		t.Fatalf("validate: %v", err)
	}
}

// TestCheck: one check per setting, worded after the name the caller gives.
func TestCheck(t *testing.T) {
	f := func(name string, v any, want string) {
		t.Helper()
		err := Check(KindWorker|KindAPI, "", name, v)
		if (err == nil) != (want == "") || (err != nil && err.Error() != base.ErrInvalidParams.Error()+": "+want) {
			t.Fatalf("%s %v: %v, want %q", name, v, err, want)
		}
	}
	f("global_segment_size", base.Bytes(1), "")
	f("global_segment_size", base.Bytes(0), "global_segment_size must be positive")
	f("global_segment_size", int64(-1), "global_segment_size must be positive")
	f("global_segment_size", uint64(1)<<51, "global_segment_size 2251799813685248 is implausible")
	f("ssd_capacity", int64(-1), "ssd_capacity must not be negative")
	f("metrics_port", 70000, "metrics_port 70000 is not a port")
	f("root_fs_dir", "anything", "")
}

func TestParseSeconds(t *testing.T) {
	f := func(in string, want time.Duration, ok bool) {
		t.Helper()
		var d seconds
		err := d.Set(in)
		if (err == nil) != ok || (ok && time.Duration(d) != want) {
			t.Fatalf("Set(%q) = %v, %v; want %v, ok %v", in, time.Duration(d), err, want, ok)
		}
	}
	f("10", 10*time.Second, true)
	f("2.5", 2500*time.Millisecond, true)
	f("1m", time.Minute, true)
	f("ten", 0, false)
}

// TestDefaults: the Go API's defaults are the table's, for the master and the worker alike.
func TestDefaults(t *testing.T) {
	if MasterDefaults.PutTimeout != WorkerDefaults.PendingWriteTimeout {
		t.Fatalf("put timeout %v, the worker's pending writes %v", MasterDefaults.PutTimeout, WorkerDefaults.PendingWriteTimeout)
	}
	if WorkerDefaults.GlobalSegmentSize != 1<<30 || MasterDefaults.RaftPort != 7001 || MasterDefaults.MasterID != "m1" {
		t.Fatalf("%+v %+v", MasterDefaults, WorkerDefaults)
	}
}

// TestPass: a setting reaches the receiving struct's field of its name and type, unless the
// caller composed that field already.
func TestPass(t *testing.T) {
	type receiver struct {
		ClientTTL, SummaryInterval time.Duration
		MaxValueSize               int64 // another type: composed by the caller
		ID                         string
	}
	m := Master{ClientTTL: 3 * time.Second, SummaryInterval: time.Minute, MaxValueSize: 5, ID: "flag"}
	r := receiver{ID: "composed"}
	Pass(&m, &r)
	if r != (receiver{ClientTTL: 3 * time.Second, SummaryInterval: time.Minute, ID: "composed"}) {
		t.Fatalf("%+v", r)
	}
}

// TestLogAttrs: the effective-config line names each setting the logged struct has a field
// for, sizes in units, and leaves out what differs in kind (the server composes it).
func TestLogAttrs(t *testing.T) {
	type logged struct {
		ClientTTL    time.Duration
		MaxValueSize int64
		Peers        []string // a string list in Master: composed by the caller
		ID           string
	}
	got := fmt.Sprint(LogAttrs(&Master{}, logged{ClientTTL: time.Second, MaxValueSize: 1 << 30, ID: "m1"}, []string{"id"}, "x", 1))
	if want := "[client_ttl 1s max_value_size 1.0 GiB x 1]"; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
}
