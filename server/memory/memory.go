package memory

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/raftmeta"
)

// Memory you can explain (issue 13; docs/memory.md): the master sets the bytes the cluster's
// objects are expected to take (retained tokens x bytes per token of their model) against the
// bytes workers actually hold, and names every cause of the difference. This file holds the
// report's types and the pure arithmetic that judges it; server/master's memory_master.go gathers the inputs,
// server/worker's memory_worker.go is the worker's side.

// DefaultMemoryThresholdPct is the default tolerance of a verdict: actual within this percent
// of expected is "expected".
const DefaultMemoryThresholdPct = 5.0

// Verdicts.
const (
	VerdictExpected   = "expected"
	VerdictUnexpected = "unexpected"
)

// WorkerMemory is one worker's memory breakdown: the WorkerMemory call and the worker's
// /api/v1/memory. Byte figures are bytes; see docs/memory.md for each.
type WorkerMemory struct {
	ID        string `json:"id"`
	Address   string `json:"address"`
	ArenaMode string `json:"arena_mode"`
	// The arena: Allocated = CommittedLogical + PendingBytes + HeldBytes + AlignmentWaste
	// (+ unexplained), Allocated + Free = Capacity.
	ArenaCapacity    int64 `json:"arena_capacity_bytes"`
	ArenaAllocated   int64 `json:"arena_allocated_bytes"`
	CommittedObjects int64 `json:"committed_objects"`
	CommittedLogical int64 `json:"committed_logical_bytes"`
	AlignmentWaste   int64 `json:"alignment_waste_bytes"`
	PendingObjects   int64 `json:"pending_objects"`
	PendingBytes     int64 `json:"pending_bytes"`
	// HeldBytes: DRAM copies detached from the index (removed, replaced, evicted) that a
	// reader or a shared-memory lease still holds, temporary NVMe reads, and versions an
	// upsert replaced, kept until the master's drop (tier/supersede.go).
	HeldBytes     int64   `json:"held_bytes"`
	ShmLeases     int64   `json:"shm_leases"`
	FreeBytes     int64   `json:"free_bytes"`
	LargestFree   int64   `json:"largest_free_block_bytes"`
	Fragmentation float64 `json:"fragmentation"`
	// HighWatermark and LowWatermark are the shares of the arena where eviction starts and
	// stops. Saturated: the worker has evicted and the arena is still at its low watermark,
	// less one evicted object (eviction stops at the first object that takes it under).
	HighWatermark float64 `json:"high_watermark_ratio"`
	LowWatermark  float64 `json:"low_watermark_ratio"`
	Saturated     bool    `json:"saturated"`
	// NVMe: Used = Logical + Headers + Reclaimable.
	NVMeCapacity    int64 `json:"nvme_capacity_bytes"`
	NVMeUsed        int64 `json:"nvme_used_bytes"`
	NVMeObjects     int64 `json:"nvme_objects"`
	NVMeLogical     int64 `json:"nvme_logical_bytes"`
	NVMeHeaders     int64 `json:"nvme_headers_bytes"`
	NVMeReclaimable int64 `json:"nvme_reclaimable_bytes"`
	// The process: RSS = ArenaTouched + GoHeap (pebble's block cache and memtables among it:
	// the binary is cgo-free) + Rest (stacks, runtime, binary). A standalone process holds a
	// master too.
	RSS          int64 `json:"rss_bytes"`
	ArenaTouched int64 `json:"arena_touched_bytes"`
	// ArenaPopulated is the arena's bytes faulted in ahead of the allocator (populated share
	// = ArenaPopulated / ArenaCapacity; dram.Arena.Populated).
	ArenaPopulated int64 `json:"arena_populated_bytes"`
	GoHeap         int64 `json:"go_heap_bytes"`
	Rest           int64 `json:"rest_bytes"`
	// Cumulative counters, for rates.
	HitsDRAM   int64 `json:"hits_dram"`
	HitsNVMe   int64 `json:"hits_nvme"`
	Misses     int64 `json:"misses"`
	Commits    int64 `json:"commits"`
	Removes    int64 `json:"removes"`
	Evictions  int64 `json:"evictions"`
	Spills     int64 `json:"spills"`
	Promotions int64 `json:"promotions"`
	// Models: what each model's objects take on this worker, per tier (worker_stats.go).
	Models []WorkerModelMemory `json:"models,omitempty"`
	// Error is set by the master when the worker did not answer (its figures are zero).
	Error string `json:"error,omitempty"`
}

