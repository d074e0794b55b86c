package wire

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

// The fuzzers' seed corpus lives in testdata/fuzz/<FuzzName>/ and runs in the normal suite.
// Regenerate it after a format change with
//
//	go test ./transfer/internal/wire -run TestSeedCorpus -update-corpus
//
// and fuzz each decoder with, e.g.,
//
//	go test -run '^$' -fuzz=FuzzRequest -fuzztime=60s ./transfer/internal/wire
var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz seed files")

// FuzzHeader: any 32 bytes either fail to decode or re-encode to themselves.
func FuzzHeader(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Header
		lim := Limits{MaxBodyLen: 1 << 20, MaxPayloadLen: 1 << 30}
		if err := DecodeHeader(b, lim, &h); err != nil {
			return
		}
		if h.BodyLen > lim.MaxBodyLen || h.PayloadLen > lim.MaxPayloadLen {
			t.Fatalf("accepted lengths over the limits: %+v", h)
		}
		var out [HeaderLen]byte
		PutHeader(out[:], &h)
		if !bytes.Equal(out[:], b[:HeaderLen]) {
			t.Fatalf("header does not round-trip: %x -> %+v -> %x", b[:HeaderLen], h, out)
		}
	})
}

// FuzzClientHello: any bytes either fail or decode to a hello that re-encodes to the prefix
// that was consumed.
func FuzzClientHello(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		h, err := ReadClientHello(r)
		if err != nil {
			return
		}
		used := len(b) - r.Len()
		if out := AppendClientHello(nil, h.Version, h.ClusterID); !bytes.Equal(out, b[:used]) {
			t.Fatalf("hello does not round-trip: %x -> %x", b[:used], out)
		}
	})
}

// FuzzServerHello: as FuzzClientHello, for the server's reply.
func FuzzServerHello(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		h, err := ReadServerHello(r)
		if err != nil {
			return
		}
		used := len(b) - r.Len()
		if out := AppendServerHello(nil, h.Version, h.Status, h.Msg); !bytes.Equal(out, b[:used]) {
			t.Fatalf("server hello does not round-trip: %x -> %x", b[:used], out)
		}
	})
}

// FuzzRequest: any body either fails to decode (with ErrInvalidParams or ErrInvalidKey) or decodes to a
// message that re-encodes to exactly the same bytes (the encoding is canonical).
func FuzzRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, op byte, body []byte) {
		m, err := DecodeRequest(Op(op), body)
		if err != nil {
			if !isInvalid(err) {
				t.Fatalf("error not marked invalid params: %v", err)
			}
			return
		}
		if out := marshal(m); !bytes.Equal(out, body) {
			t.Fatalf("%s request does not round-trip:\n in %x\nout %x", Op(op), body, out)
		}
	})
}

// FuzzResponse: as FuzzRequest, for OK response bodies.
func FuzzResponse(f *testing.F) {
	f.Fuzz(func(t *testing.T, op byte, body []byte) {
		m, err := DecodeResponse(Op(op), body, nil)
		if err != nil {
			if !isInvalid(err) {
				t.Fatalf("error not marked invalid params: %v", err)
			}
			return
		}
		if out := marshal(m); !bytes.Equal(out, body) {
			t.Fatalf("%s response does not round-trip:\n in %x\nout %x", Op(op), body, out)
		}
	})
}

// FuzzErrorBody: the body of error responses.
func FuzzErrorBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		var eb ErrorBody
		d := NewDecoder(body)
		eb.Decode(d)
		if d.Finish() != nil {
			return
		}
		var e Encoder
		eb.Encode(&e)
		if !bytes.Equal(e.B, body) {
			t.Fatalf("error body does not round-trip")
		}
	})
}

func isInvalid(err error) bool {
	return errors.Is(err, base.ErrInvalidParams) || errors.Is(err, base.ErrInvalidKey)
}

