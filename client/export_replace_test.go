package client

import (
	"context"
	"sync"

	"github.com/mooncake-go/mooncake/transfer"
)

// RedirectWorker makes c send every call meant for the worker at from to the address to
// instead (a closed port: refused; a listener that never answers: a hung worker), while the
// master still places and looks up objects there: a worker gone for this client only. Call it
// before c's calls start; later calls for from go to to until it is called again with to "".
func RedirectWorker(c *Client, from, to string) {
	r, ok := c.rpc.(*redirectRPC)
	if !ok {
		r = &redirectRPC{rpc: c.rpc, to: map[string]string{}}
		c.rpc = r
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if to == "" {
		delete(r.to, from)
	} else {
		r.to[from] = to
	}
}

// AddReadLoad adds n to the reads c counts in flight from addr, so gets try addr's replicas
// after the others (orderReplicas): tests choose which replica a get tries first.
func AddReadLoad(c *Client, addr string, n int64) { c.readLoad(addr).Add(n) }

// redirectRPC is rpc with some addresses replaced (RedirectWorker).
type redirectRPC struct {
	rpc
	mu sync.Mutex // protects to
	to map[string]string
}

func (r *redirectRPC) addr(a string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if to, ok := r.to[a]; ok {
		return to
	}
	return a
}

func (r *redirectRPC) Call(ctx context.Context, addr string, req, resp transfer.Message) error {
	return r.rpc.Call(ctx, r.addr(addr), req, resp)
}

func (r *redirectRPC) Write(ctx context.Context, addr string, req *transfer.WriteRequest, p []byte) error {
	return r.rpc.Write(ctx, r.addr(addr), req, p)
}

func (r *redirectRPC) Read(ctx context.Context, addr string, req *transfer.ReadRequest, dst []byte, sum bool) (*transfer.ReadResponse, int, uint64, error) {
	return r.rpc.Read(ctx, r.addr(addr), req, dst, sum)
}
