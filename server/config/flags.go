package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Register registers on fs every setting the command kind takes, each at its default, bound
// to its field of m (master settings) or w (worker settings); either may be nil. A Mooncake
// flag without effect here is registered as a GflagValue at Mooncake's default. A name fs
// already has is left alone (its field still gets its default): where two halves of one
// process share a flag (standalone's connection limits), the first registration binds it.
func Register(fs *pflag.FlagSet, kind Kind, m *Master, w *Worker) {
	for i := range table {
		s := &table[i]
		if !s.Takes(kind) {
			continue
		}
		p := s.field(m, w)
		if p != nil {
			setDefault(p, s.Default)
		}
		if fs.Lookup(s.Name) != nil {
			continue
		}
		if !s.Wired() {
			if s.Mooncake == nil {
				continue
			}
			fs.VarP(&GflagValue{Kind: s.Mooncake.Type, Val: s.Mooncake.Default}, s.Name, s.Short, "Mooncake's flag, accepted; no effect here: "+s.Mooncake.Why)
			if s.Mooncake.Type == "bool" {
				fs.Lookup(s.Name).NoOptDefVal = "true"
			}
			continue
		}
		if p == nil {
			continue
		}
		switch p := p.(type) {
		case *string:
			fs.StringVarP(p, s.Name, s.Short, *p, s.Help)
		case *int:
			fs.IntVarP(p, s.Name, s.Short, *p, s.Help)
		case *uint32:
			fs.Uint32VarP(p, s.Name, s.Short, *p, s.Help)
		case *float64:
			fs.Float64VarP(p, s.Name, s.Short, *p, s.Help)
		case *bool:
			fs.BoolVarP(p, s.Name, s.Short, *p, s.Help)
		case *base.Bytes:
			fs.VarP(p, s.Name, s.Short, s.Help)
		case *time.Duration:
			if s.Unit == "s" {
				fs.VarP((*seconds)(p), s.Name, s.Short, s.Help)
			} else {
				fs.DurationVarP(p, s.Name, s.Short, *p, s.Help)
			}
		default:
			panic(fmt.Sprintf("config: setting %s has a field of type %T", s.Name, p)) // TestTable
		}
	}
}

// seconds is a duration flag that takes a plain number as seconds, as Mooncake's
// --client_ttl does, and Go durations ("10s", "1m") too.
type seconds time.Duration

func (d *seconds) String() string { return time.Duration(*d).String() }
func (d *seconds) Type() string   { return "duration" }
func (d *seconds) Set(s string) error {
	v, err := ParseSeconds(s)
	if err != nil {
		return err
	}
	*d = seconds(v)
	return nil
}

// ParseSeconds reads a plain number as seconds ("10", "0.5") or a Go duration ("10s").
func ParseSeconds(s string) (time.Duration, error) {
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(n * float64(time.Second)), nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want seconds (10) or a duration (10s, 1m)")
	}
	return v, nil
}

// GflagValue holds a Mooncake flag without effect here: any value of its gflags type.
type GflagValue struct {
	Kind, Val string
}

func (v *GflagValue) String() string { return v.Val }
func (v *GflagValue) Type() string   { return v.Kind }
func (v *GflagValue) Set(s string) error {
	if err := CheckGflag(v.Kind, s); err != nil {
		return err
	}
	v.Val = s
	return nil
}

// CheckGflag reports whether s is a value of the gflags type kind.
func CheckGflag(kind, s string) error {
	var err error
	switch kind {
	case "bool":
		_, err = strconv.ParseBool(s)
	case "int32":
		_, err = strconv.ParseInt(s, 0, 32)
	case "int64":
		_, err = strconv.ParseInt(s, 0, 64)
	case "uint32":
		_, err = strconv.ParseUint(s, 0, 32)
	case "uint64":
		_, err = strconv.ParseUint(s, 0, 64)
	case "double":
		_, err = strconv.ParseFloat(s, 64)
	}
	if err != nil {
		return fmt.Errorf("want a %s", kind)
	}
	return nil
}

// SameGflag reports whether a and b are the same value of kind ("1" and "true", "0.50" and
// "0.5" are).
func SameGflag(kind, a, b string) bool {
	switch kind {
	case "bool":
		x, e1 := strconv.ParseBool(a)
		y, e2 := strconv.ParseBool(b)
		return e1 == nil && e2 == nil && x == y
	case "string":
		return a == b
	}
	x, e1 := strconv.ParseFloat(a, 64)
	y, e2 := strconv.ParseFloat(b, 64)
	return e1 == nil && e2 == nil && (x == y || math.Abs(x-y) < 1e-12)
}

// NoEffect returns one line for each flag of the command kind without effect here that fs
// was given with a value other than Mooncake's default: "--NAME=VALUE: accepted, no effect
// here: <why>". skip names flags whose line the caller words itself.
func NoEffect(fs *pflag.FlagSet, kind Kind, skip ...string) []string {
	var out []string
	for i := range table {
		s := &table[i]
		if !s.Takes(kind) || s.Wired() || s.Mooncake == nil || slices.Contains(skip, s.Name) {
			continue
		}
		fl := fs.Lookup(s.Name)
		if fl == nil || !fl.Changed || SameGflag(s.Mooncake.Type, fl.Value.String(), s.Mooncake.Default) {
			continue
		}
		out = append(out, fmt.Sprintf("--%s=%s: accepted, no effect here: %s", s.Name, fl.Value.String(), s.Mooncake.Why))
	}
	return out
}
