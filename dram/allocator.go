package dram

import (
	"fmt"
	"math/bits"
)

// The allocator is a two-level segregated fit (TLSF) offset allocator, the shape of
// Sebastian Aaltonen's OffsetAllocator that Mooncake uses, with four changes:
//
//  1. Sizes and offsets are int64 bytes, so one allocator covers arenas of any size.
//  2. Finer bins: 32 linear sub-bins per power of two (OffsetAllocator has 8), so a bin
//     spans at most 1/32 of its sizes.
//  3. A good-fit search in the request's own bin before rounding up. Plain TLSF rounds a
//     request up to the next bin, whose every block is large enough, and so never looks at
//     blocks in the request's own bin even when one fits exactly. Under a KV-cache workload
//     (many objects of nearly the same size) the holes left by freed objects all land in
//     that bin and would be lost: see allocator_bench_test.go for the utilisation this buys.
//     The search looks at no more than defaultGoodFitScan blocks, so allocation stays O(1).
//  4. A size quantum for large objects (defaultQuantumBits): near-equal sizes reserve equal
//     sizes, so the hole one object leaves fits the next exactly.
//
// Measured effect (BenchmarkUtilisation, 4 GiB, 3.12 MB +/- 17 B objects, random eviction):
// utilisation at allocation failures 0.67 with plain TLSF, 0.977 with (3), 0.9996 with (3)
// and (4). docs/memory.md has the full table.
//
// Blocks live in one slice of nodes indexed by int32; a node is either a free block (in a
// bin list), a used block, or an unused slot (in the unused-slot stack). Physical neighbours
// are linked by index so that free coalesces with both neighbours in O(1). No Go pointer is
// kept anywhere in the metadata: the GC scans one pointer-free slice.
//
// The allocator is not goroutine-safe and knows nothing about memory: Arena wraps it with a
// mutex and an mmap'd region. It is property-tested alone (allocator_test.go).

const (
	// slBits is the number of second-level bits: each power-of-two size class is split into
	// 1<<slBits linear bins. 5 bits keep the worst-case rounding of a plain TLSF search to
	// 1/32 (3.1%) while the bitmaps still fit a uint32 per first level.
	slBits  = 5
	slCount = 1 << slBits
	// flCount first levels cover every int64 size.
	flCount  = 64
	binCount = flCount * slCount

	// defaultQuantumBits: a size whose top bit is 2^k rounds up to a multiple of 2^(k-11),
	// between 1/4096 and 1/2048 of itself (at most 0.05% of an object): 1 KiB for 2-4 MiB
	// objects, nothing beyond the alignment below 256 KiB. Objects of nearly equal size
	// (KV-cache blocks of one model, 3.12 MB +/- 17 B) then reserve equal sizes, so the hole
	// one leaves fits the next exactly; without it a hole 64 B too small strands a whole
	// object's worth of memory (BenchmarkUtilisation: churn utilisation 0.977 without,
	// 0.9996 with).
	defaultQuantumBits = 11

	// defaultGoodFitScan bounds the good-fit search in the request's own bin. Measured on the
	// 3.12 MB +/- 17 B workload (BenchmarkUtilisation, churn): 0 (plain TLSF) gives 0.67;
	// 8 and 32 give the same 0.9996 with the quantum. 32 leaves room for mixes whose holes
	// crowd one bin, at no measurable cost (the scan stops at the first exact fit).
	defaultGoodFitScan = 32

	nilNode int32 = -1
)

type nodeState uint8

const (
	nodeUnused nodeState = iota // slot in the unused stack; only nextFree is meaningful
	nodeFree                    // a free block, in the list of bin binOf(size)
	nodeUsed                    // an allocated block
)

// node is one block of the address space (or an unused slot).
type node struct {
	off  int64 // first byte of the block
	size int64 // bytes; a multiple of the alignment; > 0 for free and used blocks
	// Physical neighbours: prevPhys ends at off, nextPhys starts at off+size; nilNode at the
	// ends of the address space. Invariant: two free blocks are never neighbours (free
	// coalesces at once).
	prevPhys, nextPhys int32
	// Bin list links of a free block; for an unused slot nextFree links the unused stack.
	prevFree, nextFree int32
	// gen counts the allocations this slot has held, so a stale allocation (freed, and the
	// slot reused) is told apart from the current one.
	gen   uint32
	state nodeState
}

