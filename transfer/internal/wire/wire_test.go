package wire

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/mooncake-go/mooncake/internal/base"
)

func marshal(m Message) []byte {
	var e Encoder
	m.Encode(&e)
	return e.B
}

func TestMessagesRoundTrip(t *testing.T) {
	seen := map[Op]bool{}
	for _, m := range sampleRequests() {
		seen[m.Op()] = true
		body := marshal(m)
		got, err := DecodeRequest(m.Op(), body)
		if err != nil {
			t.Fatalf("%s request: %v", m.Op(), err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%s request: got %+v, want %+v", m.Op(), got, m)
		}
		// Every strict prefix is a truncated body and must be refused, except the bodies of
		// the message's earlier revisions (trailing optional fields left out), which decode
		// to the message without them.
		oldLens := map[int]bool{}
		for _, old := range earlierRevisions(m) {
			oldLen := len(marshal(old))
			oldLens[oldLen] = true
			got, err := DecodeRequest(m.Op(), body[:oldLen])
			if err != nil || !reflect.DeepEqual(got, old) {
				t.Fatalf("%s request of an earlier revision: got %+v, %v; want %+v", m.Op(), got, err, old)
			}
		}
		for i := 0; i < len(body); i++ {
			if oldLens[i] {
				continue
			}
			if _, err := DecodeRequest(m.Op(), body[:i]); !errors.Is(err, base.ErrInvalidParams) {
				t.Fatalf("%s request truncated at %d/%d: %v", m.Op(), i, len(body), err)
			}
		}
		if _, err := DecodeRequest(m.Op(), append(body, 0)); !errors.Is(err, base.ErrInvalidParams) {
			t.Fatalf("%s request with a trailing byte: %v", m.Op(), err)
		}
	}
	for op := range 256 {
		if Op(op).Known() && !seen[Op(op)] {
			t.Errorf("no sample request for %s", Op(op))
		}
	}
	for _, m := range sampleResponses() {
		body := marshal(m)
		got, err := DecodeResponse(m.Op(), body, nil)
		if err != nil {
			t.Fatalf("%s response: %v", m.Op(), err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%s response: got %+v, want %+v", m.Op(), got, m)
		}
		oldLens := map[int]bool{}
		for _, old := range earlierRevisions(m) {
			oldLen := len(marshal(old))
			oldLens[oldLen] = true
			got, err := DecodeResponse(m.Op(), body[:oldLen], nil)
			if err != nil || !reflect.DeepEqual(got, old) {
				t.Fatalf("%s response of an earlier revision: got %+v, %v; want %+v", m.Op(), got, err, old)
			}
		}
		for i := 0; i < len(body); i++ {
			if oldLens[i] {
				continue
			}
			if _, err := DecodeResponse(m.Op(), body[:i], nil); !errors.Is(err, base.ErrInvalidParams) {
				t.Fatalf("%s response truncated at %d/%d: %v", m.Op(), i, len(body), err)
			}
		}
	}
	for op := range 256 {
		if Op(op).Known() && NewResponse(Op(op)) == nil {
			t.Errorf("no response type for %s", Op(op))
		}
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	h := Header{Op: OpWrite, Flags: FlagChecksum, BodyLen: 100, RequestID: math.MaxUint64, PayloadLen: 1 << 30, PayloadChecksum: 7}
	var b [HeaderLen]byte
	PutHeader(b[:], &h)
	var got Header
	if err := DecodeHeader(b[:], Limits{}, &got); err != nil || got != h {
		t.Fatalf("got %+v %v", got, err)
	}
	resp := Header{Op: OpRead, Flags: FlagResponse | FlagChecksum, RequestID: 1, PayloadLen: 10, PayloadChecksum: 3}
	PutHeader(b[:], &resp)
	if err := DecodeHeader(b[:], Limits{}, &got); err != nil || got != resp {
		t.Fatalf("got %+v %v", got, err)
	}
}

func TestHeaderRejects(t *testing.T) {
	lim := Limits{MaxBodyLen: 1000, MaxPayloadLen: 1 << 20}
	f := func(h Header, want string) {
		t.Helper()
		var b [HeaderLen]byte
		PutHeader(b[:], &h)
		var got Header
		err := DecodeHeader(b[:], lim, &got)
		if !errors.Is(err, base.ErrInvalidParams) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%+v: got %v, want %q", h, err, want)
		}
	}
	f(Header{Op: 0}, "unknown opcode")
	f(Header{Op: 200}, "unknown opcode")
	f(Header{Op: OpPing, Flags: 0x80}, "unknown flags")
	f(Header{Op: OpPing, Flags: FlagError}, "error flag on a request")
	f(Header{Op: OpPing, Flags: FlagResponse, Status: 4}, "without the error flag")
	f(Header{Op: OpPing, Flags: FlagResponse | FlagError}, "status OK")
	f(Header{Op: OpLookup, BodyLen: 1001}, "body of 1001 bytes")
	f(Header{Op: OpWrite, PayloadLen: 1<<20 + 1}, "payload of")
	f(Header{Op: OpWrite, PayloadLen: math.MaxUint64}, "payload of")
	f(Header{Op: OpLookup, PayloadLen: 1}, "cannot carry a payload")
	f(Header{Op: OpWrite, Flags: FlagResponse, PayloadLen: 1}, "cannot carry a payload")
	f(Header{Op: OpRead, PayloadLen: 1}, "cannot carry a payload")
	f(Header{Op: OpRead, Flags: FlagResponse | FlagError, Status: 4, PayloadLen: 1}, "cannot carry a payload")
	f(Header{Op: OpPing, PayloadChecksum: 1}, "checksum without a payload")
	var got Header
	if err := DecodeHeader(make([]byte, 5), lim, &got); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatal(err)
	}
}

func TestHello(t *testing.T) {
	b := AppendClientHello(nil, ProtocolVersion, "cluster-a")
	h, err := ReadClientHello(bytes.NewReader(b))
	if err != nil || h.Version != ProtocolVersion || h.ClusterID != "cluster-a" {
		t.Fatalf("%+v %v", h, err)
	}
	for i := range b {
		if _, err := ReadClientHello(bytes.NewReader(b[:i])); err == nil {
			t.Fatalf("truncated hello at %d accepted", i)
		}
	}
	bad := append([]byte(nil), b...)
	bad[0] = 'X'
	if _, err := ReadClientHello(bytes.NewReader(bad)); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatal(err)
	}
	long := AppendClientHello(nil, 1, strings.Repeat("x", 300))
	if _, err := ReadClientHello(bytes.NewReader(long)); !errors.Is(err, base.ErrTooLarge) {
		t.Fatal(err)
	}
	sb := AppendServerHello(nil, ProtocolVersion, base.CodeClusterMismatch, "no")
	sh, err := ReadServerHello(bytes.NewReader(sb))
	if err != nil || sh.Status != base.CodeClusterMismatch || sh.Msg != "no" {
		t.Fatalf("%+v %v", sh, err)
	}
}

