package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/internal/testutil"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
)

// connectTenant connects a client of tenant t ("" for the default) to c.
func connectTenant(t *testing.T, c *testCluster, tenant string) *client.Client {
	t.Helper()
	cli, err := client.Connect(context.Background(), client.Config{MasterAddresses: c.masterAddrs(),
		Timeout: 10 * time.Second, Logger: testLogger(), TenantID: tenant, LookupCacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// tenantUsage returns tenant t's row of cli.Tenants.
func tenantUsage(t *testing.T, cli *client.Client, tenant string) client.TenantStatus {
	t.Helper()
	ts, err := cli.Tenants(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ts {
		if s.TenantID == tenant {
			return s
		}
	}
	return client.TenantStatus{TenantID: tenant}
}

// TestTenantsQuotaAndIsolation is issue 21's check of item 1 on a 3-master cluster: two
// tenants at their quotas under concurrent puts acknowledge nothing over quota, neither sees or
// removes the other's objects (nor does the default tenant), and the quotas hold after a
// leader change.
func TestTenantsQuotaAndIsolation(t *testing.T) {
	c := startMasters(t, 3, nil)
	c.addWorker("", nil)
	ctx := context.Background()
	admin := connectTenant(t, c, "")
	const (
		size  = 16 << 10
		quota = 10 * size // 10 objects each
		tries = 32        // per tenant, all at once
	)
	tenants := []string{"team-a", "team-b"}
	clis := map[string]*client.Client{}
	for _, tn := range tenants {
		if err := admin.SetTenantQuota(ctx, tn, quota, 0); err != nil {
			t.Fatal(err)
		}
		clis[tn] = connectTenant(t, c, tn)
	}
	// team-a also gets an NVMe quota: kept in raft beside the DRAM quota (the workers hold it).
	const nvmeQuota = 1 << 30
	if err := admin.SetTenantQuota(ctx, "team-a", quota, nvmeQuota); err != nil {
		t.Fatalf("an NVMe quota: %v", err)
	}
	if err := admin.SetTenantQuota(ctx, "team-a", quota, -1); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("a negative NVMe quota: %v, want INVALID_PARAMS", err)
	}
	val := func(tn string, i int) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("%s/%d;", tn, i)), size/8)[:size]
	}

	// Both tenants put the same key names at once, each past its quota.
	var mu sync.Mutex
	acked := map[string][]string{}
	var wg sync.WaitGroup
	for _, tn := range tenants {
		for i := range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("k/%02d", i)
				err := clis[tn].Put(ctx, key, val(tn, i), client.ReplicateConfig{})
				switch {
				case err == nil:
					mu.Lock()
					acked[tn] = append(acked[tn], key)
					mu.Unlock()
				case !errors.Is(err, base.ErrQuotaExceeded):
					t.Errorf("%s put %s: %v, want a quota refusal", tn, key, err)
				}
			}()
		}
	}
	wg.Wait()
	for _, tn := range tenants {
		n := len(acked[tn])
		if n*size > quota || n == 0 {
			t.Fatalf("%s: %d puts of %d bytes acknowledged under a quota of %d", tn, n, size, quota)
		}
		u := tenantUsage(t, admin, tn)
		if u.UsedBytes != int64(n*size) || u.CommittedCount != int64(n) || u.MaxBytes != quota {
			t.Fatalf("%s: usage %+v, want %d objects of %d bytes under %d", tn, u, n, size, quota)
		}
		// Its listing is its acknowledged keys, no more; each reads back its own bytes.
		ls, err := clis[tn].List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, k := range ls {
			got = append(got, k.Key)
		}
		slices.Sort(acked[tn])
		if !slices.Equal(got, acked[tn]) {
			t.Fatalf("%s lists %v, acknowledged %v", tn, got, acked[tn])
		}
		for _, k := range acked[tn] {
			var i int
			fmt.Sscanf(k, "k/%d", &i)
			if b, err := clis[tn].Get(ctx, k); err != nil || !bytes.Equal(b, val(tn, i)) {
				t.Fatalf("%s get %s: %v (%d bytes)", tn, k, err, len(b))
			}
		}
	}
	// The default tenant sees neither.
	if ls, err := admin.List(ctx, ""); err != nil || len(ls) != 0 {
		t.Fatalf("the default tenant lists %v (%v)", ls, err)
	}
	if ok, err := admin.Exists(ctx, acked["team-a"][0]); err != nil || ok {
		t.Fatalf("the default tenant sees team-a's %s: %v %v", acked["team-a"][0], ok, err)
	}

	// team-b cannot remove team-a's objects: a key only team-a holds is not found for team-b,
	// and team-b's regex and remove-all remove only its own.
	a, b := clis["team-a"], clis["team-b"]
	onlyA := ""
	for _, k := range acked["team-a"] {
		if !slices.Contains(acked["team-b"], k) {
			onlyA = k
		}
	}
	if onlyA != "" {
		if err := b.Remove(ctx, onlyA); !errors.Is(err, base.ErrObjectNotFound) {
			t.Fatalf("team-b removes team-a's %s: %v", onlyA, err)
		}
	}
	// NB: which keys a tenant got acknowledged depends on the race for its quota, so the
	// pattern names one it holds.
	if n, err := b.RemoveByRegex(ctx, "^"+regexp.QuoteMeta(acked["team-b"][0])+"$"); err != nil || n == 0 {
		t.Fatalf("team-b remove by regex: %d, %v", n, err)
	}
	if n, err := b.RemoveAll(ctx); err != nil || int(n) > len(acked["team-b"]) {
		t.Fatalf("team-b remove all: %d, %v", n, err)
	}
	if n, err := admin.RemoveAll(ctx); err != nil || n != 0 {
		t.Fatalf("the default tenant's remove all removed %d (%v)", n, err)
	}
	ls, err := a.List(ctx, "")
	if err != nil || len(ls) != len(acked["team-a"]) {
		t.Fatalf("team-a holds %d objects after team-b's removals (%v), want %d", len(ls), err, len(acked["team-a"]))
	}
	if u := tenantUsage(t, admin, "team-b"); u.UsedBytes != 0 || u.CommittedCount != 0 {
		t.Fatalf("team-b after remove all: %+v", u)
	}

	// The status document and the metrics carry the tenants.
	st := newDriver(t, c.masterAddrs()).status()
	if i := slices.IndexFunc(st.Tenants, func(s master.TenantStatus) bool { return s.TenantID == "team-a" }); i < 0 ||
		st.Tenants[i].UsedBytes != int64(len(acked["team-a"])*size) {
		t.Fatalf("status tenants: %+v", st.Tenants)
	}

	scraped := false
	for _, m := range c.masters {
		if !m.IsLeader() {
			continue
		}
		scraped = true
		_, body := httpGet(t, "http://"+m.MetricsAddr()+"/metrics")
		for _, want := range []string{fmt.Sprintf(`mooncake_tenant_quota_used_bytes{tenant_id="team-a"} %d`, len(acked["team-a"])*size),
			fmt.Sprintf(`mooncake_tenant_quota_max_bytes{tenant_id="team-a"} %d`, quota),
			`mooncake_tenant_quota_reject_total{reason="quota_exceeded",tenant_id="team-a"}`} {
			if !strings.Contains(body, want) {
				t.Errorf("leader /metrics lacks %q:\n%s", want, grepLines(body, "mooncake_tenant"))
			}
		}
	}
	if !scraped {
		t.Fatal("no master leads")
	}

	// A leader change keeps the quotas: team-a is still full, team-b may fill up again.
	c.transferLeadership(ctx)
	if err := a.Put(ctx, "after/1", val("team-a", 99), client.ReplicateConfig{}); !errors.Is(err, base.ErrQuotaExceeded) {
		t.Fatalf("team-a put over quota after a leader change: %v", err)
	}
	for i := range quota / size {
		if err := b.Put(ctx, fmt.Sprintf("after/%d", i), val("team-b", i), client.ReplicateConfig{}); err != nil {
			t.Fatalf("team-b put %d after a leader change: %v", i, err)
		}
	}
	if err := b.Put(ctx, "after/over", val("team-b", 0), client.ReplicateConfig{}); !errors.Is(err, base.ErrQuotaExceeded) {
		t.Fatalf("team-b over quota after a leader change: %v", err)
	}
	if u := tenantUsage(t, admin, "team-a"); u.MaxBytes != quota || u.NVMeMaxBytes != nvmeQuota {
		t.Fatalf("team-a's quotas after a leader change: %+v", u)
	}
}

