package master

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
)

// KV events: Mooncake's ZMQ publisher of object changes (--enable_kv_events), in the format
// of Mooncake's master (docs/operations.md, "KV events"). The leader publishes what raft
// commits, in commit order: raftmeta derives the events of each committed entry at apply and
// numbers every entry that has some with a replicated counter, so the ZMQ sequence number has
// no gap and a new leader continues it. Every master runs a publisher; only the leader sends.
// A master that becomes leader first sends again the batches it retains
// (raftmeta.KVEventRing), so what the old leader committed but had not sent yet reaches
// subscribers: a subscriber connected to every master drops a sequence it has seen.

// KVEventsConfig is Mooncake's master kv_events_* settings.
type KVEventsConfig struct {
	// Enabled runs the publisher (--enable_kv_events). Default false.
	Enabled bool
	// BindEndpoint is the ZMQ PUB address, e.g. tcp://0.0.0.0:5557 (port 0: a free one, read
	// back from /kv_events/status). Required when Enabled.
	BindEndpoint string
	// BackendID names this store in every event. Required when Enabled.
	BackendID string
	// ModelName is the model of objects whose put named none ("" sends nil).
	ModelName string
	// BlockSize is the tokens per block written into events (0 sends nil).
	BlockSize uint32
	// LoraName and AdditionalSalt are copied into events ("" sends nil).
	LoraName, AdditionalSalt string
	// DPRank is copied into every event and batch.
	DPRank uint32
	// EmitObjectKey adds object_key to object events; without it object events are skipped
	// (counted in skipped_unparsed_keys), as in Mooncake.
	EmitObjectKey bool
	// EmitLegacyCompat adds vLLM's legacy fields (type, block_hashes, parent_block_hash).
	EmitLegacyCompat bool
	// Topic is the first frame of every message. Mooncake's master sends an empty one.
	Topic string
}

// Validate checks c when it is enabled.
func (c KVEventsConfig) Validate() error {
	if !c.Enabled {
		return nil
	}
	if c.BackendID == "" {
		return errors.New("server: --kv_events_backend_id is required with --enable_kv_events")
	}
	if !strings.HasPrefix(c.BindEndpoint, "tcp://") {
		return fmt.Errorf("server: --kv_events_bind_endpoint %q: want tcp://host:port", c.BindEndpoint)
	}
	return nil
}

// kvEventsTenant is the tenant of a cleared event (RemoveAll, which only old log entries carry:
// the default tenant's); an object's event carries the tenant of its key.
const kvEventsTenant = "default"

// kvPublisher is one master's publisher. Its loop owns cursor and leading; the counters are
// read by /kv_events/status.
type kvPublisher struct {
	cfg  KVEventsConfig
	node *raftmeta.Node
	log  *slog.Logger
	sock zmq4.Socket
	addr string // the bound endpoint

	cancel context.CancelFunc
	done   chan struct{}

	batches, events, dropped, skipped atomic.Uint64
	lastSent                          atomic.Uint64 // the sequence of the last batch sent
	leading                           atomic.Bool
	eventID                           atomic.Uint64
	mu                                sync.Mutex // serialises Send

	// testMute, set by tests only (false in production), makes the loop pass over batches
	// without sending them, as a leader that dies before it sends would.
	testMute atomic.Bool
}

// startKVPublisher binds the PUB socket and starts the loop; nil when disabled.
func startKVPublisher(cfg KVEventsConfig, node *raftmeta.Node, log *slog.Logger) (*kvPublisher, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	node.KeepKVEvents()
	ctx, cancel := context.WithCancel(context.Background())
	sock := zmq4.NewPub(ctx)
	ep := strings.Replace(cfg.BindEndpoint, "://*:", "://0.0.0.0:", 1)
	if err := sock.Listen(ep); err != nil {
		cancel()
		sock.Close()
		return nil, fmt.Errorf("server: kv events: bind %s: %w", cfg.BindEndpoint, err)
	}
	p := &kvPublisher{cfg: cfg, node: node, log: log.With("component", "kv_events"), sock: sock,
		addr: "tcp://" + sock.Addr().String(), cancel: cancel, done: make(chan struct{})}
	p.log.Info("kv_events publisher enabled", "endpoint", p.addr, "backend_id", cfg.BackendID)
	go p.loop(ctx)
	return p, nil
}

