package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mooncake-go/mooncake/dram"
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta/raftmetatest"
	"github.com/mooncake-go/mooncake/server/master"
	"github.com/mooncake-go/mooncake/server/worker"
)

func testWorkerConfig() worker.Config {
	return worker.Config{ClusterID: base.DefaultClusterID, Address: "127.0.0.1:0", GlobalSegmentSize: 32 << 20,
		HugePages: dram.HugePagesOff, HeartbeatInterval: 50 * time.Millisecond, Logger: testLogger()}
}

// TestStartBoth: Start builds a master and a worker registered with it (the worker names no
// master of its own); WaitReady returns once the worker registered, and then the master lists
// it active at its address; ExportWorkerMetrics puts the worker's series on the master's
// /metrics; Shutdown stops both.
func TestStartBoth(t *testing.T) {
	mc := master.Config{ID: master.DefaultMasterID, DataDir: t.TempDir(), RPCAddress: "127.0.0.1:0", RaftAddress: "127.0.0.1:0",
		MetricsAddress: "127.0.0.1:0", Logger: testLogger(), Test: master.TestKnobs{Raft: raftmetatest.FastTimeouts}}
	wc := testWorkerConfig()
	srv, err := Start(Config{Master: &mc, Worker: &wc, ExportWorkerMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = srv.Shutdown(context.Background())
		}
	})
	if srv.ExportErr != nil {
		t.Fatalf("export: %v", srv.ExportErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range srv.Master.TestHooks().Status().Workers {
		if w.ID == string(srv.Worker.ID()) {
			found = true
			if w.State != "active" || w.Address != srv.Worker.Addr() {
				t.Fatalf("the master lists the worker as %+v, want active at %s", w, srv.Worker.Addr())
			}
		}
	}
	if !found {
		t.Fatalf("ready, but the master does not list worker %s", srv.Worker.ID())
	}
	code, body := httpGet(t, "http://"+srv.Master.MetricsAddr()+"/metrics")
	if code != 200 || !strings.Contains(body, "worker_arena_capacity_bytes 3.3554432e+07") || !strings.Contains(body, "worker_process_rss_bytes") {
		t.Fatalf("master /metrics (%d) lacks the worker's series", code)
	}
	stopped = true
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestStartErrors: Start refuses a config with no service; WaitReady of a worker whose
// masters never answer ends with its context, as an error wrapping base.ErrTimeout.
func TestStartErrors(t *testing.T) {
	if _, err := Start(Config{}); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("Start with no service: %v, want ErrInvalidParams", err)
	}
	wc := testWorkerConfig()
	wc.MasterAddresses = []string{"127.0.0.1:1"} // nothing listens there
	srv, err := Start(Config{Worker: &wc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := srv.WaitReady(ctx); !errors.Is(err, base.ErrTimeout) {
		t.Fatalf("WaitReady with no master: %v, want ErrTimeout", err)
	}
}