// TestTenantQuotaHTTP: Mooncake's /tenants/quota endpoints set, read and delete a quota that
// puts then meet, with Mooncake's shapes and status codes.
func TestTenantQuotaHTTP(t *testing.T) {
	c := startMasters(t, 1, nil)
	m := c.masters[0]
	eventually(t, "leader", m.IsLeader)
	c.addWorker("", nil)
	url := "http://" + m.MetricsAddr() + "/tenants/quota"
	do := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp.StatusCode, v
	}
	if code, v := do("GET", "/query?tenant_id=team-a", ""); code != 404 || v["success"] != false {
		t.Fatalf("unknown tenant: %d %v", code, v)
	}
	for _, bad := range []string{"", "{}", `{"max_bytes": -1}`, `{"max_bytes": 1, "extra": 2}`, "not json"} {
		if code, v := do("PUT", "/query?tenant_id=team-a", bad); code != 400 {
			t.Fatalf("PUT %q: %d %v", bad, code, v)
		}
	}
	if code, v := do("PUT", "/query?tenant_id=team-a", `{"max_bytes": 1000, "nvme_max_bytes": 5000}`); code != 200 ||
		v["max_bytes"] != 1000.0 || v["nvme_max_bytes"] != 5000.0 {
		t.Fatalf("an NVMe quota: %d %v", code, v)
	}
	if code, v := do("GET", "/query?tenant_id=team-a", ""); code != 200 || v["nvme_max_bytes"] != 5000.0 {
		t.Fatalf("GET of an NVMe quota: %d %v", code, v)
	}
	if code, v := do("PUT", "/query?tenant_id=team-a", `{"max_bytes": 1000, "nvme_max_bytes": -5}`); code != 400 {
		t.Fatalf("a negative NVMe quota: %d %v", code, v)
	}
	if code, v := do("PUT", "/query?tenant_id=team-a", `{"max_bytes": 1000}`); code != 200 || v["max_bytes"] != 1000.0 {
		t.Fatalf("PUT: %d %v", code, v)
	}
	cli := connectTenant(t, c, "team-a")
	ctx := context.Background()
	if err := cli.Put(ctx, "k1", make([]byte, 600), client.ReplicateConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := cli.Put(ctx, "k2", make([]byte, 600), client.ReplicateConfig{}); !errors.Is(err, base.ErrQuotaExceeded) {
		t.Fatalf("put over the quota: %v", err)
	}
	if code, v := do("GET", "/query?tenant_id=team-a", ""); code != 200 || v["used_bytes"] != 600.0 || v["committed_count"] != 1.0 {
		t.Fatalf("GET: %d %v", code, v)
	}
	if code, v := do("GET", "", ""); code != 200 || len(v["tenants"].([]any)) != 1 {
		t.Fatalf("list: %d %v", code, v)
	}
	if code, v := do("DELETE", "/query?tenant_id=team-a", ""); code != 200 || v["success"] != true {
		t.Fatalf("DELETE: %d %v", code, v)
	}
	if code, _ := do("DELETE", "/query?tenant_id=team-a", ""); code != 404 {
		t.Fatalf("DELETE again: %d", code)
	}
	if err := cli.Put(ctx, "k2", make([]byte, 600), client.ReplicateConfig{}); err != nil {
		t.Fatalf("put after the quota was deleted: %v", err)
	}
	if code, v := do("GET", "/_default", ""); code != 200 || v["max_bytes"] != 0.0 || v["tenant_id"] != "_default" {
		t.Fatalf("GET _default: %d %v", code, v)
	}
	// The default quota (Mooncake's _default policy): team-a, which no longer has a quota of
	// its own and holds 1200 bytes, is now over it; Mooncake's reserved ids are refused.
	if code, v := do("PUT", "/_default", `{"max_bytes": -1}`); code != 400 {
		t.Fatalf("PUT _default negative: %d %v", code, v)
	}
	if code, v := do("PUT", "/_default", `{"nvme_max_bytes": 5}`); code != 400 {
		t.Fatalf("PUT _default without max_bytes: %d %v", code, v)
	}
	if code, v := do("PUT", "/_default", `{"max_bytes": 1000, "nvme_max_bytes": 4000}`); code != 200 || v["max_bytes"] != 1000.0 || v["nvme_max_bytes"] != 4000.0 {
		t.Fatalf("PUT _default: %d %v", code, v)
	}
	if code, v := do("GET", "/_default", ""); code != 200 || v["max_bytes"] != 1000.0 || v["nvme_max_bytes"] != 4000.0 {
		t.Fatalf("GET _default after PUT: %d %v", code, v)
	}
	if code, v := do("GET", "/query?tenant_id=team-a", ""); code != 200 || v["max_bytes"] != 1000.0 || v["has_explicit_policy"] != false {
		t.Fatalf("GET team-a under the default: %d %v", code, v)
	}
	if err := cli.Put(ctx, "k3", make([]byte, 10), client.ReplicateConfig{}); !errors.Is(err, base.ErrQuotaExceeded) {
		t.Fatalf("put over the default quota: %v", err)
	}
	for _, id := range []string{"_default", "_x"} {
		if code, v := do("PUT", "/query?tenant_id="+id, `{"max_bytes": 5}`); code != 400 || !strings.Contains(fmt.Sprint(v["error_message"]), "reserved") {
			t.Fatalf("PUT query of %s: %d %v", id, code, v)
		}
	}
	if code, _ := do("DELETE", "/query?tenant_id=team-a", ""); code != 404 {
		t.Fatalf("DELETE of a tenant under the default: %d", code)
	}
	if code, v := do("PUT", "/_default", `{"max_bytes": 0}`); code != 200 || v["max_bytes"] != 0.0 {
		t.Fatalf("PUT _default 0: %d %v", code, v)
	}
	if err := cli.Put(ctx, "k3", make([]byte, 10), client.ReplicateConfig{}); err != nil {
		t.Fatalf("put after the default was removed: %v", err)
	}
}