// close stops the loop and the socket.
func (p *kvPublisher) close() {
	if p == nil {
		return
	}
	p.cancel()
	<-p.done
	p.sock.Close()
}

// kvPollEvery bounds how late a new leader notices it leads when no entry with events is
// applied meanwhile.
const kvPollEvery = 100 * time.Millisecond

// loop sends, while this node leads, every batch after the last one sent. On becoming leader
// it starts from the oldest batch it retains (see the file comment).
func (p *kvPublisher) loop(ctx context.Context) {
	defer close(p.done)
	var cursor uint64
	leading := false
	for ctx.Err() == nil {
		now := p.node.IsLeader()
		if now && !leading {
			cursor = 0 // send every retained batch again
		}
		leading = now
		p.leading.Store(now)
		batches, last := p.node.KVEvents(cursor, 256)
		if !leading {
			cursor = last
		} else {
			if len(batches) > 0 && cursor > 0 && batches[0].Seq > cursor+1 {
				// Fell behind the ring: these are gone; the gap shows in the sequence.
				p.dropped.Add(batches[0].Seq - cursor - 1)
			}
			for _, b := range batches {
				if !p.testMute.Load() {
					p.send(b)
				}
				cursor = b.Seq
			}
			if len(batches) == 256 {
				continue
			}
		}
		wctx, cancel := context.WithTimeout(ctx, kvPollEvery)
		_ = p.node.KVEventsWait(wctx, cursor)
		cancel()
	}
}

// send publishes one batch as one message: | topic | seq (8B big endian) | payload |.
func (p *kvPublisher) send(b raftmeta.KVEventBatch) {
	ts := time.Now().UnixMilli()
	payload, n, skipped := p.encode(b, ts)
	p.skipped.Add(uint64(skipped))
	if n == 0 {
		return
	}
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], b.Seq)
	p.mu.Lock()
	err := p.sock.SendMulti(zmq4.NewMsgFrom([]byte(p.cfg.Topic), seq[:], payload))
	p.mu.Unlock()
	if err != nil {
		p.dropped.Add(uint64(n))
		p.log.Warn("kv_events send failed", "seq", b.Seq, "err", err)
		return
	}
	p.batches.Add(1)
	p.events.Add(uint64(n))
	p.lastSent.Store(b.Seq)
}

// encode builds the MessagePack payload [timestamp_ms, [event maps], dp_rank] and returns
// it with the number of events in it and the number skipped.
func (p *kvPublisher) encode(b raftmeta.KVEventBatch, ts int64) (payload []byte, n, skipped int) {
	evs := make([]raftmeta.KVEvent, 0, len(b.Events))
	for _, ev := range b.Events {
		if ev.Kind != raftmeta.KVCleared && (!p.cfg.EmitObjectKey || ev.Key == "") {
			skipped++
			continue
		}
		evs = append(evs, ev)
	}
	if len(evs) == 0 {
		return nil, 0, skipped
	}
	var e mpEnc
	e.array(3)
	e.int(ts)
	e.array(len(evs))
	for _, ev := range evs {
		p.encodeEvent(&e, ev, b, ts)
	}
	e.uint(uint64(p.cfg.DPRank))
	return e.b, len(evs), skipped
}

// encodeEvent writes one event map: Mooncake's fields, then ours (workers, size, tokens,
// reason, raft_index), which Mooncake's subscribers ignore. The map's length is counted
// before its fields are written (eventFields); each count sits beside the step it counts.
func (p *kvPublisher) encodeEvent(e *mpEnc, ev raftmeta.KVEvent, b raftmeta.KVEventBatch, ts int64) {
	names := kvEventNamesOf(ev.Kind)
	e.mapHeader(p.eventFields(ev.Kind, names.reason != ""))
	p.encodeCommonFields(e, ev, names, ts)
	if ev.Kind == raftmeta.KVCleared {
		return
	}
	p.encodeObjectFields(e, ev, b.Index, names.reason)
}

