package client_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/server/master"
)

// notMirrored lists the master.Status JSON keys the client deliberately does not decode, and
// why (they stay in Status.Raw).
var notMirrored = map[string]string{
	"models": "the per-model memory report; Client.MemoryJSON returns it in full",
}

// TestStatusMirrorsServer: the status document is declared twice (master.Status, which the
// master encodes, and client.Status, which the client decodes). Every key the master sends,
// at every nesting level, must be a field of the client's type with the same JSON kind, or be
// listed in notMirrored; every client key must still be sent.
func TestStatusMirrorsServer(t *testing.T) {
	srv := jsonKeys(reflect.TypeOf(master.Status{}), "")
	cli := jsonKeys(reflect.TypeOf(client.Status{}), "")
	for key, kind := range srv {
		top := strings.SplitN(key, ".", 2)[0]
		if _, ok := notMirrored[top]; ok {
			continue
		}
		ck, ok := cli[key]
		if !ok {
			t.Errorf("master.Status sends %q (%s); client.Status does not decode it (add it, or list it in notMirrored)", key, kind)
			continue
		}
		if ck != kind {
			t.Errorf("%q is %s in master.Status but %s in client.Status", key, kind, ck)
		}
	}
	for key := range cli {
		if _, ok := srv[key]; !ok {
			t.Errorf("client.Status decodes %q, which master.Status no longer sends", key)
		}
	}
	if len(srv) < 30 {
		t.Fatalf("found only %d keys in master.Status: the walk is broken", len(srv))
	}
}

// jsonKeys maps each JSON key path of t ("workers.lifecycle") to the kind of its value, with
// slices of structs and structs walked into.
func jsonKeys(t reflect.Type, prefix string) map[string]string {
	out := map[string]string{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name := strings.Split(tag, ",")[0]
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		path := prefix + name
		ft := f.Type
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			out[path] = "array"
			for k, v := range jsonKeys(ft.Elem(), path+".") {
				out[k] = v
			}
			continue
		}
		if ft.Kind() == reflect.Struct {
			out[path] = "object"
			for k, v := range jsonKeys(ft, path+".") {
				out[k] = v
			}
			continue
		}
		out[path] = jsonKind(ft.Kind())
	}
	return out
}

func jsonKind(k reflect.Kind) string {
	switch {
	case k == reflect.String:
		return "string"
	case k == reflect.Bool:
		return "bool"
	case slices.Contains([]reflect.Kind{reflect.Float32, reflect.Float64}, k):
		return "float"
	case k >= reflect.Int && k <= reflect.Uint64:
		return "integer"
	default:
		return k.String()
	}
}