// allocation names one allocated block. The zero value is not a valid allocation.
type allocation struct {
	off  int64 // first byte
	size int64 // bytes reserved: the request rounded up to the alignment
	node int32
	gen  uint32
}

// allocator hands out aligned ranges of [0, capacity). See the comment at the top of the file.
type allocator struct {
	align    int64 // power of two; every offset and size is a multiple of it
	capacity int64 // multiple of align
	scan     int   // good-fit search bound; 0 turns it off (plain TLSF, the baseline)
	// quantumBits: sizes >= 2^(quantumBits+1) round up to multiples of 2^(msb-quantumBits);
	// 0 turns quantization off.
	quantumBits int

	nodes  []node
	unused int32 // top of the stack of unused node slots, linked by nextFree

	// flBitmap bit f is set iff slBitmap[f] != 0; slBitmap[f] bit s is set iff bin
	// f*slCount+s is non-empty.
	flBitmap uint64
	slBitmap [flCount]uint32
	bins     [binCount]int32 // head of each bin's free list, nilNode if empty

	used       int64 // bytes in used blocks
	live       int64 // used blocks
	freeBlocks int64 // free blocks
}

// newAllocator returns an allocator over [0, capacity) handing out multiples of align.
// align must be a power of two and capacity a positive multiple of it.
func newAllocator(capacity, align int64) *allocator {
	if align <= 0 || align&(align-1) != 0 || capacity <= 0 || capacity%align != 0 {
		panic(fmt.Sprintf("dram: bad allocator geometry: capacity %d, align %d", capacity, align))
	}
	a := &allocator{align: align, capacity: capacity, scan: defaultGoodFitScan, quantumBits: defaultQuantumBits, unused: nilNode}
	for i := range a.bins {
		a.bins[i] = nilNode
	}
	a.nodes = make([]node, 0, 64)
	n := a.newNode()
	a.nodes[n] = node{off: 0, size: capacity, prevPhys: nilNode, nextPhys: nilNode, state: nodeFree}
	a.insertFree(n)
	return a
}

// binOf returns the bin that holds free blocks of the given size: the bin whose range
// [binLow(b), binLow(b+1)) contains size (rounding down).
func binOf(size int64) int {
	if size < slCount {
		return int(size)
	}
	msb := bits.Len64(uint64(size)) - 1 // >= slBits
	fl := msb - slBits + 1
	sl := int(size>>(msb-slBits)) - slCount
	return fl*slCount + sl
}

// binLow returns the smallest size that binOf maps to bin b.
func binLow(b int) int64 {
	fl, sl := b/slCount, b%slCount
	if fl == 0 {
		return int64(sl)
	}
	return int64(slCount+sl) << (fl - 1)
}

// newNode returns an unused slot, growing the slice if none is free.
func (a *allocator) newNode() int32 {
	if a.unused != nilNode {
		n := a.unused
		a.unused = a.nodes[n].nextFree
		return n
	}
	a.nodes = append(a.nodes, node{})
	return int32(len(a.nodes) - 1)
}

// releaseNode returns slot n to the unused stack, keeping its generation.
func (a *allocator) releaseNode(n int32) {
	gen := a.nodes[n].gen
	a.nodes[n] = node{gen: gen, state: nodeUnused, nextFree: a.unused, prevPhys: nilNode, nextPhys: nilNode, prevFree: nilNode}
	a.unused = n
}

// insertFree pushes free block n on the head of its bin's list.
func (a *allocator) insertFree(n int32) {
	nd := &a.nodes[n]
	b := binOf(nd.size)
	head := a.bins[b]
	nd.prevFree, nd.nextFree = nilNode, head
	if head != nilNode {
		a.nodes[head].prevFree = n
	}
	a.bins[b] = n
	fl, sl := b/slCount, b%slCount
	a.slBitmap[fl] |= 1 << sl
	a.flBitmap |= 1 << fl
	a.freeBlocks++
}

