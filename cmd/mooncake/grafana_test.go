package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// dashboardPath is the Grafana dashboard, inside the Helm chart so the chart can ship it as a
// ConfigMap (docs/deploy.md, "Dashboard").
var dashboardPath = filepath.Join("..", "..", "deploy", "helm", "mooncake", "dashboards", "mooncake-go.json")

// TestGrafanaDashboardMetrics is issue 24's item 3 check: every metric name a query of the
// dashboard uses is exported by the servers. A standalone (whose /metrics carries its master's
// and its worker's metrics) serves a put and a get, so labelled series exist, and its
// /metrics is scraped.
func TestGrafanaDashboardMetrics(t *testing.T) {
	exprs := dashboardExprs(t)
	if len(exprs) < 20 {
		t.Fatalf("%d queries in the dashboard: it lost its panels", len(exprs))
	}
	bin := buildBinary(t)
	metricsPort := freePort(t)
	_, master := startStandalone(t, bin, filepath.Join(t.TempDir(), "data"), "--global_segment_size", "64MiB",
		"--metrics_port", strconv.Itoa(metricsPort))
	env := []string{envMaster + "=" + master}
	if r := runBin(t, bin, env, strings.NewReader("dashboard"), "put", "dash/k", "-"); r.code != 0 {
		t.Fatalf("put: %s", r.stderr)
	}
	if r := runBin(t, bin, env, nil, "get", "dash/k"); r.code != 0 {
		t.Fatalf("get: %s", r.stderr)
	}
	resp, err := http.Get("http://" + hostPort(metricsPort) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		exported[name] = true
	}
	var used []string
	for _, e := range exprs {
		for _, n := range promQLMetricNames(e) {
			if !slices.Contains(used, n) {
				used = append(used, n)
			}
		}
	}
	slices.Sort(used)
	for _, n := range used {
		if !exported[n] {
			t.Errorf("the dashboard queries %s, which /metrics does not export", n)
		}
	}
	if !t.Failed() {
		t.Logf("%d queries, %d metric names, all exported", len(exprs), len(used))
	}
}

// dashboardExprs returns every PromQL expression of the dashboard: the panels' targets (rows
// included) and the metric of each label_values variable.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	var exprs []string
	labelValues := regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,`)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "expr" {
					exprs = append(exprs, s)
				}
				if s, ok := x.(string); ok && k == "query" {
					if m := labelValues.FindStringSubmatch(s); m != nil {
						exprs = append(exprs, m[1])
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return exprs
}

var (
	promMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]|"[^"]*"`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promNumbers  = regexp.MustCompile(`\b[0-9][0-9.]*(e[-+]?[0-9]+|ms|s|m|h|d|w|y)?\b`)
	promIdents   = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*\s*\(?`)
	promKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without"}
)

// promQLMetricNames returns the metric names a PromQL expression selects: identifiers left
// after label matchers, ranges, strings, grouping clauses and numbers are removed, that are
// not a function call or a keyword.
func promQLMetricNames(expr string) []string {
	expr = promMatchers.ReplaceAllString(expr, " ")
	expr = promGrouping.ReplaceAllString(expr, " ")
	expr = promNumbers.ReplaceAllString(expr, " ")
	var names []string
	for _, id := range promIdents.FindAllString(expr, -1) {
		id = strings.TrimSpace(id)
		if strings.HasSuffix(id, "(") || slices.Contains(promKeywords, id) {
			continue
		}
		names = append(names, id)
	}
	return names
}

func TestPromQLMetricNames(t *testing.T) {
	f := func(expr string, want ...string) {
		t.Helper()
		if got := promQLMetricNames(expr); !slices.Equal(got, want) {
			t.Fatalf("promQLMetricNames(%q) = %q, want %q", expr, got, want)
		}
	}
	f(`max(master_key_count{job=~"$job"})`, "master_key_count")
	f(`histogram_quantile(0.99, sum by (le, op) (rate(master_request_duration_seconds_bucket{op=~"a|b"}[$__rate_interval])))`,
		"master_request_duration_seconds_bucket")
	f(`sum(rate(a_total[5m])) / clamp_min(sum(rate(a_total[5m])) + sum(rate(b_total[5m])), 1e-9)`, "a_total", "a_total", "b_total")
	f(`x and on (instance) y offset 5m`, "x", "y")
}
