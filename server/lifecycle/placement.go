package lifecycle

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/mooncake-go/mooncake/internal/base"
)

// PlacementCandidate is one alive worker as the leader sees it when it places a put: its
// DRAM segment capacity and the bytes it has free (last heartbeat minus reservations the
// leader has handed out since).
type PlacementCandidate struct {
	ID       base.WorkerID
	Capacity int64 // DRAM segment bytes; a value larger than this can never be placed here
	Free     int64 // Capacity - used - reserved; may be <= 0 on a full worker
}

// evictionFloorDiv gives every eligible worker a minimum weight of Capacity/evictionFloorDiv.
// Workers make room themselves (tier spills or drops cold objects past its high watermark), so
// a full worker can still take a put; it is only much less likely to be chosen than one with
// free bytes. 1/16 keeps a full worker at about 6% of the weight of an empty one.
const evictionFloorDiv = 16

// Place picks n distinct workers for a value of size bytes among cands.
//
// Rules, in order:
//  1. A worker is eligible when size <= its Capacity (it can make room by eviction even when
//     Free is short). No eligible worker at all: an error wrapping base.ErrNoSpace that says the
//     value is larger than every segment.
//  2. Fewer eligible workers than n: an error wrapping base.ErrNoSpace ("asked for N replicas,
//     only M workers ..."). We never place partially: a put acknowledged with fewer replicas
//     than asked would silently weaken the caller's durability request.
//  3. preferred, when non-empty and eligible, comes first. A preferred worker that is not
//     eligible (unknown, dead, too small) is ignored, not an error: it is a hint.
//  4. The rest are drawn without replacement with probability proportional to
//     max(Free, Capacity/evictionFloorDiv): most free bytes wins most often, and the
//     randomness spreads concurrent puts instead of piling them on one worker.
//
// Place is pure: rng is the only source of randomness (tests pass a seeded one).
func Place(cands []PlacementCandidate, n int, size int64, preferred base.WorkerID, rng *rand.Rand) ([]base.WorkerID, error) {
	return PlaceExcluding(cands, nil, n, size, preferred, rng)
}

// PlaceExcluding is Place for a put being placed again: excluded are the workers an earlier
// attempt failed to write to, left out of cands (or no longer alive). They change only the errors: when
// the workers left are too few (none alive included), the error wraps base.ErrNoSpace and
// names them ("no worker with room left after excluding w1, w2"), never base.ErrUnavailable,
// so the client gives up instead of waiting for a worker to appear.
func PlaceExcluding(cands []PlacementCandidate, excluded []base.WorkerID, n int, size int64, preferred base.WorkerID, rng *rand.Rand) ([]base.WorkerID, error) {
	ids, err := place(cands, n, size, preferred, rng)
	if err != nil && len(excluded) > 0 && (errors.Is(err, base.ErrNoSpace) || errors.Is(err, base.ErrUnavailable)) {
		names := make([]string, len(excluded))
		for i, id := range excluded {
			names[i] = string(id)
		}
		eligible := 0
		for _, c := range cands {
			if size <= c.Capacity {
				eligible++
			}
		}
		return nil, fmt.Errorf("%w: no worker with room left after excluding %s (asked for %d replicas; workers left that can take %s: %d)",
			base.ErrNoSpace, strings.Join(names, ", "), n, base.Bytes(size), eligible)
	}
	return ids, err
}

func place(cands []PlacementCandidate, n int, size int64, preferred base.WorkerID, rng *rand.Rand) ([]base.WorkerID, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: replica count must be at least 1, got %d", base.ErrInvalidParams, n)
	}
	if size < 0 {
		return nil, fmt.Errorf("%w: negative size %d", base.ErrInvalidParams, size)
	}
	eligible := make([]PlacementCandidate, 0, len(cands))
	var largest int64
	for _, c := range cands {
		largest = max(largest, c.Capacity)
		if size <= c.Capacity {
			eligible = append(eligible, c)
		}
	}
	if len(cands) == 0 {
		// Unavailable, not no-space: a cluster that is starting (or whose workers are all
		// restarting) gets one soon, and clients retry unavailable calls within their timeout.
		return nil, fmt.Errorf("%w: asked for %d replicas, no worker is alive yet", base.ErrUnavailable, n)
	}
	if len(eligible) == 0 {
		return nil, fmt.Errorf("%w: value of %s is larger than every worker segment (largest %s)",
			base.ErrNoSpace, base.Bytes(size), base.Bytes(largest))
	}
	if len(eligible) < n {
		return nil, fmt.Errorf("%w: asked for %d replicas, only %d workers alive with a segment of at least %s",
			base.ErrNoSpace, n, len(eligible), base.Bytes(size))
	}
	out := make([]base.WorkerID, 0, n)
	if preferred != "" {
		for i, c := range eligible {
			if c.ID == preferred {
				out = append(out, c.ID)
				eligible[i] = eligible[len(eligible)-1]
				eligible = eligible[:len(eligible)-1]
				break
			}
		}
	}
	weights := make([]float64, len(eligible))
	for i, c := range eligible {
		weights[i] = float64(max(c.Free, c.Capacity/evictionFloorDiv, 1))
	}
	for len(out) < n {
		var total float64
		for _, w := range weights {
			total += w
		}
		r := rng.Float64() * total
		pick := len(weights) - 1 // float rounding may leave r just above the last prefix sum
		for i, w := range weights {
			if r < w {
				pick = i
				break
			}
			r -= w
		}
		out = append(out, eligible[pick].ID)
		last := len(eligible) - 1
		eligible[pick], weights[pick] = eligible[last], weights[last]
		eligible, weights = eligible[:last], weights[:last]
	}
	return out, nil
}
