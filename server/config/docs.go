package config

import (
	"fmt"
	"slices"
	"strings"
)

// MooncakeFlags returns the settings that are flags of Mooncake's binary bin (BinMaster,
// BinClient), in the table's order.
func MooncakeFlags(bin string) []*Setting {
	var out []*Setting
	for i := range table {
		if s := &table[i]; s.Mooncake != nil && slices.Contains(s.Mooncake.Bins, bin) {
			out = append(out, s)
		}
	}
	return out
}

// Ours names what Mooncake's flag s sets here: Mooncake.Ours, else the flag itself when s is
// wired, else "" (no effect).
func (s *Setting) Ours() string {
	switch {
	case !s.Wired():
		return ""
	case s.Mooncake != nil && s.Mooncake.Ours != "":
		return s.Mooncake.Ours
	}
	return "--" + s.Name
}

// MooncakeFlagDocs renders docs/config.md's table of bin's flags.
func MooncakeFlagDocs(bin string) string {
	var b strings.Builder
	b.WriteString("| flag | type | Mooncake's default | here |\n|---|---|---|---|\n")
	for _, s := range MooncakeFlags(bin) {
		def := "`" + s.Mooncake.Default + "`"
		if s.Mooncake.Default == "" {
			def = `""`
		}
		here := "accepted, no effect: " + s.Mooncake.Why
		if ours := s.Ours(); ours != "" {
			here = "`" + ours + "`: " + s.Mooncake.Why
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", s.Name, s.Mooncake.Type, def, escape(here))
	}
	return b.String()
}

// kindNames are the commands of each kind, as docs name them.
var kindNames = []struct {
	k    Kind
	name string
}{{KindMaster, "master"}, {KindWorker, "worker"}, {KindMooncakeClient, "mooncake_client"}, {KindStandalone, "standalone"}, {KindMetadataHTTP, "mooncake_http_metadata_server"}, {KindAPI, "Go API"}}

// SettingsDocs renders docs/config.md's table of every setting the table declares with an
// effect here: its name, the commands that take it, unit, default, Mooncake's names for it
// and what it does.
func SettingsDocs() string {
	var b strings.Builder
	b.WriteString("| setting | commands | unit | default | Mooncake's names | what it does |\n|---|---|---|---|---|---|\n")
	for i := range table {
		s := &table[i]
		if !s.Wired() {
			continue
		}
		var kinds []string
		for _, k := range kindNames {
			if s.Takes(k.k) {
				kinds = append(kinds, k.name)
			}
		}
		var names []string
		if s.Mooncake != nil {
			names = append(names, "`--"+s.Name+"` ("+strings.Join(s.Mooncake.Bins, ", ")+")")
		}
		if s.JSON != "" {
			names = append(names, "mooncake.json `"+s.JSON+"`")
		}
		for _, e := range s.Env {
			names = append(names, "`$"+e+"`")
		}
		def := format(s.Default)
		if def == "" {
			def = `""`
		}
		name := "`--" + s.Name + "`"
		if s.Takes(KindAPI) {
			name = "`" + s.Name + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | `%s` | %s | %s |\n", name, strings.Join(kinds, ", "), s.Unit, def,
			strings.Join(names, ", "), escape(s.Help))
	}
	return b.String()
}

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
