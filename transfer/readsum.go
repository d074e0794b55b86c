package transfer

import (
	"hash"
	"sync"

	"github.com/mooncake-go/mooncake/internal/base"
)

// stripeSum hashes a striped read in order while its chunks land in parallel, so a verified
// striped read needs no second pass over the object once the last chunk is in.
//
// HighwayHash is sequential: byte k can be hashed only after bytes [0, k). The chunks of a
// striped read arrive in parallel over several connections, each chunk in order. Every
// connection reader reports each piece right after it landed (landed); the reporter that
// finds nobody hashing becomes the hasher and hashes, in order, everything that has landed
// from the first unhashed byte: the piece it just read (still in its CPU cache) and the
// backlog of later chunks that landed meanwhile; reporters that find a hasher at work record
// their piece and go back to their socket at once. The hashing thus runs beside the socket
// reads (on another core when there is one) instead of after the whole read.
//
// A chunk whose call failed after some of its bytes were reported (its retry will write them
// again) breaks the in-order hash: restart waits for the hasher to stop, and the read then
// hashes dst in one pass at the end, as before.
type stripeSum struct {
	buf   []byte
	chunk int64 // chunk size; chunk i is buf[i*chunk : min((i+1)*chunk, len(buf))]

	mu struct {
		sync.Mutex // protects the fields below
		cond       sync.Cond
		// filled[i] is how many bytes of chunk i have landed, from its start.
		filled []int64
		// next: buf[:next] is hashed, or being hashed by the hasher. Invariant: next <= the
		// end of the landed prefix.
		next    int64
		hashing bool // a reporter is hashing; only it writes d
		broken  bool // fall back to one pass at the end
	}
	d hash.Hash64 // written only by the hasher (mu.hashing)
}

// maxHashStep bounds one unlocked hash step, so restart waits for at most one step.
const maxHashStep = 1 << 20

func newStripeSum(buf []byte, chunk int64) *stripeSum {
	s := &stripeSum{buf: buf, chunk: chunk, d: base.NewChecksum()}
	s.mu.cond.L = &s.mu.Mutex
	s.mu.filled = make([]int64, (int64(len(buf))+chunk-1)/chunk)
	return s
}

// chunkLen is the length of chunk i.
func (s *stripeSum) chunkLen(i int) int64 {
	return min(s.chunk, int64(len(s.buf))-int64(i)*s.chunk)
}

// landed reports that chunk i's bytes [0, end) have landed (end relative to the chunk's
// start), and hashes whatever is next in order unless another reporter is hashing.
func (s *stripeSum) landed(i int, end int64) {
	s.mu.Lock()
	if end > s.mu.filled[i] {
		s.mu.filled[i] = end
	}
	if s.mu.hashing || s.mu.broken {
		s.mu.Unlock()
		return
	}
	s.mu.hashing = true
	for {
		stop := s.readyLocked()
		if s.mu.broken || stop == s.mu.next {
			s.mu.hashing = false
			s.mu.cond.Broadcast()
			s.mu.Unlock()
			return
		}
		start := s.mu.next
		stop = min(stop, start+maxHashStep)
		s.mu.next = stop
		s.mu.Unlock()
		// NB: buf[start:stop] landed before its report took mu, which this goroutine took
		// since: the reads happen after the writes.
		s.d.Write(s.buf[start:stop])
		s.mu.Lock()
	}
}

// readyLocked returns the end of the landed prefix of buf. REQUIRES: s.mu.
func (s *stripeSum) readyLocked() int64 {
	i := int(s.mu.next / s.chunk)
	for i < len(s.mu.filled) {
		if s.mu.filled[i] < s.chunkLen(i) {
			return int64(i)*s.chunk + s.mu.filled[i]
		}
		i++
	}
	return int64(len(s.buf))
}

// restart gives up hashing in order (a chunk is about to be read again) and waits until no
// hashing is in progress, so nothing reads buf while the chunk is rewritten.
func (s *stripeSum) restart() {
	s.mu.Lock()
	s.mu.broken = true
	for s.mu.hashing {
		s.mu.cond.Wait()
	}
	s.mu.Unlock()
}

// sum returns the checksum of buf. Call it once, after every chunk landed and no report is
// in progress.
func (s *stripeSum) sum() uint64 {
	s.mu.Lock()
	inOrder := !s.mu.broken && s.mu.next == int64(len(s.buf))
	s.mu.Unlock()
	if !inOrder {
		return base.Checksum(s.buf)
	}
	return s.d.Sum64()
}