// removeFree unlinks free block n from its bin's list.
func (a *allocator) removeFree(n int32) {
	nd := &a.nodes[n]
	b := binOf(nd.size)
	if nd.prevFree != nilNode {
		a.nodes[nd.prevFree].nextFree = nd.nextFree
	} else {
		a.bins[b] = nd.nextFree
	}
	if nd.nextFree != nilNode {
		a.nodes[nd.nextFree].prevFree = nd.prevFree
	}
	if a.bins[b] == nilNode {
		fl, sl := b/slCount, b%slCount
		a.slBitmap[fl] &^= 1 << sl
		if a.slBitmap[fl] == 0 {
			a.flBitmap &^= 1 << fl
		}
	}
	nd.prevFree, nd.nextFree = nilNode, nilNode
	a.freeBlocks--
}

// firstBinAbove returns the lowest non-empty bin > b, or -1.
func (a *allocator) firstBinAbove(b int) int {
	fl, sl := b/slCount, b%slCount
	if sl+1 < slCount {
		if m := a.slBitmap[fl] &^ (1<<(sl+1) - 1); m != 0 {
			return fl*slCount + bits.TrailingZeros32(m)
		}
	}
	if fl+1 >= flCount {
		return -1
	}
	m := a.flBitmap &^ (1<<(fl+1) - 1)
	if m == 0 {
		return -1
	}
	f := bits.TrailingZeros64(m)
	return f*slCount + bits.TrailingZeros32(a.slBitmap[f])
}

// roundSize returns the bytes an allocation of size (0 < size <= capacity) reserves: size
// rounded up to the alignment, and, for large sizes, to a quantum of 1/2^quantumBits of the
// size (see defaultQuantumBits). If the quantum would push the request past the capacity,
// the alignment alone is used; that cannot overflow, as the capacity is a multiple of it.
func (a *allocator) roundSize(size int64) int64 {
	q := a.align
	if a.quantumBits > 0 {
		if s := bits.Len64(uint64(size)) - 1 - a.quantumBits; s > 0 && int64(1)<<s > q {
			q = int64(1) << s
		}
	}
	r := (size + q - 1) &^ (q - 1)
	if r < size || r > a.capacity {
		r = (size + a.align - 1) &^ (a.align - 1)
	}
	return r
}

// alloc reserves size bytes (rounded up by roundSize). ok is false when no free block
// is large enough (or size is out of range: the caller validates sizes for error messages).
func (a *allocator) alloc(size int64) (al allocation, ok bool) {
	if size <= 0 || size > a.capacity {
		return allocation{}, false
	}
	size = a.roundSize(size)
	b := binOf(size)

	// Good fit in the request's own bin: the smallest block >= size among the first
	// a.scan blocks, stopping at an exact fit.
	best := nilNode
	if size == binLow(b) {
		// Every block of the request's own bin fits (plain TLSF rounds such sizes to
		// themselves too).
		best = a.bins[b]
	} else if a.scan > 0 {
		seen := 0
		for n := a.bins[b]; n != nilNode && seen < a.scan; n = a.nodes[n].nextFree {
			s := a.nodes[n].size
			if s >= size && (best == nilNode || s < a.nodes[best].size) {
				best = n
				if s == size {
					break
				}
			}
			seen++
		}
	}
	if best == nilNode {
		// Every block of a higher bin fits: take the head of the lowest one.
		hb := a.firstBinAbove(b)
		if hb < 0 {
			return allocation{}, false
		}
		best = a.bins[hb]
	}

	a.removeFree(best)
	nd := &a.nodes[best]
	if rest := nd.size - size; rest > 0 {
		// Split: the front is allocated, the tail becomes a new free block. rest is a
		// multiple of the alignment, so the tail stays aligned.
		r := a.newNode()
		nd = &a.nodes[best] // newNode may have moved the slice
		a.nodes[r] = node{
			off: nd.off + size, size: rest,
			prevPhys: best, nextPhys: nd.nextPhys,
			state: nodeFree, gen: a.nodes[r].gen,
		}
		if nd.nextPhys != nilNode {
			a.nodes[nd.nextPhys].prevPhys = r
		}
		nd.nextPhys = r
		nd.size = size
		a.insertFree(r)
	}
	nd.state = nodeUsed
	nd.gen++
	a.used += size
	a.live++
	return allocation{off: nd.off, size: size, node: best, gen: nd.gen}, true
}

