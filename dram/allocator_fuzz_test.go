package dram

import (
	"encoding/binary"
	"testing"
)

// FuzzAllocator interprets the input as a sequence of operations on a small allocator and
// checks it against the bitmap model after each one: 3 bytes per op, the first choosing
// alloc (even) or free (odd), the other two a size (alloc) or which live allocation (free).
// The seed corpus in testdata/fuzz/FuzzAllocator runs in the normal test suite.
func FuzzAllocator(f *testing.F) {
	f.Add([]byte{0, 0, 16, 0, 0, 32, 1, 0, 0, 0, 1, 0, 1, 0, 0})
	f.Add([]byte{0, 0xff, 0xff, 0, 0, 1, 0, 0, 1, 3, 0, 1, 1, 0, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const capacity, align = 64 << 10, 64
		a := newAllocator(capacity, align)
		m := newModel(capacity, align)
		for len(ops) >= 3 {
			op, arg := ops[0], int64(binary.LittleEndian.Uint16(ops[1:3]))
			ops = ops[3:]
			if op%2 == 0 || len(m.live) == 0 {
				size := 1 + arg
				al, ok := a.alloc(size)
				if !ok {
					if gap := m.largestGap(capacity); gap >= binLow(binOf(a.roundSize(size))+1) {
						t.Fatalf("alloc(%d) failed with a free run of %d", size, gap)
					}
					continue
				}
				if al.off%align != 0 || al.off+al.size > capacity || !m.mark(al.off, al.size, true) {
					t.Fatalf("alloc(%d) = %+v: misaligned, out of range or overlapping", size, al)
				}
				m.used += al.size
				m.live = append(m.live, al)
			} else {
				i := int(arg) % len(m.live)
				al := m.live[i]
				m.live[i] = m.live[len(m.live)-1]
				m.live = m.live[:len(m.live)-1]
				if err := a.free(al); err != nil {
					t.Fatal(err)
				}
				if !m.mark(al.off, al.size, false) {
					t.Fatalf("free of %+v: range was not live", al)
				}
				m.used -= al.size
			}
			if a.used != m.used || a.live != int64(len(m.live)) {
				t.Fatalf("accounting: used %d live %d, model %d %d", a.used, a.live, m.used, len(m.live))
			}
			if err := a.verify(); err != nil {
				t.Fatal(err)
			}
		}
		for _, al := range m.live {
			if err := a.free(al); err != nil {
				t.Fatal(err)
			}
		}
		if a.freeBlocks != 1 || a.used != 0 {
			t.Fatalf("not whole after freeing everything: %d free blocks", a.freeBlocks)
		}
	})
}
