package tiertest

import (
	"fmt"
	"sort"
	"sync"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Op names a MemLower method for failure injection.
type Op string

// The operations Fail can target.
const (
	OpPut    Op = "put"
	OpRead   Op = "read"
	OpDelete Op = "delete"
	OpScan   Op = "scan"
)

// MemLower is an in-memory tier.Lower: a map from key to one version of the bytes (a copy).
// It is goroutine-safe. Hooks let a test fail or block operations.
type MemLower struct {
	mu sync.Mutex // protects everything below
	m  map[string]memObject
	// fail, when set for an op, is called before it; a non-nil error fails the op.
	fail map[Op]func(key string) error
	// corrupt keys make ReadInto return base.ErrCorruption.
	corrupt map[string]bool
	// gate, when set, blocks every Put until it is closed.
	gate chan struct{}
	// capacity, when > 0, bounds the bytes held: a Put past it fails with base.ErrNoSpace.
	capacity, bytes int64
	// Counts of successful operations, and the syncs asked for.
	Puts, Syncs, Reads, Deletes int
}

type memObject struct {
	meta base.ObjectMeta
	data []byte
}

// NewMemLower returns an empty MemLower.
func NewMemLower() *MemLower {
	return &MemLower{m: map[string]memObject{}, fail: map[Op]func(string) error{}, corrupt: map[string]bool{}}
}

// Fail installs f before op (nil removes it).
func (l *MemLower) Fail(op Op, f func(key string) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f == nil {
		delete(l.fail, op)
	} else {
		l.fail[op] = f
	}
}

// SetCapacity bounds the bytes held (the sum of the objects' sizes; 0: no bound): a Put that
// would exceed it fails with base.ErrNoSpace, as a full nvme store does.
func (l *MemLower) SetCapacity(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.capacity = n
}

// Corrupt makes reads of key fail with base.ErrCorruption.
func (l *MemLower) Corrupt(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.corrupt[key] = true
}

// Gate makes every Put wait until the returned function is called.
func (l *MemLower) Gate() (open func()) {
	ch := make(chan struct{})
	l.mu.Lock()
	l.gate = ch
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.gate = nil
			l.mu.Unlock()
			close(ch)
		})
	}
}

func (l *MemLower) check(op Op, key string) error {
	if f := l.fail[op]; f != nil {
		return f(key)
	}
	return nil
}

// Put stores data with its checksum computed (PutChecked with an unknown checksum).
func (l *MemLower) Put(key string, v base.Version, data []byte, sync bool) error {
	return l.PutChecked(key, v, data, 0, sync)
}

// PutChecked implements tier.Lower. A non-zero checksum is stored as given, as nvme does.
func (l *MemLower) PutChecked(key string, v base.Version, data []byte, checksum uint64, sync bool) error {
	l.mu.Lock()
	gate := l.gate
	l.mu.Unlock()
	if gate != nil {
		<-gate
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(OpPut, key); err != nil {
		return err
	}
	old := int64(len(l.m[key].data))
	if l.capacity > 0 && l.bytes-old+int64(len(data)) > l.capacity {
		return fmt.Errorf("%w: tiertest: %d of %d bytes held, %d more needed", base.ErrNoSpace, l.bytes-old, l.capacity, len(data))
	}
	l.bytes += int64(len(data)) - old
	if checksum == 0 {
		checksum = base.Checksum(data)
	}
	l.m[key] = memObject{
		meta: base.ObjectMeta{Key: key, Version: v, Size: int64(len(data)), Checksum: checksum},
		data: append([]byte(nil), data...),
	}
	delete(l.corrupt, key)
	l.Puts++
	if sync {
		l.Syncs++
	}
	return nil
}

// Stat implements tier.Lower.
func (l *MemLower) Stat(key string) (base.ObjectMeta, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, err := l.lookupLocked(key, 0)
	return o.meta, err
}

// ReadInto implements tier.Lower.
func (l *MemLower) ReadInto(key string, v base.Version, dst []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(OpRead, key); err != nil {
		return err
	}
	o, err := l.lookupLocked(key, v)
	switch {
	case err != nil:
		return err
	case int64(len(dst)) != o.meta.Size:
		return fmt.Errorf("%w: memlower: %q is %d bytes, dst %d", base.ErrInvalidParams, key, o.meta.Size, len(dst))
	case l.corrupt[key]:
		return fmt.Errorf("%w: memlower: %q", base.ErrCorruption, key)
	}
	copy(dst, o.data)
	l.Reads++
	return nil
}

// lookupLocked returns key's object if it is held at version v (0: any). REQUIRES: l.mu.
func (l *MemLower) lookupLocked(key string, v base.Version) (memObject, error) {
	o, ok := l.m[key]
	switch {
	case !ok:
		return o, fmt.Errorf("%w: memlower: %q", base.ErrObjectNotFound, key)
	case v != 0 && o.meta.Version != v:
		return o, fmt.Errorf("%w: memlower: %q is at %d, not %d", base.ErrInvalidVersion, key, o.meta.Version, v)
	}
	return o, nil
}

// Delete implements tier.Lower.
func (l *MemLower) Delete(key string, v base.Version) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(OpDelete, key); err != nil {
		return err
	}
	o, err := l.lookupLocked(key, v)
	if err != nil {
		return err
	}
	l.bytes -= int64(len(o.data))
	delete(l.m, key)
	l.Deletes++
	return nil
}

// Scan implements tier.Lower, in key order.
func (l *MemLower) Scan(fn func(base.ObjectMeta) error) error {
	l.mu.Lock()
	if err := l.check(OpScan, ""); err != nil {
		l.mu.Unlock()
		return err
	}
	metas := make([]base.ObjectMeta, 0, len(l.m))
	for _, o := range l.m {
		metas = append(metas, o.meta)
	}
	l.mu.Unlock()
	sort.Slice(metas, func(i, j int) bool { return metas[i].Key < metas[j].Key })
	for _, m := range metas {
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}

// Has reports whether key is held at version v (0: any).
func (l *MemLower) Has(key string, v base.Version) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, ok := l.m[key]
	return ok && (v == 0 || o.meta.Version == v)
}

// Len returns the number of objects held.
func (l *MemLower) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
