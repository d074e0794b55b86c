package testutil

import (
	"fmt"
	"math"
)

// MsgpackDecode decodes one MessagePack value (the subset the KV event publisher of
// server/master writes) for the tests; rest is what follows it.
func MsgpackDecode(b []byte) (any, []byte, error) {
	if len(b) == 0 {
		return nil, nil, fmt.Errorf("short")
	}
	t, b := b[0], b[1:]
	need := func(n int) ([]byte, []byte, error) {
		if len(b) < n {
			return nil, nil, fmt.Errorf("short")
		}
		return b[:n], b[n:], nil
	}
	items := func(n int, pairs bool) (any, []byte, error) {
		if pairs {
			m := map[string]any{}
			for range n {
				k, rest, err := MsgpackDecode(b)
				if err != nil {
					return nil, nil, err
				}
				v, rest, err := MsgpackDecode(rest)
				if err != nil {
					return nil, nil, err
				}
				m[fmt.Sprint(k)], b = v, rest
			}
			return m, b, nil
		}
		a := []any{}
		for range n {
			v, rest, err := MsgpackDecode(b)
			if err != nil {
				return nil, nil, err
			}
			a, b = append(a, v), rest
		}
		return a, b, nil
	}
	var err error
	var p []byte
	switch {
	case t < 0x80:
		return uint64(t), b, nil
	case t&0xf0 == 0x80:
		return items(int(t&0x0f), true)
	case t&0xf0 == 0x90:
		return items(int(t&0x0f), false)
	case t&0xe0 == 0xa0:
		p, b, err = need(int(t & 0x1f))
		return string(p), b, err
	case t == 0xc0:
		return nil, b, nil
	case t == 0xcc, t == 0xcd, t == 0xce, t == 0xcf, t == 0xd3:
		n := map[byte]int{0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8, 0xd3: 8}[t]
		if p, b, err = need(n); err != nil {
			return nil, nil, err
		}
		var v uint64
		for _, c := range p {
			v = v<<8 | uint64(c)
		}
		if t == 0xd3 {
			return int64(v), b, nil
		}
		return v, b, nil
	case t == 0xd9, t == 0xda, t == 0xdb:
		n := map[byte]int{0xd9: 1, 0xda: 2, 0xdb: 4}[t]
		if p, b, err = need(n); err != nil {
			return nil, nil, err
		}
		l := 0
		for _, c := range p {
			l = l<<8 | int(c)
		}
		p, b, err = need(l)
		return string(p), b, err
	case t == 0xdc, t == 0xdd, t == 0xde, t == 0xdf:
		n := map[byte]int{0xdc: 2, 0xdd: 4, 0xde: 2, 0xdf: 4}[t]
		if p, b, err = need(n); err != nil {
			return nil, nil, err
		}
		l := 0
		for _, c := range p {
			l = l<<8 | int(c)
		}
		if l > math.MaxInt32 {
			return nil, nil, fmt.Errorf("too long")
		}
		return items(l, t >= 0xde)
	}
	return nil, nil, fmt.Errorf("type %#x", t)
}
