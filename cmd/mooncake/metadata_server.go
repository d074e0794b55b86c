package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mooncake-go/mooncake/server/config"
	"github.com/spf13/cobra"
)

// Mooncake's HTTP metadata server: a key-value store over HTTP at /metadata?key=K (GET reads,
// PUT writes the body, DELETE removes) that Mooncake's transfer engine uses instead of etcd.
// This build needs none (the masters keep metadata with raft), but deployment scripts start
// one next to the master and other Mooncake tools may use it, so `mooncake_http_metadata_server`
// (and mooncake_master --enable_http_metadata_server) serve the same store, in memory.

// maxMetadataValue bounds one value (Mooncake's entries are segment descriptors, a few KiB).
const maxMetadataValue = 16 << 20

// metadataStore is the in-memory store behind /metadata.
type metadataStore struct {
	mu sync.Mutex // protects m
	m  map[string][]byte
}

func (s *metadataStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	if key == "" {
		http.Error(w, "missing key", http.StatusBadRequest)
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.mu.Lock()
		v, ok := s.m[key]
		s.mu.Unlock()
		if !ok {
			http.Error(w, "metadata not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(v)
	case http.MethodPut:
		v, err := io.ReadAll(io.LimitReader(r.Body, maxMetadataValue+1))
		if err != nil || len(v) > maxMetadataValue {
			http.Error(w, "value too large or unreadable", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.m[key] = v
		s.mu.Unlock()
		_, _ = w.Write([]byte("metadata updated"))
	case http.MethodDelete:
		s.mu.Lock()
		_, ok := s.m[key]
		delete(s.m, key)
		s.mu.Unlock()
		if !ok {
			http.Error(w, "metadata not found", http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte("metadata deleted"))
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// startMetadataServer serves the store on addr until stop is called.
func startMetadataServer(e *env, addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http metadata server: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metadata", &metadataStore{m: map[string][]byte{}})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.logger().Error("http metadata server stopped", "err", err)
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	fmt.Fprintf(e.stdout, "HTTP metadata server started on port %s\n", port)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

func newMetadataServerCmd(e *env) *cobra.Command {
	var f config.Master // its two settings: host and port
	cmd := &cobra.Command{
		Use:   nameMetadataHTTP + " [--host 0.0.0.0] [--port 8080]",
		Short: "Serve Mooncake's HTTP metadata store (this build needs none; for tools that expect one)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := config.Validate(config.KindMetadataHTTP, &f, nil); err != nil {
				return err
			}
			e.logger().Info("this build needs no metadata server (the masters keep metadata with raft); serving one for tools that expect it")
			stop, err := startMetadataServer(e, net.JoinHostPort(f.HTTPMetadataServerHost, strconv.Itoa(f.HTTPMetadataServerPort)))
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "mooncake http metadata server ready\n")
			<-cmd.Context().Done()
			stop()
			return nil
		},
	}
	config.Register(cmd.Flags(), config.KindMetadataHTTP, &f, nil)
	return cmd
}
