package testutil

import (
	"strings"

	"github.com/mooncake-go/mooncake/internal/base"
)

// ScriptKey turns a test script's @<tenant>/<key> into the stored key of key in tenant
// (base.TenantKey); other keys are unchanged. It panics on a key no client could store.
func ScriptKey(k string) string {
	rest, ok := strings.CutPrefix(k, "@")
	if !ok {
		return k
	}
	t, key, _ := strings.Cut(rest, "/")
	stored, err := base.TenantKey(t, key)
	if err != nil {
		panic(err)
	}
	return stored
}

// ShowKey is ScriptKey's inverse, for script output.
func ShowKey(stored string) string {
	t, key := base.SplitTenantKey(stored)
	if t == base.DefaultTenant {
		return key
	}
	return "@" + t + "/" + key
}
