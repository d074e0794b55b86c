package base

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bytes is a size in bytes. It parses and prints human units: ParseBytes("4GiB"), and String
// gives "4.0 GiB".
type Bytes int64

// Units accepted by ParseBytes. Binary (KiB, MiB, GiB, TiB) and decimal (KB, MB, GB, TB) are
// both accepted and mean what they say; "K", "M", "G", "T" alone are binary, as in Mooncake's
// and Kubernetes' configs where "4G" means 4 GiB. Unit letters are case-insensitive.
var byteUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

// ParseBytes parses a size such as "1024", "512MB", "4GiB" or "1.5GiB". Negative sizes,
// unknown units and sizes that overflow int64 are errors wrapping ErrInvalidParams.
func ParseBytes(s string) (Bytes, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("%w: invalid size %q: want a number with an optional unit such as 512MiB or 4GB", ErrInvalidParams, s)
	}
	mult, ok := byteUnits[unit]
	if !ok {
		return 0, fmt.Errorf("%w: invalid size %q: unknown unit %q (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", ErrInvalidParams, s, t[i:])
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseUint(num, 10, 63)
		if err != nil {
			return 0, fmt.Errorf("%w: invalid size %q: %v", ErrInvalidParams, s, err)
		}
		if mult != 1 && n > uint64(math.MaxInt64/int64(mult)) {
			return 0, fmt.Errorf("%w: invalid size %q: too large", ErrInvalidParams, s)
		}
		return Bytes(int64(n) * int64(mult)), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: invalid size %q: %v", ErrInvalidParams, s, err)
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%w: invalid size %q: too large", ErrInvalidParams, s)
	}
	return Bytes(v), nil
}

// String prints the size with a binary unit and one decimal ("1.2 GiB"); sizes under 1 KiB
// print as bytes ("512 B").
func (b Bytes) String() string {
	const units = "KMGTPE"
	v := float64(b)
	if b < 1024 && b > -1024 {
		return strconv.FormatInt(int64(b), 10) + " B"
	}
	i := -1
	for math.Abs(v) >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units[i:i+1] + "iB"
}

// Set implements flag.Value (and pflag.Value), so sizes can be flags.
func (b *Bytes) Set(s string) error {
	v, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// Type implements pflag.Value.
func (b *Bytes) Type() string { return "size" }

// MarshalText prints the size in bytes (exact, unlike String).
func (b Bytes) MarshalText() ([]byte, error) { return strconv.AppendInt(nil, int64(b), 10), nil }

// UnmarshalText accepts anything ParseBytes does, so JSON configs may say "4GiB" or 4294967296.
func (b *Bytes) UnmarshalText(p []byte) error { return b.Set(string(p)) }

// UnmarshalJSON accepts a JSON number of bytes or a string with a unit.
func (b *Bytes) UnmarshalJSON(p []byte) error {
	s := strings.TrimSpace(string(p))
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		unq, err := strconv.Unquote(s)
		if err != nil {
			return fmt.Errorf("%w: invalid size %s", ErrInvalidParams, s)
		}
		s = unq
	}
	return b.Set(s)
}
