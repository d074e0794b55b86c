package raftmeta

import (
	"encoding/binary"
	"fmt"
	"regexp"

	"github.com/mooncake-go/mooncake/internal/base"
)

// CommandType is the type byte of an encoded command. The numbers are a contract with every
// raft log and snapshot ever written: add new ones at the end, never renumber.
type CommandType uint8

const (
	TypePutEnd           CommandType = 1
	TypeRemove           CommandType = 2
	TypeRemoveRegex      CommandType = 3
	TypeRemoveAll        CommandType = 4
	TypeRegisterWorker   CommandType = 5
	TypeUnregisterWorker CommandType = 6
	TypeDropReplicas     CommandType = 7
	TypeMarkWorkerDead   CommandType = 8
	TypeSetPin           CommandType = 9
	TypeRegisterMaster   CommandType = 10
)

// commandVersion is the first byte of every encoded command. A build decodes only versions it
// knows; a leader must not propose a new version until every master runs a build that knows it
// (a follower that cannot decode an entry would diverge, so apply treats it as a bug).
const commandVersion = 1

// Bounds checked by encoders and decoders before anything is allocated.
const (
	// MaxBatch bounds the items of one PutEnd, Remove or DropReplicas command, so one raft
	// entry stays well under a megabyte with typical keys.
	MaxBatch = 16384
	// MaxReplicas bounds the replicas of one object.
	MaxReplicas = 255
	// maxAddrLen bounds addresses and master ids.
	maxAddrLen = 1024
	// maxPatternLen bounds a RemoveRegex pattern.
	maxPatternLen = 4096
	// MaxCommandBytes bounds one encoded command (one raft entry). A PutEnd of MaxBatch
	// 64-byte keys with 2 replicas is about 1.8 MB; long keys make batches bigger, and the
	// caller splits them. The bound keeps one AppendEntries RPC (up to MaxAppendEntries
	// entries) and one FSM batch from growing without limit.
	MaxCommandBytes = 4 << 20
	// maxSize is the largest object size: sizes share their record word with the hard pin flag.
	maxSize = 1<<62 - 1
)

// Command is one FSM command. The concrete types are PutEnd, Remove, RemoveRegex, RemoveAll,
// RegisterWorker, UnregisterWorker, DropReplicas, MarkWorkerDead, SetPin and RegisterMaster
// (values or pointers). Node.Apply validates, encodes and proposes it.
type Command interface {
	Type() CommandType
	// Validate reports whether the command is well formed; Node.Apply calls it before
	// proposing. Errors wrap base.ErrInvalidParams (or base.ErrInvalidKey).
	Validate() error
	appendFields(b []byte) []byte
}

// PutEnd makes objects visible: one raft entry for the whole batch. Without Upsert a key that
// exists fails its item with base.ErrObjectAlreadyExists, unless the stored object has the same
// version and checksum (a retried PutEnd that already committed succeeds again). Replicas on
// workers that are not registered and active are left out of the record; an item left with no
// replica fails with base.ErrSegmentNotFound.
//
// Each item is the object's record (base.Object) as committed: Version nonzero (from
// Node.NewVersion), 1 to MaxReplicas distinct Replicas, Tokens 0 to MaxTokens and Model a
// model name or "" (models.go).
type PutEnd struct {
	Items  []base.Object
	Upsert bool
	// Now is the proposer's clock in unix nanoseconds, stored as each object's Created. Zero:
	// Node.Apply fills in time.Now(). Apply itself never reads a clock.
	Now int64
}

// Remove removes keys; an absent key fails its item with base.ErrObjectNotFound.
type Remove struct{ Keys []string }

// RemoveRegex removes every key the RE2 pattern matches (Go regexp syntax, unanchored like
// regexp.MatchString). Result.Removed counts them. Apply is O(objects).
type RemoveRegex struct{ Pattern string }

// RemoveAll removes every object. Result.Removed counts them.
type RemoveAll struct{}

// RegisterWorker adds a worker (segment) or updates a known one (address, capacities) and
// makes it active. Replicas it reports lost are dropped separately, with DropReplicas.
type RegisterWorker struct {
	ID           base.WorkerID
	Address      string
	DRAMCapacity int64
	NVMeCapacity int64
}

// UnregisterWorker forgets a worker: its replicas are dropped and objects left with none are
// removed. An unknown worker gives base.ErrSegmentNotFound.
type UnregisterWorker struct{ ID base.WorkerID }