// check reports whether al is a live allocation of this allocator.
func (a *allocator) check(al allocation) error {
	if al.node < 0 || int(al.node) >= len(a.nodes) {
		return fmt.Errorf("node %d out of range [0, %d)", al.node, len(a.nodes))
	}
	nd := &a.nodes[al.node]
	if nd.state != nodeUsed || nd.gen != al.gen || nd.off != al.off || nd.size != al.size {
		return fmt.Errorf("allocation {off %d size %d node %d gen %d} is not live (node: state %d off %d size %d gen %d)",
			al.off, al.size, al.node, al.gen, nd.state, nd.off, nd.size, nd.gen)
	}
	return nil
}

// free returns al's range and coalesces it with free neighbours. It returns an error, and
// changes nothing, if al is not a live allocation (a double free or a forged allocation).
func (a *allocator) free(al allocation) error {
	if err := a.check(al); err != nil {
		return err
	}
	n := al.node
	a.used -= al.size
	a.live--
	a.nodes[n].state = nodeFree

	// Merge the previous block into n's place (n keeps its index only if prev is used).
	if p := a.nodes[n].prevPhys; p != nilNode && a.nodes[p].state == nodeFree {
		a.removeFree(p)
		a.absorbNext(p)
		n = p
	}
	if nx := a.nodes[n].nextPhys; nx != nilNode && a.nodes[nx].state == nodeFree {
		a.removeFree(nx)
		a.absorbNext(n)
	}
	a.insertFree(n)
	return nil
}

// absorbNext merges block n's physical successor into n and returns the successor's slot to
// the unused stack. Neither block may be in a bin list (the caller removes the free one and
// inserts the result).
func (a *allocator) absorbNext(n int32) {
	nx := a.nodes[n].nextPhys
	a.nodes[n].size += a.nodes[nx].size
	a.nodes[n].nextPhys = a.nodes[nx].nextPhys
	if nn := a.nodes[nx].nextPhys; nn != nilNode {
		a.nodes[nn].prevPhys = n
	}
	a.releaseNode(nx)
}

// largestFree returns the size of the largest free block: the largest block of the highest
// non-empty bin. O(length of that bin's list).
func (a *allocator) largestFree() int64 {
	if a.flBitmap == 0 {
		return 0
	}
	fl := 63 - bits.LeadingZeros64(a.flBitmap)
	sl := 31 - bits.LeadingZeros32(a.slBitmap[fl])
	var best int64
	for n := a.bins[fl*slCount+sl]; n != nilNode; n = a.nodes[n].nextFree {
		best = max(best, a.nodes[n].size)
	}
	return best
}

// metadataBytes is what the allocator's own bookkeeping costs on the Go heap.
func (a *allocator) metadataBytes() int64 {
	const nodeSize = 40 // unsafe.Sizeof(node{})
	return int64(cap(a.nodes))*nodeSize + binCount*4 + flCount*4 + 8 + 8*8
}

// verify walks every structure and returns the first broken invariant. O(nodes); for tests
// and invariants builds.
func (a *allocator) verify() error {
	blocks, free, err := a.verifyChain()
	if err != nil {
		return err
	}
	if err := a.verifyBins(free); err != nil {
		return err
	}
	return a.verifyUnused(blocks)
}