func TestKeyBounds(t *testing.T) {
	f := func(key string, wantErr error) {
		t.Helper()
		body := marshal(&LookupRequest{Key: key})
		_, err := DecodeRequest(OpLookup, body)
		if wantErr == nil && err != nil || wantErr != nil && !errors.Is(err, wantErr) {
			t.Fatalf("key of %d bytes: %v, want %v", len(key), err, wantErr)
		}
	}
	f("k", nil)
	f(strings.Repeat("k", base.MaxKeyLen), nil)
	f(strings.Repeat("k", base.MaxKeyLen+1), base.ErrInvalidKey)
	f("", base.ErrInvalidKey)
}

// TestHugeDeclaredLengthsDoNotAllocate: a body that declares 4 billion items or a 4 GiB
// string is refused before anything of that size is allocated.
func TestHugeDeclaredLengthsDoNotAllocate(t *testing.T) {
	cases := map[Op][]byte{
		OpBatchLookup:    {0xff, 0xff, 0xff, 0xff, 1, 2, 3},
		OpRegisterWorker: append(marshal(&HeartbeatRequest{WorkerID: "w"})[:5], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f),
		OpRemoveByRegex:  {0xff, 0xff, 0xff, 0xff},
		OpLookup:         {0xff, 0xff, 0xff, 0xff},
	}
	for op, body := range cases {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := DecodeRequest(op, body); err == nil {
				t.Fatalf("%s: huge declared length accepted", op)
			}
		})
		runtime.ReadMemStats(&after)
		if perRun := (after.TotalAlloc - before.TotalAlloc) / 101; perRun > 4096 {
			t.Fatalf("%s: %d bytes allocated per refused decode (%v allocs)", op, perRun, allocs)
		}
	}
	// A status body may be large but never larger than what was received.
	var e Encoder
	e.U32(math.MaxUint32)
	if _, err := DecodeResponse(OpStatus, e.B, nil); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatal(err)
	}
}

func TestDecoderRejectsBadValues(t *testing.T) {
	// Bool bytes other than 0/1, negative sizes and durations, unknown persistence.
	lr := marshal(&LookupRequest{Key: "k", AllowStale: true})
	lr[len(lr)-1] = 2
	if _, err := DecodeRequest(OpLookup, lr); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatal(err)
	}
	ps := marshal(&PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "k", Size: -1}}})
	if _, err := DecodeRequest(OpPutStart, ps); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatal(err)
	}
	ps = marshal(&PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "k"}},
		Config: base.PutConfig{SoftPinTTL: -5}})
	if _, err := DecodeRequest(OpPutStart, ps); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatal(err)
	}
	ps = marshal(&PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "k"}},
		Config: base.PutConfig{Persistence: 9}})
	if _, err := DecodeRequest(OpPutStart, ps); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatal(err)
	}
	// A Read op with a range is refused; ReadRange with Length 0 means "to the end".
	rr := marshal(&ReadRequest{Key: "k", Offset: 5})
	if _, err := DecodeRequest(OpRead, rr); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatal(err)
	}
	if _, err := DecodeRequest(OpReadRange, rr); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeRequest(Op(99), nil); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatal(err)
	}
	// RegisterWorker's paging fields with session 0 (0 means "unpaged": the fields must be
	// left out, or the encoding would not be canonical).
	rw := marshal(&RegisterWorkerRequest{WorkerID: "w", Session: 1, Page: 1})
	for i := len(rw) - 13; i < len(rw)-5; i++ {
		rw[i] = 0
	}
	if _, err := DecodeRequest(OpRegisterWorker, rw); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("session 0 on the wire: %v", err)
	}
	// Heartbeat's ask_client_ttl 0 and its reply's client_ttl 0: likewise left out, never 0.
	hb := marshal(&HeartbeatRequest{WorkerID: "w", HasNVMeObjects: true, HasLeaving: true, HasStats: true, AskClientTTL: true})
	hb[len(hb)-1] = 0
	if _, err := DecodeRequest(OpHeartbeat, hb); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("ask_client_ttl 0 on the wire: %v", err)
	}
	hr := marshal(&HeartbeatResponse{ClientTTL: 1})
	hr[len(hr)-8] = 0
	if _, err := DecodeResponse(OpHeartbeat, hr, nil); !errors.Is(err, base.ErrInvalidParams) {
		t.Fatalf("client_ttl 0 on the wire: %v", err)
	}
}