// DropReplicas records that Worker no longer holds these objects: the replica is dropped and
// an object left with none is removed. An item whose key is absent, whose version differs, or
// which has no replica on Worker fails with base.ErrObjectNotFound (nothing changes for it).
type DropReplicas struct {
	Worker base.WorkerID
	Items  []base.KeyVersion
}

// MarkWorkerDead records the leader's conclusion that a worker is gone: the segment becomes
// SegmentDead and its replicas are dropped (objects left with none are removed). Apply is
// O(objects).
type MarkWorkerDead struct{ ID base.WorkerID }

// SetPin sets an object's pins (both fields are replaced). Version 0 means any version.
type SetPin struct {
	Key          string
	Version      base.Version
	SoftPinUntil int64
	HardPin      bool
}

// RegisterMaster records a master's client-facing RPC address; an empty RPCAddr removes it.
type RegisterMaster struct {
	ID      string
	RPCAddr string
}

func (PutEnd) Type() CommandType           { return TypePutEnd }
func (Remove) Type() CommandType           { return TypeRemove }
func (RemoveRegex) Type() CommandType      { return TypeRemoveRegex }
func (RemoveAll) Type() CommandType        { return TypeRemoveAll }
func (RegisterWorker) Type() CommandType   { return TypeRegisterWorker }
func (UnregisterWorker) Type() CommandType { return TypeUnregisterWorker }
func (DropReplicas) Type() CommandType     { return TypeDropReplicas }
func (MarkWorkerDead) Type() CommandType   { return TypeMarkWorkerDead }
func (SetPin) Type() CommandType           { return TypeSetPin }
func (RegisterMaster) Type() CommandType   { return TypeRegisterMaster }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("raftmeta: %w: %s", base.ErrInvalidParams, fmt.Sprintf(format, args...))
}

func checkBatch(n int) error {
	if n == 0 || n > MaxBatch {
		return invalidf("batch of %d items, want 1 to %d", n, MaxBatch)
	}
	return nil
}

func checkAddr(what, s string, empty bool) error {
	if (s == "" && !empty) || len(s) > maxAddrLen {
		return invalidf("%s must be 1 to %d bytes, got %d", what, maxAddrLen, len(s))
	}
	return nil
}

func checkCapacity(what string, v int64) error {
	if v < 0 {
		return invalidf("%s %d is negative", what, v)
	}
	return nil
}

// validatePutItem checks one PutEnd item; apply runs the same check, so a decoded item that
// bypassed the proposer's check fails alike on every node.
func validatePutItem(it *base.Object) error {
	if err := base.ValidateKey(it.Key); err != nil {
		return fmt.Errorf("raftmeta: %w", err)
	}
	if it.Size < 0 || it.Size > maxSize {
		return invalidf("key %q: size %d out of range", it.Key, it.Size)
	}
	if it.Version == 0 {
		return invalidf("key %q: version 0", it.Key)
	}
	if it.SoftPinUntil < 0 {
		return invalidf("key %q: negative soft pin deadline", it.Key)
	}
	if len(it.Replicas) == 0 || len(it.Replicas) > MaxReplicas {
		return invalidf("key %q: %d replicas, want 1 to %d", it.Key, len(it.Replicas), MaxReplicas)
	}
	for i, w := range it.Replicas {
		if err := base.ValidateWorkerID(w); err != nil {
			return fmt.Errorf("raftmeta: key %q: %w", it.Key, err)
		}
		for _, v := range it.Replicas[:i] {
			if v == w {
				return invalidf("key %q: replica %q listed twice", it.Key, w)
			}
		}
	}
	return validateTokens(it)
}