// seeds returns the seed corpus of every fuzzer: file name -> values.
func seeds() map[string]map[string][]any {
	s := map[string]map[string][]any{
		"FuzzHeader": {}, "FuzzClientHello": {}, "FuzzServerHello": {},
		"FuzzRequest": {}, "FuzzResponse": {}, "FuzzErrorBody": {},
	}
	for i, m := range sampleRequests() {
		s["FuzzRequest"][fmt.Sprintf("%02d-%s", i, m.Op())] = []any{byte(m.Op()), marshal(m)}
		var h [HeaderLen]byte
		PutHeader(h[:], &Header{Op: m.Op(), BodyLen: uint32(len(marshal(m))), RequestID: uint64(i)})
		s["FuzzHeader"][fmt.Sprintf("req-%02d-%s", i, m.Op())] = []any{h[:]}
	}
	for j, m := range sampleRequests() {
		for i, old := range earlierRevisions(m) {
			name := "earlier-" + m.Op().String()
			if i > 0 {
				name += fmt.Sprintf("-%d", i+1)
			}
			if _, dup := s["FuzzRequest"][name]; dup {
				name += fmt.Sprintf("-s%02d", j) // a second sample of the op with earlier revisions
			}
			s["FuzzRequest"][name] = []any{byte(old.Op()), marshal(old)}
		}
	}
	for i, m := range sampleResponses() {
		s["FuzzResponse"][fmt.Sprintf("%02d-%s", i, m.Op())] = []any{byte(m.Op()), marshal(m)}
	}
	var h [HeaderLen]byte
	PutHeader(h[:], &Header{Op: OpWrite, Flags: FlagChecksum, BodyLen: 40, RequestID: 9, PayloadLen: 1 << 20, PayloadChecksum: 77})
	s["FuzzHeader"]["write-payload"] = []any{h[:]}
	PutHeader(h[:], &Header{Op: OpRead, Flags: FlagResponse, BodyLen: 25, RequestID: 9, PayloadLen: 4096})
	s["FuzzHeader"]["read-response"] = []any{h[:]}
	PutHeader(h[:], &Header{Op: OpLookup, Flags: FlagResponse | FlagError, Status: base.CodeNotLeader, BodyLen: 30, RequestID: 3})
	s["FuzzHeader"]["error-response"] = []any{h[:]}
	s["FuzzClientHello"]["ok"] = []any{AppendClientHello(nil, ProtocolVersion, base.DefaultClusterID)}
	s["FuzzClientHello"]["empty-cluster"] = []any{AppendClientHello(nil, 7, "")}
	s["FuzzServerHello"]["ok"] = []any{AppendServerHello(nil, ProtocolVersion, base.CodeOK, "")}
	s["FuzzServerHello"]["refused"] = []any{AppendServerHello(nil, ProtocolVersion, base.CodeClusterMismatch, "cluster id mismatch")}
	var e Encoder
	(&ErrorBody{Msg: "not leader", LeaderID: "m2", LeaderAddr: "10.0.0.2:50051"}).Encode(&e)
	s["FuzzErrorBody"]["not-leader"] = []any{e.B}
	return s
}

func corpusFile(vals []any) string {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range vals {
		switch v := v.(type) {
		case byte:
			fmt.Fprintf(&b, "byte(%d)\n", v)
		case []byte:
			fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
		}
	}
	return b.String()
}

// TestSeedCorpus checks that testdata/fuzz holds the seed corpus generated from the sample
// messages (so the fuzzers' seeds, which run in the normal suite, cover every op).
func TestSeedCorpus(t *testing.T) {
	for fuzzer, files := range seeds() {
		dir := filepath.Join("testdata", "fuzz", fuzzer)
		for name, vals := range files {
			want := corpusFile(vals)
			path := filepath.Join(dir, name)
			if *updateCorpus {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != want {
				t.Errorf("%s is missing or stale; run with -update-corpus (%v)", path, err)
			}
		}
	}
}