// Cause is one named part of the difference between actual and expected bytes.
type Cause struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	// Pct is Bytes as a percent of expected (of actual when nothing is expected).
	Pct float64 `json:"pct"`
}

// Cause names (docs/memory.md, "Causes").
const (
	CauseTokenMismatch   = "token_mismatch"   // objects larger (or smaller) than their tokens imply
	CauseNoTokens        = "no_tokens"        // objects without a token count or a registered model
	CauseAlignment       = "alignment"        // the arena rounds each allocation up
	CausePending         = "pending"          // puts in flight (being written, or written without PutEnd)
	CauseHeld            = "held"             // removed objects a reader or lease still holds
	CauseNVMeHeaders     = "nvme_headers"     // record framing and block padding on NVMe
	CauseNVMeReclaimable = "nvme_reclaimable" // dead NVMe space awaiting GC
	// CauseExtraCopies: object bytes workers hold beyond what the metadata places: copies on
	// both tiers (durable, promoted), and removed objects whose drop has not reached the
	// worker yet (it arrives with the next heartbeat reply).
	CauseExtraCopies = "extra_copies"
	CauseUnexplained = "unexplained" // what nothing above accounts for
)

// ModelMemory is one model in the report.
type ModelMemory struct {
	Name          string `json:"name"` // "" for objects naming no model
	Registered    bool   `json:"registered"`
	BytesPerToken int64  `json:"bytes_per_token"`
	Description   string `json:"description,omitempty"`
	Objects       int64  `json:"objects"`
	// Tokens are retained tokens (one copy each); ReplicaTokens counts each replica.
	Tokens        int64 `json:"retained_tokens"`
	ReplicaTokens int64 `json:"replica_tokens"`
	// ExpectedBytes = ReplicaTokens x BytesPerToken; ActualBytes is the objects' logical
	// size times their replicas.
	ExpectedBytes  int64   `json:"expected_bytes"`
	ActualBytes    int64   `json:"actual_bytes"`
	UntokenedBytes int64   `json:"untokened_bytes"`
	Difference     int64   `json:"difference_bytes"`
	DifferencePct  float64 `json:"difference_pct"`
	Causes         []Cause `json:"causes,omitempty"`
	Verdict        string  `json:"verdict"`
	Reason         string  `json:"reason"`
	// What the model's copies take on the workers that answered (their per-model tallies):
	// arena bytes allocated to DRAM copies and NVMe bytes of records, and their sum.
	// AllocatedCauses split AllocatedBytes - ActualBytes exactly: alignment (arena rounding),
	// nvme_headers (record headers and padding), extra_copies (copies on both tiers, or not
	// yet dropped), unexplained (negative: replicas the workers do not tally under this model,
	// e.g. objects an older client or worker wrote without their model).
	DRAMObjects     int64   `json:"dram_objects"`
	DRAMAllocated   int64   `json:"dram_allocated_bytes"`
	NVMeObjects     int64   `json:"nvme_objects"`
	NVMeAllocated   int64   `json:"nvme_allocated_bytes"`
	AllocatedBytes  int64   `json:"allocated_bytes"`
	AllocatedCauses []Cause `json:"allocated_causes,omitempty"`
}

// MemoryReport is the answer of the Memory call, the master's /api/v1/memory and the data
// of `mooncake memory` and the dashboard's memory page.
type MemoryReport struct {
	ClusterID    string  `json:"cluster_id"`
	Master       string  `json:"master"`
	TimeUnixMs   int64   `json:"time_unix_ms"`
	ThresholdPct float64 `json:"threshold_pct"`

	Workers []WorkerMemory `json:"workers"`
	// Cluster sums the workers that answered.
	Cluster WorkerMemory `json:"cluster"`
	// Metadata: the master's estimate of its replicated metadata.
	Keys                int64   `json:"keys"`
	MetadataBytes       int64   `json:"metadata_bytes"`
	MetadataBytesPerKey float64 `json:"metadata_bytes_per_key"`

	Models []ModelMemory `json:"models"`
	// Tokens is the retained tokens of registered models.
	Tokens int64 `json:"retained_tokens"`
	// ExpectedBytes (registered models' replica tokens x bytes per token) against ActualBytes
	// (arena allocated + NVMe used, all workers that answered).
	ExpectedBytes int64   `json:"expected_bytes"`
	ActualBytes   int64   `json:"actual_bytes"`
	Difference    int64   `json:"difference_bytes"`
	DifferencePct float64 `json:"difference_pct"`
	// Causes sum to Difference exactly; largest first.
	Causes     []Cause  `json:"causes"`
	Verdict    string   `json:"verdict"`
	Reason     string   `json:"reason"`
	Saturation []string `json:"saturation,omitempty"`

	// Cumulative master counters, for rates: PutEnd and Lookup requests.
	Puts    int64 `json:"puts"`
	Lookups int64 `json:"lookups"`
}