// TestTenantEvictionByShare: under memory pressure the worker evicts the objects of the tenant
// over its share first, although another tenant's objects are older (the usual victims).
func TestTenantEvictionByShare(t *testing.T) {
	c := startMasters(t, 1, nil)
	eventually(t, "leader", c.masters[0].IsLeader)
	w := c.addWorker("", func(cfg *worker.Config) { cfg.GlobalSegmentSize = 4 << 20 })
	ctx := context.Background()
	admin, a, b := connectTenant(t, c, ""), connectTenant(t, c, "team-a"), connectTenant(t, c, "team-b")
	const size = 256 << 10
	for _, tn := range []string{"team-a", "team-b"} {
		if err := admin.SetTenantQuota(ctx, tn, 3<<20, 0); err != nil {
			t.Fatal(err)
		}
	}
	put := func(cli *client.Client, prefix string, n int) []string { return putN(t, cli, prefix, n, size) }
	bKeys := put(b, "b", 6) // the oldest objects: the usual victims
	aKeys := put(a, "a", 8)
	// team-a's quota drops under what it holds: it is over its share of the one worker.
	if err := admin.SetTenantQuota(ctx, "team-a", size, 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the worker learns team-a is over its share", func() bool {
		return slices.Contains(w.TestHooks().Engine().TenantsOverShare(), "team-a")
	})
	put(admin, "d", 6) // past the worker's high watermark: eviction
	exists := func(cli *client.Client, keys []string) int { return countExisting(t, cli, keys) }
	eventually(t, "team-a's objects are evicted", func() bool { return exists(a, aKeys) < len(aKeys) })
	if n := exists(b, bKeys); n != len(bKeys) {
		t.Fatalf("team-b, within its share, lost %d of %d objects while team-a was over its share", len(bKeys)-n, len(bKeys))
	}
}

