package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLITenantQuota: `mooncake tenant quota set` keeps a quota the default tenant's puts then
// meet (TENANT_QUOTA_EXCEEDED), `tenant ls` and `status` show the tenant's use, `quota rm`
// lifts it, bad input is a usage error, and `_default` sets the default quota of tenants
// without their own.
func TestCLITenantQuota(t *testing.T) {
	bin := buildBinary(t)
	_, master := startStandalone(t, bin, filepath.Join(t.TempDir(), "data"), "--global_segment_size", "64MiB")
	env := []string{envMaster + "=" + master}
	cli := func(stdin []byte, args ...string) cliResult {
		t.Helper()
		return runBin(t, bin, env, bytes.NewReader(stdin), args...)
	}
	ok := func(r cliResult) cliResult {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		return r
	}
	if r := ok(cli(nil, "tenant", "quota", "set", "default", "1KB")); r.stdout != "tenant default: quota 1.0 KiB, NVMe quota none\n" {
		t.Fatalf("quota set: %q", r.stdout)
	}
	ok(cli(bytes.Repeat([]byte("x"), 600), "put", "a", "-"))
	if r := cli(bytes.Repeat([]byte("x"), 600), "put", "b", "-"); r.code == 0 || !strings.Contains(r.stderr, "TENANT_QUOTA_EXCEEDED") && !strings.Contains(r.stderr, "quota") {
		t.Fatalf("a put over the quota: exit %d, %q", r.code, r.stderr)
	}
	if r := ok(cli(nil, "tenant", "ls")); !strings.Contains(r.stdout, "default") || !strings.Contains(r.stdout, "1.0 KiB") || !strings.Contains(r.stdout, "600 B") {
		t.Fatalf("tenant ls:\n%s", r.stdout)
	}
	if r := ok(cli(nil, "status")); !strings.Contains(r.stdout, "TENANT") || !strings.Contains(r.stdout, "600 B") {
		t.Fatalf("status:\n%s", r.stdout)
	}
	if r := cli(nil, "tenant", "quota", "set", "a b", "1KB"); r.code != 2 {
		t.Fatalf("a bad tenant id: exit %d, %q", r.code, r.stderr)
	}
	if r := ok(cli(nil, "tenant", "quota", "set", "t", "1KB", "--nvme", "1GB")); !strings.Contains(r.stdout, "NVMe quota 1.0 GiB") {
		t.Fatalf("an NVMe quota: %q", r.stdout)
	}
	if r := ok(cli(nil, "tenant", "ls")); !strings.Contains(r.stdout, "NVME QUOTA") || !strings.Contains(r.stdout, "1.0 GiB") {
		t.Fatalf("tenant ls with an NVMe quota:\n%s", r.stdout)
	}
	if r := cli(nil, "tenant", "quota", "set", "t", "1KB", "--nvme", "lots"); r.code != 2 {
		t.Fatalf("a bad --nvme: exit %d, %q", r.code, r.stderr)
	}
	ok(cli(nil, "tenant", "quota", "rm", "default"))
	ok(cli(bytes.Repeat([]byte("x"), 600), "put", "b", "-"))

	// The default quota: `_default` names it. The default tenant, without a quota of its own
	// now, holds 1200 bytes, over a default of 1KB: its next put is refused, and ls marks its
	// quota as the default's; removing the default lifts it.
	if r := ok(cli(nil, "tenant", "quota", "set", "_default", "1KB")); r.stdout != "default quota (tenants without their own): quota 1.0 KiB, NVMe quota none\n" {
		t.Fatalf("quota set _default: %q", r.stdout)
	}
	if r := cli(bytes.Repeat([]byte("x"), 10), "put", "c", "-"); r.code == 0 || !strings.Contains(r.stderr, "TENANT_QUOTA_EXCEEDED") && !strings.Contains(r.stderr, "quota") {
		t.Fatalf("a put over the default quota: exit %d, %q", r.code, r.stderr)
	}
	if r := ok(cli(nil, "tenant", "ls")); !strings.Contains(r.stdout, "_default") || !strings.Contains(r.stdout, "1.0 KiB (default)") {
		t.Fatalf("tenant ls with a default quota:\n%s", r.stdout)
	}
	if r := cli(nil, "tenant", "quota", "set", "_team", "1KB"); r.code != 2 || !strings.Contains(r.stderr, "reserved") {
		t.Fatalf("a reserved tenant id: exit %d, %q", r.code, r.stderr)
	}
	if r := ok(cli(nil, "tenant", "quota", "rm", "_default")); r.stdout != "default quota (tenants without their own): no quota\n" {
		t.Fatalf("quota rm _default: %q", r.stdout)
	}
	ok(cli(bytes.Repeat([]byte("x"), 10), "put", "c", "-"))
}