func (c PutEnd) Validate() error {
	if err := checkBatch(len(c.Items)); err != nil {
		return err
	}
	for i := range c.Items {
		if err := validatePutItem(&c.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

func (c Remove) Validate() error {
	if err := checkBatch(len(c.Keys)); err != nil {
		return err
	}
	for _, k := range c.Keys {
		if err := base.ValidateKey(k); err != nil {
			return fmt.Errorf("raftmeta: %w", err)
		}
	}
	return nil
}

func (c RemoveRegex) Validate() error {
	if len(c.Pattern) > maxPatternLen {
		return invalidf("pattern is %d bytes, the limit is %d", len(c.Pattern), maxPatternLen)
	}
	if _, err := regexp.Compile(c.Pattern); err != nil {
		return invalidf("pattern %q: %v", c.Pattern, err)
	}
	return nil
}

func (RemoveAll) Validate() error { return nil }

func (c RegisterWorker) Validate() error {
	if err := base.ValidateWorkerID(c.ID); err != nil {
		return fmt.Errorf("raftmeta: %w", err)
	}
	if err := checkAddr("worker address", c.Address, false); err != nil {
		return err
	}
	if err := checkCapacity("DRAM capacity", c.DRAMCapacity); err != nil {
		return err
	}
	return checkCapacity("NVMe capacity", c.NVMeCapacity)
}

func (c UnregisterWorker) Validate() error {
	if err := base.ValidateWorkerID(c.ID); err != nil {
		return fmt.Errorf("raftmeta: %w", err)
	}
	return nil
}

func (c DropReplicas) Validate() error {
	if err := base.ValidateWorkerID(c.Worker); err != nil {
		return fmt.Errorf("raftmeta: %w", err)
	}
	if err := checkBatch(len(c.Items)); err != nil {
		return err
	}
	for _, it := range c.Items {
		if err := base.ValidateKey(it.Key); err != nil {
			return fmt.Errorf("raftmeta: %w", err)
		}
	}
	return nil
}

func (c MarkWorkerDead) Validate() error {
	if err := base.ValidateWorkerID(c.ID); err != nil {
		return fmt.Errorf("raftmeta: %w", err)
	}
	return nil
}

func (c SetPin) Validate() error {
	if err := base.ValidateKey(c.Key); err != nil {
		return fmt.Errorf("raftmeta: %w", err)
	}
	if c.SoftPinUntil < 0 {
		return invalidf("negative soft pin deadline")
	}
	return nil
}

func (c RegisterMaster) Validate() error {
	if err := checkAddr("master id", c.ID, false); err != nil {
		return err
	}
	return checkAddr("master RPC address", c.RPCAddr, true)
}

// EncodeCommand returns the versioned binary encoding of c (see doc.go, "Command format"). It
// does not validate; Node.Apply validates first.
func EncodeCommand(c Command) []byte {
	b := make([]byte, 0, 64)
	b = append(b, commandVersion, byte(c.Type()))
	return c.appendFields(b)
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func (c PutEnd) appendFields(b []byte) []byte {
	b = appendBool(b, c.Upsert)
	b = binary.AppendVarint(b, c.Now)
	b = binary.AppendUvarint(b, uint64(len(c.Items)))
	for i := range c.Items {
		it := &c.Items[i]
		b = appendStr(b, it.Key)
		b = binary.AppendVarint(b, it.Size)
		b = binary.AppendUvarint(b, uint64(it.Version))
		b = binary.LittleEndian.AppendUint64(b, it.Checksum)
		b = binary.AppendVarint(b, it.SoftPinUntil)
		b = appendBool(b, it.HardPin)
		b = binary.AppendUvarint(b, uint64(len(it.Replicas)))
		for _, w := range it.Replicas {
			b = appendStr(b, string(w))
		}
	}
	return appendPutTokens(b, c.Items)
}

func (c Remove) appendFields(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(c.Keys)))
	for _, k := range c.Keys {
		b = appendStr(b, k)
	}
	return b
}

func (c RemoveRegex) appendFields(b []byte) []byte { return appendStr(b, c.Pattern) }
func (RemoveAll) appendFields(b []byte) []byte     { return b }

func (c RegisterWorker) appendFields(b []byte) []byte {
	b = appendStr(b, string(c.ID))
	b = appendStr(b, c.Address)
	b = binary.AppendVarint(b, c.DRAMCapacity)
	return binary.AppendVarint(b, c.NVMeCapacity)
}

func (c UnregisterWorker) appendFields(b []byte) []byte { return appendStr(b, string(c.ID)) }
func (c MarkWorkerDead) appendFields(b []byte) []byte   { return appendStr(b, string(c.ID)) }

func (c DropReplicas) appendFields(b []byte) []byte {
	b = appendStr(b, string(c.Worker))
	b = binary.AppendUvarint(b, uint64(len(c.Items)))
	for _, it := range c.Items {
		b = appendStr(b, it.Key)
		b = binary.AppendUvarint(b, uint64(it.Version))
	}
	return b
}

func (c SetPin) appendFields(b []byte) []byte {
	b = appendStr(b, c.Key)
	b = binary.AppendUvarint(b, uint64(c.Version))
	b = binary.AppendVarint(b, c.SoftPinUntil)
	return appendBool(b, c.HardPin)
}

func (c RegisterMaster) appendFields(b []byte) []byte {
	b = appendStr(b, c.ID)
	return appendStr(b, c.RPCAddr)
}

// decoder reads fields from an encoded command. Every read checks the remaining length first;
// the first failure sticks in err and later reads return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrBadCommand, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	// n > 1 with a zero last byte is an overlong encoding: refused, so every command has
	// exactly one encoding.
	if n <= 0 || (n > 1 && d.b[n-1] == 0) {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 || (n > 1 && d.b[n-1] == 0) {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) u64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) boolean() bool {
	if d.err != nil {
		return false
	}
	if len(d.b) < 1 || d.b[0] > 1 {
		d.fail("bad bool")
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

// str reads a length-prefixed string of at most max bytes. The string is a copy, so a decoded
// command never pins the raft log entry it came from (keys live on in the FSM).
func (d *decoder) str(max int) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(max) || n > uint64(len(d.b)) {
		d.fail("string of %d bytes (limit %d, %d left)", n, max, len(d.b))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// count reads an item count of at most max, each item at least minItem bytes long, so a
// forged count cannot make the decoder allocate more than the input justifies.
func (d *decoder) count(max, minItem int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n > uint64(max) || n*uint64(minItem) > uint64(len(d.b)) {
		d.fail("count %d (limit %d, %d bytes left)", n, max, len(d.b))
		return 0
	}
	return int(n)
}

// DecodeCommand decodes an encoded command. It never panics: bad input gives an error
// wrapping ErrBadCommand. The result is not validated (apply checks what it relies on).
func DecodeCommand(b []byte) (Command, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadCommand, len(b))
	}
	if b[0] != commandVersion {
		return nil, fmt.Errorf("%w: unknown command version %d", ErrBadCommand, b[0])
	}
	d := &decoder{b: b[2:]}
	var c Command
	switch CommandType(b[1]) {
	case TypePutEnd:
		var p PutEnd
		p.Upsert = d.boolean()
		p.Now = d.varint()
		// An item is at least key(2) size(1) version(1) checksum(8) pin(1) hard(1) nrep(1).
		n := d.count(MaxBatch, 15)
		p.Items = make([]base.Object, n)
		for i := 0; i < n && d.err == nil; i++ {
			it := &p.Items[i]
			it.Key = d.str(base.MaxKeyLen)
			it.Size = d.varint()
			it.Version = base.Version(d.uvarint())
			it.Checksum = d.u64()
			it.SoftPinUntil = d.varint()
			it.HardPin = d.boolean()
			nr := d.count(MaxReplicas, 2)
			it.Replicas = make([]base.WorkerID, nr)
			for j := 0; j < nr; j++ {
				it.Replicas[j] = base.WorkerID(d.str(base.MaxWorkerIDLen))
			}
		}
		decodePutTokens(d, &p)
		c = p
	case TypeRemove:
		n := d.count(MaxBatch, 2)
		keys := make([]string, n)
		for i := 0; i < n; i++ {
			keys[i] = d.str(base.MaxKeyLen)
		}
		c = Remove{Keys: keys}
	case TypeRemoveRegex:
		c = RemoveRegex{Pattern: d.str(maxPatternLen)}
	case TypeRemoveAll:
		c = RemoveAll{}
	case TypeRegisterWorker:
		var r RegisterWorker
		r.ID = base.WorkerID(d.str(base.MaxWorkerIDLen))
		r.Address = d.str(maxAddrLen)
		r.DRAMCapacity = d.varint()
		r.NVMeCapacity = d.varint()
		c = r
	case TypeUnregisterWorker:
		c = UnregisterWorker{ID: base.WorkerID(d.str(base.MaxWorkerIDLen))}
	case TypeDropReplicas:
		c = decodeWorkerItems(d)
	case TypeMarkWorkerDead:
		c = MarkWorkerDead{ID: base.WorkerID(d.str(base.MaxWorkerIDLen))}
	case TypeSetPin:
		var s SetPin
		s.Key = d.str(base.MaxKeyLen)
		s.Version = base.Version(d.uvarint())
		s.SoftPinUntil = d.varint()
		s.HardPin = d.boolean()
		c = s
	case TypeRegisterMaster:
		var r RegisterMaster
		r.ID = d.str(maxAddrLen)
		r.RPCAddr = d.str(maxAddrLen)
		c = r
	default:
		var ok bool
		if c, ok = decodeLifecycle(CommandType(b[1]), d); !ok {
			c = decodeModelCommand(CommandType(b[1]), d)
		}
		if CommandType(b[1]) == TypeKVSession {
			c = decodeKVSession(d)
		}
		if c == nil {
			c = decodeTenantCommand(CommandType(b[1]), d)
		}
		if c == nil {
			return nil, fmt.Errorf("%w: unknown command type %d", ErrBadCommand, b[1])
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes after command type %d", ErrBadCommand, len(d.b), b[1])
	}
	return c, nil
}
