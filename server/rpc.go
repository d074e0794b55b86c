package server

import (
	"context"
	"errors"
	"net"

	"github.com/mooncake-go/mooncake/transfer"
)

// rpcServer is a transfer.Server on a listener this package opened (so the bound address is
// known before raft starts), served by one goroutine (docs/threads.md: "rpc accept loop").
type rpcServer struct {
	srv  *transfer.Server
	ln   net.Listener
	done chan struct{} // closed when serve returns
}

func (r *rpcServer) serve() {
	defer close(r.done)
	_ = r.srv.Serve(r.ln) // returns ErrServerClosed after shutdown; Serve closes ln
}

// shutdown stops accepting and drains calls in flight until ctx ends (then closes them).
func (r *rpcServer) shutdown(ctx context.Context) error {
	err := r.srv.Shutdown(ctx)
	<-r.done
	if errors.Is(err, transfer.ErrServerClosed) {
		err = nil
	}
	return err
}
