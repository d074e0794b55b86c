package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// chromiumFlags are the flags every headless run takes: no sandbox (tests run as root in CI
// containers), no GPU, and nothing that reaches the network on its own.
var chromiumFlags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
	// Virtual time: the page's 2 s refresh runs several times within the budget.
	"--virtual-time-budget=10000"}

// findChromium returns the browser, installing it with the project's script when missing.
func findChromium(t *testing.T) string {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", ".ci", "ensure-chromium.sh"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", script).Output()
	if err != nil {
		t.Fatalf("%s: %v (install chromium, e.g. apt-get install -y chromium)", script, err)
	}
	return strings.TrimSpace(string(out))
}

func runChromium(t *testing.T, browser string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := append(append([]string{}, chromiumFlags...), "--user-data-dir="+t.TempDir())
	cmd := exec.CommandContext(ctx, browser, append(all, args...)...)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v: %s", args, err, tail(errb.String(), 2000))
	}
	return out
}

// TestDashboardInChromium loads the master's dashboard in headless Chromium against
// `mooncake standalone` holding Qwen2-7B objects, reads the numbers the page shows from its
// DOM, and keeps a screenshot ($MOONCAKE_SCREENSHOT_DIR, else the system temp dir; the path
// is logged).
func TestDashboardInChromium(t *testing.T) {
	browser := findChromium(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	metricsPort := freePort(t)
	_, master := startStandalone(t, bin, filepath.Join(dir, "data"), "--global_segment_size", "128MiB", "--metrics_port", strconv.Itoa(metricsPort))
	env := []string{envMaster + "=" + master}
	cli := func(args ...string) {
		t.Helper()
		if r := runBin(t, bin, env, nil, args...); r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}
	cli("model", "add", "qwen2-7b", kvTestdata("qwen2-7b.json"), "--dtype", "float16")
	var tokens int64
	for i, n := range []int64{16, 64, 100, 256} {
		p := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(p, objectValue(3, i, n*qwenBPT), 0o644); err != nil {
			t.Fatal(err)
		}
		cli("put", "--tokens", fmt.Sprint(n), "--model", "qwen2-7b", fmt.Sprintf("chunk-%d", i), p)
		tokens += n
	}
	// Traffic while the page is open, for its rate charts.
	c := connectClient(t, master)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = c.Get(ctx, fmt.Sprintf("chunk-%d", i%4))
		}
	}()
	defer func() { stop(); wg.Wait() }()

	url := fmt.Sprintf("http://127.0.0.1:%d/", metricsPort)
	dom := string(runChromium(t, browser, "--dump-dom", url))
	read := func(re string) string {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("the page shows no %s:\n%s", re, tail(dom, 3000))
		}
		return m[1]
	}
	if v := read(`id="verdict"[^>]*>([^<]*)<`); v != "expected" {
		t.Fatalf("verdict %q", v)
	}
	if v := read(`data-model="qwen2-7b" data-field="tokens">([^<]*)<`); v != fmt.Sprint(tokens) {
		t.Fatalf("tokens %q, want %d", v, tokens)
	}
	if v := read(`id="tokens">([^<]*)<`); v != fmt.Sprint(tokens) {
		t.Fatalf("retained tokens %q, want %d", v, tokens)
	}
	wantBytes := fmt.Sprintf("%.1f MiB", float64(tokens*qwenBPT)/(1<<20))
	if v := read(`data-model="qwen2-7b" data-field="expected">([^<]*)<`); v != wantBytes {
		t.Fatalf("expected %q, want %q", v, wantBytes)
	}
	if v := read(`data-model="qwen2-7b" data-field="actual">([^<]*)<`); v != wantBytes {
		t.Fatalf("actual %q, want %q", v, wantBytes)
	}
	// The model's DRAM copies, from the worker's per-model tallies: its logical bytes plus the
	// arena's rounding (a few KiB, invisible at this precision).
	if v := read(`data-model="qwen2-7b" data-field="dram_allocated">([^<]*)<`); v != wantBytes {
		t.Fatalf("DRAM allocated %q, want %q", v, wantBytes)
	}
	if v := read(`data-worker="standalone" data-field="objects">([^<]*)<`); v != "4" {
		t.Fatalf("worker objects %q", v)
	}
	// The arena's populated share (--populate_arena, on by default): somewhere from 0 to 100%.
	if v := read(`data-worker="standalone" data-field="populated">([^<]*)<`); !regexp.MustCompile(`^\d{1,3}%$`).MatchString(v) {
		t.Fatalf("populated %q, want a share", v)
	}
	if v := read(`id="keys">([^<]*)<`); v != "4" {
		t.Fatalf("keys %q", v)
	}
	if v := read(`data-heartbeat="standalone"[^>]*>([^<]*)<`); !strings.HasSuffix(v, " s ago") {
		t.Fatalf("heartbeat %q, want \"N s ago\"", v)
	}
	if v := read(`id="chart-gets">([^<]*)<`); v == "-" {
		t.Fatalf("the gets chart has no rate")
	}
	if strings.Contains(dom, `id="err">unavailable`) {
		t.Fatalf("the page reports an error")
	}

	shotDir := os.Getenv("MOONCAKE_SCREENSHOT_DIR")
	if shotDir == "" {
		shotDir = os.TempDir()
	}
	shot := filepath.Join(shotDir, fmt.Sprintf("mooncake-dashboard-%s.png", time.Now().UTC().Format("20060102-150405")))
	runChromium(t, browser, "--window-size=1400,1600", "--screenshot="+shot, url)
	if st, err := os.Stat(shot); err != nil || st.Size() < 10000 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	t.Logf("dashboard screenshot: %s", shot)
}
