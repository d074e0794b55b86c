package wire

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/mooncake-go/mooncake/internal/base"
)

// Encoder appends a message body to B. The zero value is ready to use; set B to a pooled
// buffer (length 0) to avoid allocating.
type Encoder struct {
	B []byte
}

// U8 appends v.
func (e *Encoder) U8(v uint8) { e.B = append(e.B, v) }

// Bool appends v as one byte, 0 or 1.
func (e *Encoder) Bool(v bool) {
	if v {
		e.B = append(e.B, 1)
	} else {
		e.B = append(e.B, 0)
	}
}

// U16 appends v little-endian.
func (e *Encoder) U16(v uint16) { e.B = binary.LittleEndian.AppendUint16(e.B, v) }

// U32 appends v little-endian.
func (e *Encoder) U32(v uint32) { e.B = binary.LittleEndian.AppendUint32(e.B, v) }

// U64 appends v little-endian.
func (e *Encoder) U64(v uint64) { e.B = binary.LittleEndian.AppendUint64(e.B, v) }

// I64 appends v as its two's complement u64.
func (e *Encoder) I64(v int64) { e.U64(uint64(v)) }

// Str appends a string as u32 length + bytes.
func (e *Encoder) Str(s string) {
	e.U32(uint32(len(s)))
	e.B = append(e.B, s...)
}

// Bytes appends p as u32 length + bytes.
func (e *Encoder) Bytes(p []byte) {
	e.U32(uint32(len(p)))
	e.B = append(e.B, p...)
}

// Count appends a list length (u32).
func (e *Encoder) Count(n int) { e.U32(uint32(n)) }

// Decoder reads a message body. Errors are sticky: after the first error every read returns
// a zero value and Err reports the first error, so message decoders read straight through
// and check once at the end.
type Decoder struct {
	b   []byte
	off int
	err error
}

// NewDecoder returns a decoder of body.
func NewDecoder(body []byte) *Decoder { return &Decoder{b: body} }

// Err returns the first error, if any. Every error wraps base.ErrInvalidParams (and
// base.ErrTooLarge where a bound was the problem), except a bad key length, which wraps
// base.ErrInvalidKey alone so that it travels as INVALID_KEY.
func (d *Decoder) Err() error { return d.err }

// Remaining returns the number of unread bytes.
func (d *Decoder) Remaining() int { return len(d.b) - d.off }

// Finish returns Err, or an error when bytes are left over: a body must be consumed exactly.
func (d *Decoder) Finish() error {
	if d.err == nil && d.off != len(d.b) {
		d.err = fmt.Errorf("%w: %d trailing bytes in message body", base.ErrInvalidParams, len(d.b)-d.off)
	}
	return d.err
}

// Fail records err (if no earlier error) and returns it.
func (d *Decoder) Fail(err error) error {
	if d.err == nil {
		d.err = err
	}
	return d.err
}

func (d *Decoder) need(n int) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || len(d.b)-d.off < n {
		d.err = fmt.Errorf("%w: message body truncated: need %d bytes at offset %d, have %d",
			base.ErrInvalidParams, n, d.off, len(d.b)-d.off)
		return false
	}
	return true
}

// U8 reads one byte.
func (d *Decoder) U8() uint8 {
	if !d.need(1) {
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

// Bool reads one byte that must be 0 or 1.
func (d *Decoder) Bool() bool {
	v := d.U8()
	if v > 1 {
		d.Fail(fmt.Errorf("%w: bool byte is %d", base.ErrInvalidParams, v))
		return false
	}
	return v == 1
}

// U16 reads a little-endian uint16.
func (d *Decoder) U16() uint16 {
	if !d.need(2) {
		return 0
	}
	v := binary.LittleEndian.Uint16(d.b[d.off:])
	d.off += 2
	return v
}

// U32 reads a little-endian uint32.
func (d *Decoder) U32() uint32 {
	if !d.need(4) {
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v
}

// U64 reads a little-endian uint64.
func (d *Decoder) U64() uint64 {
	if !d.need(8) {
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

// Size reads a u64 that must be a non-negative int64 (a size or an offset).
func (d *Decoder) Size() int64 {
	v := d.U64()
	if v > math.MaxInt64 {
		d.Fail(fmt.Errorf("%w: size %d overflows int64", base.ErrInvalidParams, v))
		return 0
	}
	return int64(v)
}

// I64 reads a u64 as a two's complement int64.
func (d *Decoder) I64() int64 { return int64(d.U64()) }

// length reads a u32 length and checks it against max and the bytes left, before the caller
// allocates anything.
func (d *Decoder) length(max int, what string) int {
	n := d.U32()
	if d.err != nil {
		return 0
	}
	if uint64(n) > uint64(max) {
		d.Fail(fmt.Errorf("%w: %w: %s is %d bytes, the limit is %d", base.ErrInvalidParams, base.ErrTooLarge, what, n, max))
		return 0
	}
	if !d.need(int(n)) {
		return 0
	}
	return int(n)
}

// Str reads a u32-length string of at most max bytes (a copy).
func (d *Decoder) Str(max int, what string) string {
	n := d.length(max, what)
	if d.err != nil || n == 0 {
		return ""
	}
	s := string(d.b[d.off : d.off+n])
	d.off += n
	return s
}

// Key reads an object key: a string of 1 to base.MaxKeyLen bytes.
func (d *Decoder) Key() string {
	n := d.U32()
	if d.err != nil {
		return ""
	}
	if n == 0 || n > base.MaxKeyLen {
		// Only ErrInvalidKey, so the error travels as INVALID_KEY (what base.ValidateKey gives).
		d.Fail(fmt.Errorf("%w: key length %d, want 1 to %d", base.ErrInvalidKey, n, base.MaxKeyLen))
		return ""
	}
	if !d.need(int(n)) {
		return ""
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s
}

// Bytes reads a u32-length byte string of at most max bytes (a copy; nil when empty).
func (d *Decoder) Bytes(max int, what string) []byte {
	n := d.length(max, what)
	if d.err != nil || n == 0 {
		return nil
	}
	p := make([]byte, n)
	copy(p, d.b[d.off:])
	d.off += n
	return p
}

// Count reads a list length (u32) and checks that the body holds at least minItem bytes per
// item before the caller allocates the list; max bounds it further (0: no extra bound).
func (d *Decoder) Count(minItem, max int, what string) int {
	n := d.U32()
	if d.err != nil {
		return 0
	}
	if max > 0 && uint64(n) > uint64(max) {
		d.Fail(fmt.Errorf("%w: %w: %s has %d items, the limit is %d", base.ErrInvalidParams, base.ErrTooLarge, what, n, max))
		return 0
	}
	if minItem < 1 {
		minItem = 1
	}
	if uint64(n)*uint64(minItem) > uint64(d.Remaining()) {
		d.Fail(fmt.Errorf("%w: %s declares %d items but the body has %d bytes left", base.ErrInvalidParams, what, n, d.Remaining()))
		return 0
	}
	return int(n)
}
