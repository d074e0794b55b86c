package transfer

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestPythonClient runs testdata/pyclient.py, a ~140-line client written from
// docs/protocol.md alone, against a Go server: the handshake (and its refusal), Write with a
// payload, Read and ReadRange, and an error response.
func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	h := newMemHandler()
	s := startServer(t, h, ServerOptions{ClusterID: "pytest"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "testdata/pyclient.py", s.Addr().String(), "pytest")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || strings.TrimSpace(out.String()) != "ok" {
		t.Fatalf("python client: %v\n%s", err, out.String())
	}
	if o := h.object("py/key"); o == nil || len(o.data) != 100000 || o.version != 5 {
		t.Fatal("python write not stored")
	}
}