// TestTenantNVMeQuota: a tenant's NVMe quota, learned by the worker as its share, keeps the
// tenant's objects on NVMe under it: its oldest spilled objects are evicted (lost, so the
// master forgets them) while another tenant's spilled objects all stay.
func TestTenantNVMeQuota(t *testing.T) {
	c := startMasters(t, 1, nil)
	eventually(t, "leader", c.masters[0].IsLeader)
	w := c.addWorker(t.TempDir(), func(cfg *worker.Config) { cfg.GlobalSegmentSize = 4 << 20 })
	ctx := context.Background()
	admin, a, b := connectTenant(t, c, ""), connectTenant(t, c, "team-a"), connectTenant(t, c, "team-b")
	const size = 256 << 10
	if err := admin.SetTenantQuota(ctx, "team-a", 0, 4*size); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the worker learns team-a's NVMe share", func() bool {
		return w.TestHooks().Engine().TenantNVMeShare("team-a") == 4*size
	})
	put := func(cli *client.Client, prefix string, n int) []string { return putN(t, cli, prefix, n, size) }
	aKeys := put(a, "a", 8) // the oldest: spilled first
	bKeys := put(b, "b", 8)
	put(admin, "d", 8) // past DRAM: a's and b's objects spill
	exists := func(cli *client.Client, keys []string) int { return countExisting(t, cli, keys) }
	eventually(t, "team-a keeps 4 objects (its NVMe quota)", func() bool { return exists(a, aKeys) == 4 })
	for i, k := range aKeys {
		if ok, err := a.Exists(ctx, k); err != nil || ok != (i >= 4) {
			t.Fatalf("team-a's %s: exists %t, %v; want its 4 oldest gone", k, ok, err)
		}
	}
	if n := exists(b, bKeys); n != len(bKeys) {
		t.Fatalf("team-b, without an NVMe quota, lost %d of %d objects", len(bKeys)-n, len(bKeys))
	}
	if m := w.TestHooks().Engine().Metrics(); m.TenantNVMeBytes["team-a"] > 4*size || m.NVMeQuotaEvictions != 4 {
		t.Fatalf("worker metrics %+v", m)
	}
}