// kvEventNames are how one event kind is spelled on the wire.
type kvEventNames struct {
	typ    string // event_type
	legacy string // type, with EmitLegacyCompat
	reason string // reason of a removal; "" for the others, which carry no reason field
}

// kvEventNamesOf spells kind for the wire.
func kvEventNamesOf(kind raftmeta.KVEventKind) kvEventNames {
	switch kind {
	case raftmeta.KVRemoved:
		return kvEventNames{"removed", "BlockRemoved", "removed"}
	case raftmeta.KVEvicted:
		return kvEventNames{"removed", "BlockRemoved", "evicted"}
	case raftmeta.KVWorkerGone:
		return kvEventNames{"removed", "BlockRemoved", "worker_gone"}
	case raftmeta.KVCleared:
		return kvEventNames{"cleared", "AllBlocksCleared", ""}
	}
	return kvEventNames{"stored", "BlockStored", ""}
}

// Fields each step of encodeEvent writes, EmitLegacyCompat's additions apart.
const (
	kvCommonFields = 11 // encodeCommonFields: event_id .. dp_rank
	kvObjectFields = 8  // encodeObjectFields: group_id seq_hashes base_block_idx object_key, workers size tokens raft_index
	kvStoredFields = 2  // encodeObjectFields of a stored object: parent_hash token_ids
)

// eventFields is the length of the map encodeEvent writes for an event of kind (withReason:
// its names carry a reason).
func (p *kvPublisher) eventFields(kind raftmeta.KVEventKind, withReason bool) int {
	legacy := 0
	if p.cfg.EmitLegacyCompat {
		legacy = 1
	}
	n := kvCommonFields + legacy // type
	if kind == raftmeta.KVCleared {
		return n
	}
	n += kvObjectFields + legacy // block_hashes
	if withReason {
		n++
	}
	if kind == raftmeta.KVStored {
		n += kvStoredFields + legacy // parent_block_hash
	}
	return n
}

// encodeCommonFields writes the fields every event carries, Mooncake's: kvCommonFields of
// them, and type with EmitLegacyCompat.
func (p *kvPublisher) encodeCommonFields(e *mpEnc, ev raftmeta.KVEvent, names kvEventNames, ts int64) {
	model := ev.Model
	if model == "" {
		model = p.cfg.ModelName
	}
	e.str("event_id")
	e.uint(p.eventID.Add(1))
	e.str("timestamp")
	e.int(ts)
	e.str("event_type")
	e.str(names.typ)
	e.str("model_name")
	e.strOrNil(model)
	e.str("block_size")
	if p.cfg.BlockSize == 0 {
		e.nil()
	} else {
		e.uint(uint64(p.cfg.BlockSize))
	}
	e.str("additional_salt")
	e.strOrNil(p.cfg.AdditionalSalt)
	e.str("lora_name")
	e.strOrNil(p.cfg.LoraName)
	tenant := kvEventsTenant
	if ev.Kind != raftmeta.KVCleared {
		tenant, _ = base.SplitTenantKey(ev.Key)
	}
	e.str("tenant_id")
	e.str(tenant)
	e.str("backend_id")
	e.str(p.cfg.BackendID)
	e.str("medium")
	if ev.Kind != raftmeta.KVCleared {
		// The master does not track which tier holds a replica: a put lands in DRAM.
		e.str("cpu")
	} else {
		e.nil()
	}
	e.str("dp_rank")
	e.uint(uint64(p.cfg.DPRank))
	if p.cfg.EmitLegacyCompat {
		e.str("type")
		e.str(names.legacy)
	}
}