// Inputs are what a report is built from.
type Inputs struct {
	Models       []raftmeta.ModelUsage
	Workers      []WorkerMemory
	Keys, MetaB  int64
	ReplicaBytes int64 // the metadata's object sizes times replicas
	// ReservedBytes: puts in flight on the leader (PutStart without PutEnd), size times the
	// workers placed: bytes workers may hold that the metadata does not list yet.
	ReservedBytes int64
	ThresholdPct  float64
	Puts, Lookups int64
}

// BuildReport does the arithmetic of a report. It is pure.
func BuildReport(in Inputs) MemoryReport {
	r := MemoryReport{Workers: in.Workers, Keys: in.Keys, MetadataBytes: in.MetaB, Puts: in.Puts, Lookups: in.Lookups}
	if in.Keys > 0 {
		r.MetadataBytesPerKey = float64(in.MetaB) / float64(in.Keys)
	}
	c := &r.Cluster
	c.ID = "cluster"
	for _, w := range in.Workers {
		if w.Error != "" {
			continue
		}
		addWorker(c, &w)
	}
	if c.ArenaCapacity > 0 {
		c.Fragmentation = 0 // a per-worker figure; the sum has none
	}
	onWorkers := map[string]WorkerModelMemory{}
	for _, w := range in.Workers {
		if w.Error != "" {
			continue
		}
		for _, x := range w.Models {
			t := onWorkers[x.Model]
			t.Model = x.Model
			t.DRAMObjects += x.DRAMObjects
			t.DRAMAllocated += x.DRAMAllocated
			t.DRAMLogical += x.DRAMLogical
			t.NVMeObjects += x.NVMeObjects
			t.NVMeAllocated += x.NVMeAllocated
			t.NVMeLogical += x.NVMeLogical
			onWorkers[x.Model] = t
		}
	}
	var noTokens, mismatch int64
	for _, u := range in.Models {
		m := ModelMemory{Name: u.Name, Registered: u.Registered, BytesPerToken: u.BytesPerToken, Description: u.Description,
			Objects: u.Objects, Tokens: u.Tokens, ReplicaTokens: u.ReplicaTokens, ActualBytes: u.ReplicaBytes,
			UntokenedBytes: u.UntokenedReplicaBytes}
		if u.Registered {
			m.ExpectedBytes = SatMul(u.ReplicaTokens, u.BytesPerToken)
			m.Causes = []Cause{{Name: CauseTokenMismatch, Bytes: u.ReplicaBytes - u.UntokenedReplicaBytes - m.ExpectedBytes},
				{Name: CauseNoTokens, Bytes: u.UntokenedReplicaBytes}}
			r.Tokens += u.Tokens
			r.ExpectedBytes += m.ExpectedBytes
			mismatch += m.Causes[0].Bytes
			noTokens += u.UntokenedReplicaBytes
		} else {
			m.Causes = []Cause{{Name: CauseNoTokens, Bytes: u.ReplicaBytes}}
			noTokens += u.ReplicaBytes
		}
		m.Difference = m.ActualBytes - m.ExpectedBytes
		wm := onWorkers[u.Name]
		delete(onWorkers, u.Name)
		if u.Objects == 0 && !u.Registered && wm.DRAMObjects+wm.NVMeObjects == 0 {
			continue
		}
		m.setAllocated(wm)
		r.Models = append(r.Models, m)
	}
	// Models the workers hold that the metadata does not name (none normally): their copies.
	for _, name := range slices.Sorted(maps.Keys(onWorkers)) {
		m := ModelMemory{Name: name}
		m.setAllocated(onWorkers[name])
		r.Models = append(r.Models, m)
	}
	r.ActualBytes = c.ArenaAllocated + c.NVMeUsed
	// Workers hold CommittedLogical + NVMeLogical of object bytes; the metadata places
	// replicaBytes. The excess is first puts in flight (written on the worker, no PutEnd yet),
	// up to what the leader's reservations cover, then extra copies. A shortfall (workers lost
	// objects the metadata lists) stays unexplained.
	excess := max(0, c.CommittedLogical+c.NVMeLogical-in.ReplicaBytes)
	inFlight := min(excess, in.ReservedBytes)
	known := []Cause{
		{Name: CauseTokenMismatch, Bytes: mismatch},
		{Name: CauseNoTokens, Bytes: noTokens},
		{Name: CauseAlignment, Bytes: c.AlignmentWaste},
		{Name: CausePending, Bytes: c.PendingBytes + inFlight},
		{Name: CauseHeld, Bytes: c.HeldBytes},
		{Name: CauseNVMeHeaders, Bytes: c.NVMeHeaders},
		{Name: CauseNVMeReclaimable, Bytes: c.NVMeReclaimable},
		{Name: CauseExtraCopies, Bytes: excess - inFlight},
	}
	r.Difference = r.ActualBytes - r.ExpectedBytes
	rest := r.Difference
	for _, k := range known {
		rest -= k.Bytes
	}
	r.Causes = append(known, Cause{Name: CauseUnexplained, Bytes: rest})
	r.Judge(in.ThresholdPct)
	return r
}

