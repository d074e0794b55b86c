package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/mooncake-go/mooncake/internal/base"
)

// The environment variables every reader of a Mooncake deployment's configuration knows.
const (
	// EnvConfigPath names a mooncake.json (Mooncake's variable).
	EnvConfigPath = "MOONCAKE_CONFIG_PATH"
	// EnvMaster is the default master address list of the client commands, `mooncake worker`
	// and the C library.
	EnvMaster = "MOONCAKE_MASTER"
)

// File is a mooncake.json with Mooncake's keys (and $MOONCAKE_* for what it does not set:
// ApplyEnv), as the table's settings with a JSON key or a variable fill it. A pointer or
// nil field is a key not given.
type File struct {
	LocalHostname       string
	MasterServerAddress AddressList
	GlobalSegmentSize   *base.Bytes
	LocalBufferSize     *base.Bytes
	Protocol            string
	DeviceName          string
	RootFSDir           string
	ClusterID           string
	// MetadataServer is Mooncake's etcd/HTTP metadata service: raft replaces it, so it is
	// accepted and noted (any JSON value).
	MetadataServer json.RawMessage
	// EnableSSDOffload with SSDOffloadPath is Mooncake's SSD tier: root_fs_dir here.
	EnableSSDOffload *bool
	SSDOffloadPath   string
	// TenantID is accepted and noted: a worker holds every tenant's objects (a client's
	// tenant is its setup's tenant_id).
	TenantID json.RawMessage
	// EnvMasters is $MOONCAKE_MASTER (which a flag beats and which beats the file's key).
	EnvMasters AddressList
	// given are the keys without a field that the file gives (accepted, no effect here).
	given map[*Setting]bool
}

// ParseFile parses a mooncake.json. For the CLI (kind KindFile) every key is one of the
// table's (a key it does not declare is an error naming it, so a typo is never ignored),
// and a key with no effect here is listed in File.NoEffect. For the C library (kind
// KindEmbedded) only the keys the table marks for it are read, the others left alone (an
// application's file may carry SGLang's or vLLM's keys too). Values are checked by their
// setting's check. Keys match as encoding/json matches struct tags: exactly, else in any
// case.
func ParseFile(data []byte, kind Kind) (*File, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		if err == nil {
			err = fmt.Errorf("want a JSON object of Mooncake's keys")
		}
		return nil, jsonError(err)
	}
	f := File{given: map[*Setting]bool{}}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, jsonError(err)
		}
		key, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, jsonError(err)
		}
		s := lookupKey(key)
		switch {
		case s == nil && kind == KindFile:
			return nil, fmt.Errorf("%w: json: unknown field %q", base.ErrInvalidParams, key)
		case s == nil || !s.Takes(kind):
			continue
		case s.File == nil:
			if !bytes.Equal(raw, []byte("null")) {
				f.given[s] = true
			}
			continue
		}
		p := s.File(&f)
		if err := json.Unmarshal(raw, p); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, fmt.Errorf("%w: key %q: want %s, got a JSON %s", base.ErrInvalidParams, s.JSON, te.Type, te.Value)
			}
			return nil, jsonError(err)
		}
		if err := checkSet(s, p, s.JSON); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, jsonError(err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the JSON object", base.ErrInvalidParams)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%w: data after the JSON object", base.ErrInvalidParams)
	}
	return &f, nil
}

// lookupKey returns the setting of mooncake.json key, matched exactly, else in any case.
func lookupKey(key string) *Setting {
	var fold *Setting
	for i := range table {
		s := &table[i]
		if s.JSON == "" || !s.Takes(KindFile|KindEmbedded) {
			continue
		}
		if s.JSON == key {
			return s
		}
		if fold == nil && strings.EqualFold(s.JSON, key) {
			fold = s
		}
	}
	return fold
}

// checkSet runs s's check on the value p points at, when it is set (a nil pointer is a key
// not given); name is how the error names it.
func checkSet(s *Setting, p any, name string) error {
	if s.Check == nil {
		return nil
	}
	v := reflect.ValueOf(p).Elem()
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	return checked(s.Check(v.Interface()), name)
}

// jsonError turns encoding/json's errors into one-line messages of class ErrInvalidParams.
func jsonError(err error) error {
	if errors.Is(err, base.ErrInvalidParams) || errors.Is(err, base.ErrNotSupported) {
		return err
	}
	return fmt.Errorf("%w: %v", base.ErrInvalidParams, err)
}

