package rpcsrv

import (
	"context"
	"errors"
	"net"

	"github.com/mooncake-go/mooncake/transfer"
)

// Server is a transfer.Server on a listener its service opened (so the bound address is
// known before raft starts), served by one goroutine (docs/threads.md: "rpc accept loop").
type Server struct {
	Srv  *transfer.Server
	Ln   net.Listener
	Done chan struct{} // closed when Serve returns; make it before Serve runs
}

// Serve runs the accept loop until Shutdown.
func (r *Server) Serve() {
	defer close(r.Done)
	_ = r.Srv.Serve(r.Ln) // returns ErrServerClosed after shutdown; Serve closes ln
}

// Shutdown stops accepting and drains calls in flight until ctx ends (then closes them).
func (r *Server) Shutdown(ctx context.Context) error {
	err := r.Srv.Shutdown(ctx)
	<-r.Done
	if errors.Is(err, transfer.ErrServerClosed) {
		err = nil
	}
	return err
}
