package base

import (
	"fmt"
	"strings"
)

// MaxKVSessionIDLen bounds a KV session id (Mooncake's kv_session: nonempty, at most 4096
// bytes, no NUL byte).
const MaxKVSessionIDLen = 4096

// ValidateKVSessionID checks a KV session id as Mooncake does; errors wrap ErrInvalidParams.
func ValidateKVSessionID(id string) error {
	if id == "" || len(id) > MaxKVSessionIDLen || strings.IndexByte(id, 0) >= 0 {
		return fmt.Errorf("%w: KV session id of %d bytes: want 1 to %d bytes without NUL", ErrInvalidParams, len(id), MaxKVSessionIDLen)
	}
	return nil
}