// ApplyEnv fills what f does not set from the MOONCAKE_* variables the table declares
// (getenv reads the environment); each value is parsed as its setting's type (a setting may
// parse its own: EnvParse) and checked by its check. It returns the variables set that have
// no effect here, each with why (their values are never returned: some hold credentials).
func ApplyEnv(f *File, getenv func(string) string) (noEffect [][2]string, err error) {
	for i := range table {
		s := &table[i]
		for _, name := range s.Env {
			v := strings.TrimSpace(getenv(name))
			if v == "" {
				continue
			}
			if s.File == nil {
				if s.Status != "" {
					noEffect = append(noEffect, [2]string{name, s.Status})
				}
				continue
			}
			p := reflect.ValueOf(s.File(f)).Elem()
			if !p.IsZero() {
				continue // the file's key wins
			}
			if err := setEnv(s, p, name, v); err != nil {
				return noEffect, err
			}
		}
	}
	return noEffect, nil
}

// setEnv parses the variable name's value v into the field p of s, and checks it.
func setEnv(s *Setting, p reflect.Value, name, v string) error {
	var val any
	var err error
	switch {
	case s.EnvParse != nil:
		val, err = s.EnvParse(v)
	case p.Type() == reflect.TypeOf(AddressList(nil)):
		val, err = ParseAddressList(v)
		if err != nil {
			return fmt.Errorf("$%s: %w", name, err)
		}
		val = AddressList(val.([]string))
	case p.Type() == reflect.TypeOf((*base.Bytes)(nil)):
		var b base.Bytes
		b, err = base.ParseBytes(v)
		val = &b
	case p.Type() == reflect.TypeOf((*bool)(nil)):
		var on bool
		on, err = ParseBool(v)
		val = &on
	case p.Type() == reflect.TypeOf(json.RawMessage(nil)):
		val, _ = json.Marshal(v)
		val = json.RawMessage(val.([]byte))
	case p.Kind() == reflect.String:
		val = v
	default:
		panic("config: no way to read $" + name) // TestTable
	}
	switch {
	case err != nil && s.EnvParse != nil:
		return err // it names the variable
	case err != nil:
		// "$MOONCAKE_GLOBAL_SEGMENT_SIZE "lots": invalid size ...", the class said once.
		return fmt.Errorf("%w: $%s %q: %s", base.ErrInvalidParams, name, v, strings.TrimPrefix(err.Error(), base.ErrInvalidParams.Error()+": "))
	}
	if val == nil {
		return nil // EnvParse: leave it unset
	}
	p.Set(reflect.ValueOf(val))
	if s.EnvParse != nil {
		return nil // it checked what it read
	}
	return checkSet(s, p.Addr().Interface(), fmt.Sprintf("$%s %q", name, v))
}

// ParseBool parses a boolean as Mooncake's Python package does: true/false, 1/0, yes/no,
// on/off, in any case.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("want true or false")
}

// NoEffect lists the keys of f (the file's, or a variable's in their place) that have no
// effect here, each with why, in the table's order; skip names keys whose notice the caller
// words itself.
func (f *File) NoEffect(skip ...string) [][2]string {
	var out [][2]string
	for i := range table {
		s := &table[i]
		if s.JSON == "" || s.Status == "" || slices.Contains(skip, s.JSON) {
			continue
		}
		if f.given[s] || (s.File != nil && !reflect.ValueOf(s.File(f)).Elem().IsZero()) {
			out = append(out, [2]string{s.JSON, s.Status})
		}
	}
	return out
}

// EnvDocs renders docs/config.md's table of the MOONCAKE_* variables.
func EnvDocs() string {
	var b strings.Builder
	b.WriteString("| variable | here |\n|---|---|\n")
	for i := range table {
		s := &table[i]
		if len(s.Env) == 0 {
			continue
		}
		names := make([]string, len(s.Env))
		for i, n := range s.Env {
			names[i] = "`" + n + "`"
		}
		here := "accepted, no effect: " + s.Status
		if s.File != nil || s.Status == "" {
			what, key := s.EnvHelp, s.JSON
			if what == "" {
				what = s.Help
			}
			if key == "" {
				key = s.Name
			}
			here = "`" + key + "`: " + what
		}
		fmt.Fprintf(&b, "| %s | %s |\n", strings.Join(names, ", "), escape(here))
	}
	return b.String()
}

// FileDocs renders docs/config.md's table of the mooncake.json keys.
func FileDocs() string {
	var b strings.Builder
	b.WriteString("| key | read by | here |\n|---|---|---|\n")
	for i := range table {
		s := &table[i]
		if s.JSON == "" {
			continue
		}
		by := "the CLI"
		if s.Takes(KindEmbedded) {
			by = "the CLI, the C library"
		}
		here := "accepted, no effect: " + s.Status
		if s.Status == "" {
			here = s.Help
			if s.Takes(KindWorker) {
				here = "`--" + s.Name + "`: " + here
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.JSON, by, escape(here))
	}
	return b.String()
}