// setAllocated fills the model's allocated view from the workers' tallies of it.
func (m *ModelMemory) setAllocated(w WorkerModelMemory) {
	m.DRAMObjects, m.DRAMAllocated = w.DRAMObjects, w.DRAMAllocated
	m.NVMeObjects, m.NVMeAllocated = w.NVMeObjects, w.NVMeAllocated
	m.AllocatedBytes = w.DRAMAllocated + w.NVMeAllocated
	extra := w.DRAMLogical + w.NVMeLogical - m.ActualBytes
	m.AllocatedCauses = []Cause{
		{Name: CauseAlignment, Bytes: w.DRAMAllocated - w.DRAMLogical},
		{Name: CauseNVMeHeaders, Bytes: w.NVMeAllocated - w.NVMeLogical},
		{Name: CauseExtraCopies, Bytes: max(0, extra)},
		{Name: CauseUnexplained, Bytes: min(0, extra)},
	}
}

func addWorker(c, w *WorkerMemory) {
	c.ArenaCapacity += w.ArenaCapacity
	c.ArenaAllocated += w.ArenaAllocated
	c.CommittedObjects += w.CommittedObjects
	c.CommittedLogical += w.CommittedLogical
	c.AlignmentWaste += w.AlignmentWaste
	c.PendingObjects += w.PendingObjects
	c.PendingBytes += w.PendingBytes
	c.HeldBytes += w.HeldBytes
	c.ShmLeases += w.ShmLeases
	c.FreeBytes += w.FreeBytes
	c.LargestFree = max(c.LargestFree, w.LargestFree)
	c.Saturated = c.Saturated || w.Saturated
	c.NVMeCapacity += w.NVMeCapacity
	c.NVMeUsed += w.NVMeUsed
	c.NVMeObjects += w.NVMeObjects
	c.NVMeLogical += w.NVMeLogical
	c.NVMeHeaders += w.NVMeHeaders
	c.NVMeReclaimable += w.NVMeReclaimable
	c.RSS += w.RSS
	c.ArenaTouched += w.ArenaTouched
	c.ArenaPopulated += w.ArenaPopulated
	c.GoHeap += w.GoHeap
	c.Rest += w.Rest
	c.HitsDRAM += w.HitsDRAM
	c.HitsNVMe += w.HitsNVMe
	c.Misses += w.Misses
	c.Commits += w.Commits
	c.Removes += w.Removes
	c.Evictions += w.Evictions
	c.Spills += w.Spills
	c.Promotions += w.Promotions
}

func SatMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// pctOf is part as a percent of whole; 100 (or -100) when whole is 0 and part is not.
func pctOf(part, whole int64) float64 {
	switch {
	case whole != 0:
		return 100 * float64(part) / float64(whole)
	case part > 0:
		return 100
	case part < 0:
		return -100
	}
	return 0
}

