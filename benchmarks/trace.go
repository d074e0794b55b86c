package benchmarks

import (
	"bufio"
	"bytes"
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Request traces in the format of Mooncake's FAST'25 release (FAST25-release/traces/ in
// kvcache-ai/Mooncake): one JSON object per line,
//
//	{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}
//
// timestamp is the arrival in ms; hash_ids are remapped prefix hashes of the request's input
// cut into blocks of TraceBlockTokens tokens (the last one partial), so equal ids mean a
// reusable KV block and a request's cacheable prefix is its ids up to the first one not
// cached.

// TraceBlockTokens is the tokens of one block of the traces' hash_ids.
const TraceBlockTokens = 512

// traceMaxLine bounds one line of a trace file (a request of 1M tokens is ~2,000 ids, ~16 KB).
const traceMaxLine = 4 << 20

// TraceRequest is one line of a trace.
type TraceRequest struct {
	// TimestampMS is the arrival time in milliseconds from the trace's start.
	TimestampMS int64 `json:"timestamp"`
	// InputLength is the prompt's tokens; OutputLength the tokens generated (unused here).
	InputLength  int64 `json:"input_length"`
	OutputLength int64 `json:"output_length"`
	// HashIDs are the prompt's blocks, in order.
	HashIDs []int64 `json:"hash_ids"`
}

// BlockTokens is the tokens of block i of r: TraceBlockTokens but for a partial last block.
func (r *TraceRequest) BlockTokens(i int) int64 {
	return min(TraceBlockTokens, r.InputLength-int64(i)*TraceBlockTokens)
}

// ReadTrace parses a trace and returns its requests in timestamp order (ties keep the file's
// order, which keeps a conversation's turns in order). An error names the line.
func ReadTrace(r io.Reader) ([]TraceRequest, error) {
	var reqs []TraceRequest
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), traceMaxLine)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var q TraceRequest
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&q); err != nil {
			return nil, fmt.Errorf("%w: trace line %d: %w", base.ErrInvalidParams, line, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%w: trace line %d: more than one JSON object", base.ErrInvalidParams, line)
		}
		if err := q.validate(); err != nil {
			return nil, fmt.Errorf("%w: trace line %d: %w", base.ErrInvalidParams, line, err)
		}
		reqs = append(reqs, q)
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("%w: trace: a line is over %s", base.ErrInvalidParams, base.Bytes(traceMaxLine))
	} else if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%w: the trace has no requests", base.ErrInvalidParams)
	}
	slices.SortStableFunc(reqs, func(a, b TraceRequest) int {
		switch {
		case a.TimestampMS < b.TimestampMS:
			return -1
		case a.TimestampMS > b.TimestampMS:
			return 1
		}
		return 0
	})
	return reqs, nil
}

func (r *TraceRequest) validate() error {
	n := int64(len(r.HashIDs))
	switch {
	case r.TimestampMS < 0:
		return fmt.Errorf("timestamp %d is negative", r.TimestampMS)
	case n == 0:
		return fmt.Errorf("no hash_ids")
	case r.InputLength <= (n-1)*TraceBlockTokens || r.InputLength > n*TraceBlockTokens:
		return fmt.Errorf("input_length %d does not fill %d blocks of %d tokens", r.InputLength, n, TraceBlockTokens)
	}
	return nil
}

// TraceHits is a hit count over a trace.
type TraceHits struct {
	// HitTokens are the tokens of the requests' cached prefixes; InputTokens all their input.
	HitTokens, InputTokens int64
}

// Ratio is the token hit ratio.
func (h TraceHits) Ratio() float64 {
	if h.InputTokens == 0 {
		return 0
	}
	return float64(h.HitTokens) / float64(h.InputTokens)
}

// SimulateLRU replays reqs in order against an LRU cache of capacity blocks (0: infinite, the
// trace's bound): each request hits its prefix up to the first block not cached, then every
// one of its blocks is touched (inserted when missing, the least recently used evicted). It
// is the reference a store's hit ratio is set against, at the same capacity.
func SimulateLRU(reqs []TraceRequest, capacity int) TraceHits {
	var h TraceHits
	order := list.New() // front: most recently used
	at := make(map[int64]*list.Element)
	for i := range reqs {
		r := &reqs[i]
		h.InputTokens += r.InputLength
		for j, id := range r.HashIDs {
			if at[id] == nil {
				break
			}
			h.HitTokens += r.BlockTokens(j)
		}
		for _, id := range r.HashIDs {
			if e := at[id]; e != nil {
				order.MoveToFront(e)
				continue
			}
			at[id] = order.PushFront(id)
			if capacity > 0 && order.Len() > capacity {
				delete(at, order.Remove(order.Back()).(int64))
			}
		}
	}
	return h
}

// TraceStats summarises a trace.
type TraceStats struct {
	Requests, Blocks, Distinct int
	// MaxBlocks is the most blocks of one request.
	MaxBlocks int
	// SpanMS is the last arrival's timestamp minus the first's.
	SpanMS int64
}

// StatTrace counts reqs' blocks.
func StatTrace(reqs []TraceRequest) TraceStats {
	s := TraceStats{Requests: len(reqs)}
	seen := make(map[int64]struct{})
	for i := range reqs {
		s.Blocks += len(reqs[i].HashIDs)
		s.MaxBlocks = max(s.MaxBlocks, len(reqs[i].HashIDs))
		for _, id := range reqs[i].HashIDs {
			seen[id] = struct{}{}
		}
	}
	s.Distinct = len(seen)
	if len(reqs) > 0 {
		s.SpanMS = reqs[len(reqs)-1].TimestampMS - reqs[0].TimestampMS
	}
	return s
}