// encodeObjectFields writes the fields of an event about one object (all kinds but
// KVCleared): Mooncake's block fields, then ours, ending with reason when there is one.
func (p *kvPublisher) encodeObjectFields(e *mpEnc, ev raftmeta.KVEvent, raftIndex uint64, reason string) {
	e.str("group_id")
	e.nil()
	e.str("seq_hashes")
	e.array(0)
	e.str("base_block_idx")
	e.nil()
	_, key := base.SplitTenantKey(ev.Key) // the key as its tenant wrote it
	e.str("object_key")
	e.str(key)
	if p.cfg.EmitLegacyCompat {
		e.str("block_hashes")
		e.array(0)
	}
	if ev.Kind == raftmeta.KVStored {
		e.str("parent_hash")
		e.nil()
		e.str("token_ids")
		e.nil()
		if p.cfg.EmitLegacyCompat {
			e.str("parent_block_hash")
			e.nil()
		}
	}
	e.str("workers")
	e.array(len(ev.Workers))
	for _, w := range ev.Workers {
		e.str(string(w))
	}
	e.str("size")
	e.int(ev.Size)
	e.str("tokens")
	e.int(ev.Tokens)
	e.str("raft_index")
	e.uint(raftIndex)
	if reason != "" {
		e.str("reason")
		e.str(reason)
	}
}

// status is /kv_events/status: Mooncake's fields, then ours.
func (p *kvPublisher) status() map[string]any {
	if p == nil {
		return map[string]any{"enabled": false, "published_batches": 0, "published_events": 0,
			"dropped_events": 0, "skipped_unparsed_keys": 0}
	}
	_, last := p.node.KVEvents(math.MaxUint64, 0)
	return map[string]any{
		"enabled": true, "published_batches": p.batches.Load(), "published_events": p.events.Load(),
		"dropped_events": p.dropped.Load(), "skipped_unparsed_keys": p.skipped.Load(),
		"publisher_active": p.leading.Load(), "endpoint": p.addr,
		// zmq4 does not expose its peer count: subscribed says whether any subscriber has
		// subscribed (to any topic).
		"subscribed": len(p.sock.(zmq4.Topics).Topics()) > 0,
		// last_sequence: the sequence of the last batch this master sent; committed_sequence:
		// the cluster's sequence as this master has applied it.
		"last_sequence": p.lastSent.Load(), "committed_sequence": last,
	}
}

// mpEnc appends MessagePack (the subset the events use).
type mpEnc struct{ b []byte }

func (e *mpEnc) nil() { e.b = append(e.b, 0xc0) }

func (e *mpEnc) uint(v uint64) {
	switch {
	case v < 128:
		e.b = append(e.b, byte(v))
	case v <= math.MaxUint8:
		e.b = append(e.b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		e.b = binary.BigEndian.AppendUint16(append(e.b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		e.b = binary.BigEndian.AppendUint32(append(e.b, 0xce), uint32(v))
	default:
		e.b = binary.BigEndian.AppendUint64(append(e.b, 0xcf), v)
	}
}

func (e *mpEnc) int(v int64) {
	if v >= 0 {
		e.uint(uint64(v))
		return
	}
	e.b = binary.BigEndian.AppendUint64(append(e.b, 0xd3), uint64(v))
}

func (e *mpEnc) str(s string) {
	switch n := len(s); {
	case n < 32:
		e.b = append(e.b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		e.b = append(e.b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		e.b = binary.BigEndian.AppendUint16(append(e.b, 0xda), uint16(n))
	default:
		e.b = binary.BigEndian.AppendUint32(append(e.b, 0xdb), uint32(n))
	}
	e.b = append(e.b, s...)
}

func (e *mpEnc) strOrNil(s string) {
	if s == "" {
		e.nil()
		return
	}
	e.str(s)
}

func (e *mpEnc) array(n int) { e.header(n, 0x90, 0xdc, 0xdd) }

func (e *mpEnc) mapHeader(n int) { e.header(n, 0x80, 0xde, 0xdf) }

func (e *mpEnc) header(n int, fix, m16, m32 byte) {
	switch {
	case n < 16:
		e.b = append(e.b, fix|byte(n))
	case n <= math.MaxUint16:
		e.b = binary.BigEndian.AppendUint16(append(e.b, m16), uint16(n))
	default:
		e.b = binary.BigEndian.AppendUint32(append(e.b, m32), uint32(n))
	}
}