// judge fills Pct of each cause, sorts them (largest magnitude first, zero ones dropped
// except when all are zero) and returns the verdict and its reason for a difference of diff
// against expected.
func judge(causes []Cause, diff, expected int64, thresholdPct float64) ([]Cause, string, string) {
	for i := range causes {
		causes[i].Pct = pctOf(causes[i].Bytes, expected)
	}
	nz := slices.DeleteFunc(slices.Clone(causes), func(c Cause) bool { return c.Bytes == 0 })
	slices.SortStableFunc(nz, func(a, b Cause) int { return cmp.Compare(abs64(b.Bytes), abs64(a.Bytes)) })
	pct := pctOf(diff, expected)
	if math.Abs(pct) <= thresholdPct {
		return nz, VerdictExpected, fmt.Sprintf("actual is within %.1f%% of expected (%+.2f%%)", thresholdPct, pct)
	}
	if len(nz) == 0 {
		return nz, VerdictUnexpected, fmt.Sprintf("actual differs from expected by %+.2f%%", pct)
	}
	top := nz[0]
	return nz, VerdictUnexpected, fmt.Sprintf("%+.2f%% (%s); largest cause: %s, %s (%+.1f%%)", pct, signedBytes(diff), top.Name, signedBytes(top.Bytes), top.Pct)
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func signedBytes(v int64) string {
	if v < 0 {
		return "-" + base.Bytes(-v).String()
	}
	return "+" + base.Bytes(v).String()
}

// Judge (re)computes the verdicts with a tolerance of thresholdPct percent (<= 0: the
// default), and the saturation lines. `mooncake memory --threshold` calls it on a report it
// fetched.
func (r *MemoryReport) Judge(thresholdPct float64) {
	if thresholdPct <= 0 {
		thresholdPct = DefaultMemoryThresholdPct
	}
	r.ThresholdPct = thresholdPct
	r.DifferencePct = pctOf(r.Difference, r.ExpectedBytes)
	if r.ExpectedBytes == 0 && r.ActualBytes == 0 {
		r.Causes, r.Verdict, r.Reason = nil, VerdictExpected, "nothing is stored and nothing is expected"
	} else {
		r.Causes, r.Verdict, r.Reason = judge(r.Causes, r.Difference, r.ExpectedBytes, thresholdPct)
	}
	for i := range r.Models {
		m := &r.Models[i]
		m.DifferencePct = pctOf(m.Difference, m.ExpectedBytes)
		switch {
		case !m.Registered:
			m.Verdict, m.Reason = VerdictUnexpected, "model not registered: nothing is expected of its objects"
			if m.Name == "" {
				m.Reason = "objects naming no model"
			}
			m.Causes, _, _ = judge(m.Causes, m.Difference, 0, thresholdPct)
		case m.ExpectedBytes == 0 && m.ActualBytes == 0:
			m.Causes, m.Verdict, m.Reason = nil, VerdictExpected, "no objects"
		default:
			m.Causes, m.Verdict, m.Reason = judge(m.Causes, m.Difference, m.ExpectedBytes, thresholdPct)
		}
		m.AllocatedCauses, _, _ = judge(m.AllocatedCauses, m.AllocatedBytes-m.ActualBytes, m.ActualBytes, thresholdPct)
	}
	r.Saturation = nil
	for _, w := range r.Workers {
		if !w.Saturated {
			continue
		}
		if r.Verdict == VerdictExpected {
			r.Saturation = append(r.Saturation, fmt.Sprintf("worker %s: saturated, as expected for %d retained tokens", w.ID, r.Tokens))
		} else {
			r.Saturation = append(r.Saturation, fmt.Sprintf("worker %s: saturated, %d bytes unexplained", w.ID, r.Difference))
		}
	}
}

// StatusModels is the models part of Status: the metadata's figures, judged with the default
// threshold (expected against the objects' logical bytes; the workers' side is in the report).
func StatusModels(us []raftmeta.ModelUsage) []ModelMemory {
	r := BuildReport(Inputs{Models: us})
	return r.Models
}

// WorkerModelMemory is what one model's objects take on a worker (WorkerMemory.Models).
type WorkerModelMemory struct {
	Model       string `json:"model"` // "" for objects whose put named no model
	DRAMObjects int64  `json:"dram_objects"`
	// DRAMAllocated: arena bytes allocated to the objects' DRAM copies; DRAMLogical their sizes.
	DRAMAllocated int64 `json:"dram_allocated_bytes"`
	DRAMLogical   int64 `json:"dram_logical_bytes"`
	NVMeObjects   int64 `json:"nvme_objects"`
	// NVMeAllocated: what their NVMe records take (headers, padding); NVMeLogical their sizes.
	NVMeAllocated int64 `json:"nvme_allocated_bytes"`
	NVMeLogical   int64 `json:"nvme_logical_bytes"`
}
