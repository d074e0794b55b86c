package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMetadataStore: Mooncake's HTTP metadata protocol: PUT stores the body under ?key=, GET
// returns it, DELETE removes it; missing keys are 404, a missing key parameter 400.
func TestMetadataStore(t *testing.T) {
	srv := httptest.NewServer(&metadataStore{m: map[string][]byte{}})
	defer srv.Close()
	do := func(method, query, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+"/metadata"+query, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := do("GET", "?key=mooncake/ram/seg1", ""); code != 404 {
		t.Fatalf("GET of a missing key: %d", code)
	}
	if code, _ := do("PUT", "?key=mooncake/ram/seg1", `{"name":"seg1"}`); code != 200 {
		t.Fatalf("PUT: %d", code)
	}
	if code, body := do("GET", "?key=mooncake/ram/seg1", ""); code != 200 || body != `{"name":"seg1"}` {
		t.Fatalf("GET: %d %q", code, body)
	}
	if code, _ := do("DELETE", "?key=mooncake/ram/seg1", ""); code != 200 {
		t.Fatalf("DELETE: %d", code)
	}
	if code, _ := do("DELETE", "?key=mooncake/ram/seg1", ""); code != 404 {
		t.Fatalf("second DELETE: %d", code)
	}
	if code, _ := do("GET", "", ""); code != 400 {
		t.Fatalf("no key: %d", code)
	}
	if code, _ := do("POST", "?key=k", "x"); code != 405 {
		t.Fatalf("POST: %d", code)
	}
}