// verifyChain checks the physical chain: it starts at offset 0, is contiguous, covers
// [0, capacity) in aligned blocks with no two free neighbours, and agrees with the counters.
// It returns the number of blocks in the chain and how many of them are free, which the bins
// and the unused stack must account for.
func (a *allocator) verifyChain() (blocks, free int64, err error) {
	head := nilNode
	for i := range a.nodes {
		if a.nodes[i].state != nodeUnused && a.nodes[i].prevPhys == nilNode {
			if head != nilNode {
				return 0, 0, fmt.Errorf("two chain heads: %d and %d", head, i)
			}
			head = int32(i)
		}
	}
	if head == nilNode {
		return 0, 0, fmt.Errorf("no chain head")
	}
	var off, used, live int64
	prevFree := false
	prev := nilNode
	for n := head; n != nilNode; n = a.nodes[n].nextPhys {
		nd := &a.nodes[n]
		blocks++
		if nd.off != off {
			return 0, 0, fmt.Errorf("node %d at offset %d, want %d", n, nd.off, off)
		}
		if nd.prevPhys != prev {
			return 0, 0, fmt.Errorf("node %d prevPhys %d, want %d", n, nd.prevPhys, prev)
		}
		if nd.size <= 0 || nd.size%a.align != 0 || nd.off%a.align != 0 {
			return 0, 0, fmt.Errorf("node %d: bad geometry off %d size %d (align %d)", n, nd.off, nd.size, a.align)
		}
		switch nd.state {
		case nodeUsed:
			used += nd.size
			live++
			prevFree = false
		case nodeFree:
			if prevFree {
				return 0, 0, fmt.Errorf("node %d: two free neighbours not coalesced at offset %d", n, nd.off)
			}
			free++
			prevFree = true
		default:
			return 0, 0, fmt.Errorf("node %d in the chain is unused", n)
		}
		off += nd.size
		prev = n
		if blocks > int64(len(a.nodes)) {
			return 0, 0, fmt.Errorf("physical chain has a cycle")
		}
	}
	if off != a.capacity {
		return 0, 0, fmt.Errorf("chain covers %d bytes, capacity %d", off, a.capacity)
	}
	if used != a.used || live != a.live || free != a.freeBlocks {
		return 0, 0, fmt.Errorf("accounting: chain used %d live %d free blocks %d; counters %d %d %d",
			used, live, free, a.used, a.live, a.freeBlocks)
	}
	return blocks, free, nil
}

// verifyBins checks the segregated lists against the chain's free blocks: every free block in
// the list of its size class, each list doubly linked, both bitmaps exact.
func (a *allocator) verifyBins(free int64) error {
	var inBins int64
	for b := range a.bins {
		fl, sl := b/slCount, b%slCount
		nonEmpty := a.bins[b] != nilNode
		if nonEmpty != (a.slBitmap[fl]&(1<<sl) != 0) {
			return fmt.Errorf("bin %d: bitmap says %v", b, !nonEmpty)
		}
		p := nilNode
		for n := a.bins[b]; n != nilNode; n = a.nodes[n].nextFree {
			nd := &a.nodes[n]
			if nd.state != nodeFree || binOf(nd.size) != b || nd.prevFree != p {
				return fmt.Errorf("bin %d: node %d state %d size %d prevFree %d (want %d)", b, n, nd.state, nd.size, nd.prevFree, p)
			}
			p = n
			inBins++
			// A list longer than the free blocks is a cycle (or a block in two lists).
			if inBins > free {
				return fmt.Errorf("bin lists hold more than %d free blocks", free)
			}
		}
	}
	for fl := range a.slBitmap {
		if (a.slBitmap[fl] != 0) != (a.flBitmap&(1<<fl) != 0) {
			return fmt.Errorf("first-level bitmap wrong at %d", fl)
		}
	}
	if inBins != free {
		return fmt.Errorf("bins hold %d blocks, chain has %d free", inBins, free)
	}
	return nil
}

// verifyUnused checks the stack of unused node slots: it holds exactly the slots that are not
// among the chain's blocks.
func (a *allocator) verifyUnused(blocks int64) error {
	unused := int64(0)
	for n := a.unused; n != nilNode; n = a.nodes[n].nextFree {
		if a.nodes[n].state != nodeUnused {
			return fmt.Errorf("unused stack holds node %d in state %d", n, a.nodes[n].state)
		}
		unused++
		if unused > int64(len(a.nodes)) {
			return fmt.Errorf("unused stack has a cycle")
		}
	}
	if unused+blocks != int64(len(a.nodes)) {
		return fmt.Errorf("%d unused + %d blocks != %d nodes", unused, blocks, len(a.nodes))
	}
	return nil
}
