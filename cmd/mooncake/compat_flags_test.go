package main

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/server/config"
	"github.com/spf13/cobra"
)

var rewriteDocs = flag.Bool("rewrite", false, "rewrite the generated sections of docs/config.md")

// TestMooncakeFlagTable: every flag of the table is a flag of its command, each once; a flag
// with an equivalent names a flag the command has; values are checked against the gflags
// type.
func TestMooncakeFlagTable(t *testing.T) {
	e := &env{file: &fileConfig{}}
	for _, c := range []struct {
		bin string
		cmd *cobra.Command
	}{{nameMaster, newMooncakeMasterCmd(e)}, {nameClient, newMooncakeClientCmd(e)}} {
		seen := map[string]bool{}
		for _, f := range config.MooncakeFlags(c.bin) {
			if seen[f.Name] {
				t.Errorf("%s: --%s is in the table twice", c.bin, f.Name)
			}
			seen[f.Name] = true
			fl := c.cmd.Flags().Lookup(f.Name)
			if fl == nil {
				t.Errorf("%s does not take Mooncake's --%s", c.bin, f.Name)
				continue
			}
			if err := config.CheckGflag(f.Mooncake.Type, f.Mooncake.Default); err != nil {
				t.Errorf("%s --%s: default %q is not a %s", c.bin, f.Name, f.Mooncake.Default, f.Mooncake.Type)
			}
			if ours := f.Ours(); ours != "" {
				name := strings.TrimLeft(ours, "-")
				if c.cmd.Flags().Lookup(name) == nil {
					t.Errorf("%s --%s maps onto %s, which %s does not have", c.bin, f.Name, ours, c.bin)
				}
				if _, ok := fl.Value.(*config.GflagValue); ok {
					t.Errorf("%s --%s has an effect (%s) but is registered as one without", c.bin, f.Name, ours)
				}
			} else if _, ok := fl.Value.(*config.GflagValue); !ok {
				t.Errorf("%s --%s has no effect here but is registered by code, not by the table", c.bin, f.Name)
			}
			if f.Mooncake.Why == "" {
				t.Errorf("%s --%s: no reason", c.bin, f.Name)
			}
		}
	}
	v := &config.GflagValue{Kind: "uint32"}
	if v.Set("-1") == nil || v.Set("x") == nil || v.Set("7") != nil || v.String() != "7" {
		t.Errorf("uint32 value: %q", v.String())
	}
	if !config.SameGflag("bool", "1", "true") || !config.SameGflag("double", "0.50", "0.5") || config.SameGflag("string", "a", "b") {
		t.Error("sameGflag")
	}
}

// TestMooncakeFlagDocs: docs/config.md lists every flag of the table, generated from it
// (go test -run TestMooncakeFlagDocs ./cmd/mooncake -rewrite regenerates it).
func TestMooncakeFlagDocs(t *testing.T) {
	const path = "../../docs/config.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	sections := []struct{ name, want string }{
		{"settings", config.SettingsDocs()},
		{nameMaster + " flags", config.MooncakeFlagDocs(nameMaster)},
		{nameClient + " flags", config.MooncakeFlagDocs(nameClient)},
		{"MOONCAKE_* variables", config.EnvDocs()},
		{"mooncake.json keys", config.FileDocs()},
	}
	for _, sec := range sections {
		begin, end := "<!-- generated: "+sec.name+" -->\n", "<!-- end: "+sec.name+" -->\n"
		i, j := strings.Index(doc, begin), strings.Index(doc, end)
		if i < 0 || j < i {
			t.Fatalf("docs/config.md lacks the markers %q ... %q", begin, end)
		}
		want := sec.want
		if got := doc[i+len(begin) : j]; got != want {
			if !*rewriteDocs {
				t.Errorf("docs/config.md's %s table is not the table's; run go test -run TestMooncakeFlagDocs ./cmd/mooncake -rewrite", sec.name)
				continue
			}
			doc = doc[:i+len(begin)] + want + doc[j:]
		}
	}
	if *rewriteDocs {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMooncakeEnvNoEffect: a MOONCAKE_* variable without effect is noted once, by name only;
// MOONCAKE_OFFLOAD_ENABLED maps onto enable_ssd_offload as MOONCAKE_ENABLE_SSD_OFFLOAD does;
// every variable is in the table once.
func TestMooncakeEnvNoEffect(t *testing.T) {
	env := map[string]string{"MOONCAKE_OSS_ACCESS_KEY_SECRET": "s3cr3t", "MOONCAKE_HOST_ID": "h1",
		"MOONCAKE_OFFLOAD_ENABLED": "yes", "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH": "/mnt/ssd"}
	fc, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, n := range fc.notices {
		lines = append(lines, n.msg)
	}
	all := strings.Join(lines, "\n")
	if strings.Count(all, "accepted, no effect here") != 2 || !strings.Contains(all, "$MOONCAKE_OSS_ACCESS_KEY_SECRET: accepted") ||
		strings.Contains(all, "s3cr3t") || !strings.Contains(all, "$MOONCAKE_HOST_ID: accepted") {
		t.Errorf("notices:\n%s", all)
	}
	if fc.RootFSDir != "/mnt/ssd" {
		t.Errorf("MOONCAKE_OFFLOAD_ENABLED with MOONCAKE_OFFLOAD_FILE_STORAGE_PATH: root_fs_dir %q", fc.RootFSDir)
	}
	if _, err := loadConfig(func(k string) string { return map[string]string{"MOONCAKE_OFFLOAD_ENABLED": "maybe"}[k] }); err == nil {
		t.Error("MOONCAKE_OFFLOAD_ENABLED=maybe accepted")
	}
	seen := map[string]bool{}
	for _, g := range config.Settings() {
		for _, n := range g.Env {
			if seen[n] || !strings.HasPrefix(n, "MOONCAKE_") {
				t.Errorf("%s: twice, or not a MOONCAKE_ variable", n)
			}
			seen[n] = true
		}
	}
}
