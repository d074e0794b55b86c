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

// Units accepted by ParseBytes, all binary as Mooncake parses them: KB = KiB = K = 2^10,
// MB = MiB = M = 2^20, GB = GiB = G = 2^30, TB = TiB = T = 2^40 ("80GB" is 80 x 2^30 bytes in
// Mooncake's mooncake.json, its MOONCAKE_GLOBAL_SEGMENT_SIZE, vLLM's and SGLang's configs, so a
// config copied from them gets the same memory here). Unit letters are case-insensitive.
// This is the one size parser of the tree: flags, mooncake.json, the environment and the C
// library's callers (the Python package mirrors it) all agree.
var byteUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1 << 10,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1 << 20,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1 << 30,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1 << 40,
}

// SizeUnits says how sizes were parsed; the effective-config log lines carry it, so an
// operator comparing with Mooncake's numbers sees that "80GB" meant 80 x 2^30 bytes.
const SizeUnits = "binary, as Mooncake: KB=KiB=2^10, MB=2^20, GB=2^30, TB=2^40"

// ParseBytes parses a size such as "1024", "512MB", "4GiB" or "1.5GB" (every unit binary:
// "512MB" is 512 x 2^20 bytes, as in Mooncake). Negative sizes,
// unknown units and sizes that overflow int64 are errors wrapping ErrInvalidParams.
func ParseBytes(s string) (Bytes, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("%w: invalid size %q: want a number with an optional unit such as 512MB or 4GB (binary: GB = 2^30)", ErrInvalidParams, s)
	}
	mult, ok := byteUnits[unit]
	if !ok {
		return 0, fmt.Errorf("%w: invalid size %q: unknown unit %q (use B, KB, MB, GB or TB, all binary as in Mooncake; KiB, MiB, GiB, TiB are the same)", ErrInvalidParams, s, t[i:])
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
