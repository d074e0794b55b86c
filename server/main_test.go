package server

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/mooncake-go/mooncake/internal/testutil"
)

func TestMain(m *testing.M) {
	// zmq4's PUB socket starts its writer goroutine at creation and its Close never stops it
	// (v0.17.0: socket.Close does not close the pubMWriter): one per KV event publisher.
	testutil.VerifyNoLeaks(m, goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"))
}