// putN puts n objects of size bytes named prefix/0 ... and returns their keys.
func putN(t *testing.T, cli *client.Client, prefix string, n, size int) []string {
	t.Helper()
	var keys []string
	for i := range n {
		k := fmt.Sprintf("%s/%d", prefix, i)
		if err := cli.Put(context.Background(), k, bytes.Repeat([]byte{byte(i)}, size), client.ReplicateConfig{}); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		keys = append(keys, k)
	}
	return keys
}

// countExisting returns how many of keys exist for cli.
func countExisting(t *testing.T, cli *client.Client, keys []string) int {
	t.Helper()
	n := 0
	for _, k := range keys {
		if ok, err := cli.Exists(context.Background(), k); err != nil {
			t.Fatal(err)
		} else if ok {
			n++
		}
	}
	return n
}

// TestTenantDefaultQuota: the default quota (Mooncake's _default policy) on a 3-master cluster.
// Seeded by --default_tenant_quota_bytes on the first leader, then changed with the client (the
// CLI's call), it refuses two tenants without a quota of their own past it, each counted alone,
// with TENANT_QUOTA_EXCEEDED (-1700), while a tenant with its own bigger quota is not held to
// it; it holds after a leadership transfer and after the leader is shut down, and the new
// leaders do not reseed it from the flag.
func TestTenantDefaultQuota(t *testing.T) {
	const (
		size = 16 << 10
		seed = 4 * size
		def  = 6 * size
		own  = 20 * size
	)
	var ticks sync.Map // *master.Master -> *atomic.Int64: its leader-loop ticks while leading
	c := startMasters(t, 3, func(cfg *master.Config) {
		cfg.DefaultTenantQuotaBytes = seed
		cfg.Test.AfterLeaderTick = func(m *master.Master) {
			n, _ := ticks.LoadOrStore(m, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}
	})
	// leaderTicked waits until the leader's loop ticked twice more (it seeds the default
	// quota from the flag at each tick when the raft state never had one).
	leaderTicked := func() {
		t.Helper()
		m := c.masters[c.waitLeader()]
		n, _ := ticks.LoadOrStore(m, new(atomic.Int64))
		from := n.(*atomic.Int64).Load()
		testutil.WaitFor(t, "two leader ticks", testWait, func() error {
			if n.(*atomic.Int64).Load() < from+2 {
				return errors.New("not yet")
			}
			return nil
		})
	}
	c.addWorker("", nil)
	ctx := context.Background()
	admin := connectTenant(t, c, "")
	defaultQuota := func() *client.TenantStatus {
		st, err := admin.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.TenantDefault
	}
	testutil.WaitFor(t, "the default quota seeded from the flag", testWait, func() error {
		if d := defaultQuota(); d == nil || d.MaxBytes != seed {
			return fmt.Errorf("default quota %+v", d)
		}
		return nil
	})
	if err := admin.SetTenantQuota(ctx, base.DefaultQuotaTenant, def, 0); err != nil {
		t.Fatal(err)
	}
	if err := admin.SetTenantQuota(ctx, "team-big", own, 0); err != nil {
		t.Fatal(err)
	}
	if err := admin.SetTenantQuota(ctx, "_other", own, 0); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("a quota for a reserved id: %v, want INVALID_PARAMS", err)
	}
	clis := map[string]*client.Client{}
	for _, tn := range []string{"team-c", "team-d", "team-big"} {
		clis[tn] = connectTenant(t, c, tn)
	}
	n := 0 // puts so far per tenant, for distinct keys
	// fill puts each tenant without its own quota up to the default and checks the next put
	// is refused with -1700; team-big goes past the default.
	fill := func(when string, held int) {
		t.Helper()
		for _, tn := range []string{"team-c", "team-d"} {
			for i := held; i < def/size; i++ {
				if err := clis[tn].Put(ctx, fmt.Sprintf("k%d-%d", n, i), make([]byte, size), client.ReplicateConfig{}); err != nil {
					t.Fatalf("%s: %s put %d under the default quota: %v", when, tn, i, err)
				}
			}
			err := clis[tn].Put(ctx, fmt.Sprintf("k%d-over", n), make([]byte, size), client.ReplicateConfig{})
			if !errors.Is(err, base.ErrQuotaExceeded) || base.CodeOf(err).Mooncake() != base.MooncakeTenantQuotaExceeded {
				t.Fatalf("%s: %s put over the default quota: %v (code %d), want TENANT_QUOTA_EXCEEDED -1700", when, tn, err, base.CodeOf(err).Mooncake())
			}
		}
		for i := range def/size + 2 {
			if err := clis["team-big"].Put(ctx, fmt.Sprintf("k%d-%d", n, i), make([]byte, size), client.ReplicateConfig{}); err != nil {
				t.Fatalf("%s: team-big put %d under its own quota: %v", when, i, err)
			}
		}
		n++
	}
	fill("first leader", 0)

	st, err := admin.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Tenants {
		switch s.TenantID {
		case "team-c", "team-d":
			if s.MaxBytes != def || s.HasExplicitPolicy || s.UsedBytes != def {
				t.Fatalf("status of %s: %+v, want the default quota %d, full", s.TenantID, s, def)
			}
		case "team-big":
			if s.MaxBytes != own || !s.HasExplicitPolicy {
				t.Fatalf("status of team-big: %+v, want its own quota %d", s, own)
			}
		}
	}
	_, body := httpGet(t, "http://"+c.leaderOf().MetricsAddr()+"/metrics")
	for _, want := range []string{fmt.Sprintf(`mooncake_tenant_quota_max_bytes{tenant_id="_default"} %d`, def),
		fmt.Sprintf(`mooncake_tenant_quota_max_bytes{tenant_id="team-c"} %d`, def),
		`mooncake_tenant_quota_explicit_policy{tenant_id="team-c"} 0`, `mooncake_tenant_quota_explicit_policy{tenant_id="team-big"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("leader /metrics lacks %q:\n%s", want, grepLines(body, "mooncake_tenant"))
		}
	}

	// A leadership transfer: the default (not the flag's seed) still holds. Removals make room
	// for the next round.
	c.transferLeadership(ctx)
	leaderTicked()
	if d := defaultQuota(); d == nil || d.MaxBytes != def {
		t.Fatalf("default quota after a leadership transfer: %+v, want %d (the flag must not reseed it)", d, def)
	}
	for _, tn := range []string{"team-c", "team-d"} {
		err := clis[tn].Put(ctx, "after-transfer", make([]byte, size), client.ReplicateConfig{})
		if !errors.Is(err, base.ErrQuotaExceeded) {
			t.Fatalf("%s over the default quota after a leadership transfer: %v", tn, err)
		}
		if _, err := clis[tn].RemoveAll(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The leader shut down: the new leader enforces the same default.
	old := c.leaderIndex()
	sctx, cancel := context.WithTimeout(ctx, testWait)
	if err := c.masters[old].Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	c.masters[old] = nil
	leaderTicked()
	fill("after the leader was shut down", 0)
	if d := defaultQuota(); d == nil || d.MaxBytes != def {
		t.Fatalf("default quota after the leader was shut down: %+v, want %d", d, def)
	}
}
