package rpcsrv

import (
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/server/config"
	"github.com/mooncake-go/mooncake/transfer"
)

// ConnLimits bound what a server keeps open for clients that do nothing (the worker's data
// server; the master's RPC server takes the same). A zero field takes the default named;
// a negative one turns the limit off. See transfer.ServerOptions.
type ConnLimits struct {
	// IdleTimeout closes a connection with no frame arriving and no request in flight for
	// this long after its handshake. Default transfer.DefaultIdleTimeout (5m); at least 100ms.
	IdleTimeout time.Duration
	// FrameTimeout closes a connection whose frame, once started, does not deliver its next
	// 64 KiB within this long. Default transfer.DefaultFrameTimeout (30s).
	FrameTimeout time.Duration
	// MaxConnsPerPeer bounds the open connections from one IP address. Default
	// transfer.DefaultMaxConnsPerPeer (1024).
	MaxConnsPerPeer int
}

// Validate reports a limit the transfer server would refuse.
func (l ConnLimits) Validate() error {
	if l.IdleTimeout > 0 && l.IdleTimeout < 100*time.Millisecond {
		return fmt.Errorf("%w: conn_idle_timeout %s is under 100ms", base.ErrInvalidParams, l.IdleTimeout)
	}
	return nil
}

// Apply sets the limits on o.
func (l ConnLimits) Apply(o *transfer.ServerOptions) {
	o.IdleTimeout, o.FrameTimeout, o.MaxConnsPerPeer = l.IdleTimeout, l.FrameTimeout, l.MaxConnsPerPeer
}

// connCollector exports a transfer server's connection counters as <prefix>_connections_open
// and <prefix>_connections_closed_total{reason} (prefix "worker" or "master").
type connCollector struct {
	stats        func() transfer.ServerStats
	open, closed *prometheus.Desc
	// sendfile is worker_sendfile_sends_total{result}: read payloads sent by reference
	// (sent) or copied because sendfile refused the arena's file (refused). Nil on a master,
	// which sends no payloads.
	sendfile *prometheus.Desc
}

// NewConnCollector returns the collector of a server's connection counters (stats is the
// transfer server's Stats).
func NewConnCollector(prefix string, stats func() transfer.ServerStats) prometheus.Collector {
	c := &connCollector{
		stats: stats,
		open:  prometheus.NewDesc(prefix+"_connections_open", "Client connections open on the RPC server.", nil, nil),
		closed: prometheus.NewDesc(prefix+"_connections_closed_total",
			"Client connections closed, by reason: peer (the client closed it or it broke), idle (conn_idle_timeout), frame_timeout (conn_frame_timeout), peer_limit (max_conns_per_peer), handshake, protocol_error, shutdown.",
			[]string{"reason"}, nil),
	}
	if prefix == "worker" {
		c.sendfile = prometheus.NewDesc(prefix+"_sendfile_sends_total",
			"Read payloads of verifying clients sent by reference with sendfile from the arena's memfd (result sent), or copied because sendfile refused the file (result refused: a hugetlb arena).",
			[]string{"result"}, nil)
	}
	return c
}

func (c *connCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.open
	ch <- c.closed
	if c.sendfile != nil {
		ch <- c.sendfile
	}
}

func (c *connCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(st.Open))
	for _, r := range transfer.CloseReasons {
		ch <- prometheus.MustNewConstMetric(c.closed, prometheus.CounterValue, float64(st.Closed[r]), r)
	}
	if c.sendfile != nil {
		ch <- prometheus.MustNewConstMetric(c.sendfile, prometheus.CounterValue, float64(st.SendfileSends), "sent")
		ch <- prometheus.MustNewConstMetric(c.sendfile, prometheus.CounterValue, float64(st.SendfileRefused), "refused")
	}
}

var _ prometheus.Collector = (*connCollector)(nil)

// ValidHostPort reports whether s is host:port with a numeric port (host may be empty).
func ValidHostPort(s string) bool {
	_, port, err := net.SplitHostPort(s)
	if err != nil || port == "" {
		return false
	}
	for _, r := range port {
		if r < '0' || r > '9' {
			return false
		}
	}
	return len(port) <= 5
}

// Defaults both services must agree on: the worker heartbeats at the interval the master
// announces, bounds a registration call by what the master allows it, drops a pending write after the put timeout the master keeps a reservation, and
// both speak the one protocol this build implements.
var (
	// DefaultHeartbeatInterval is how often a worker heartbeats the leader (the config
	// table's default, server/config).
	DefaultHeartbeatInterval = config.WorkerDefaults.HeartbeatInterval
	// DefaultPutTimeout bounds a put between PutStart and PutEnd (--put_timeout; the config
	// table's default).
	DefaultPutTimeout = config.MasterDefaults.PutTimeout
)

const (
	// RegisterTimeout bounds one RegisterWorker call: it carries one page of the inventory,
	// and at the final page the master reconciles the whole inventory (O(objects) plus a raft
	// commit or two).
	RegisterTimeout = 60 * time.Second
	// DefaultProtocol is the only transfer protocol this build implements.
	DefaultProtocol = "tcp"
)
