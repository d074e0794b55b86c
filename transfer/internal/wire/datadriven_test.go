package wire

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestCodecDataDriven pins the byte-level encoding (testdata/codec) so that any change to the
// format shows up as a diff. Regenerate with
//
//	go test ./transfer/internal/wire -run TestCodecDataDriven -rewrite
//
// and only commit the changes if you understand what caused them (and bumped
// ProtocolVersion if they are incompatible).
//
// Commands:
//
//	encode-request <Op> [range]  the hex body of the sample request of <Op>
//	encode-response <Op>         the hex body of the sample response of <Op>
//	decode-request op=<Op>       decode the hex input as a request body
//	decode-response op=<Op>      decode the hex input as a response body
//	decode-header                decode the hex input as a frame header
func TestCodecDataDriven(t *testing.T) {
	opByName := map[string]Op{}
	for i := range 256 {
		if op := Op(i); op.Known() {
			opByName[op.String()] = op
		}
	}
	find := func(msgs []Message, name string, rangeRead bool) Message {
		for _, m := range msgs {
			if m.Op().String() != name {
				continue
			}
			if r, ok := m.(*ReadRequest); ok && (r.Length > 0) != rangeRead {
				continue
			}
			return m
		}
		t.Fatalf("no sample for %s", name)
		return nil
	}
	datadriven.RunTest(t, "testdata/codec", func(t *testing.T, td *datadriven.TestData) string {
		opArg := func() Op {
			var name string
			td.ScanArgs(t, "op", &name)
			op, ok := opByName[name]
			if !ok {
				t.Fatalf("unknown op %q", name)
			}
			return op
		}
		switch td.Cmd {
		case "encode-request":
			// <Op>-<variant> picks the sample of <Op> whose trailing optional field is set.
			switch td.CmdArgs[0].Key {
			case "Heartbeat-stats":
				return dump(marshal(findLast(sampleRequests(), OpHeartbeat)))
			case "Write-model":
				return dump(marshal(findLast(sampleRequests(), OpWrite)))
			}
			return dump(marshal(find(sampleRequests(), td.CmdArgs[0].Key, td.HasArg("range"))))
		case "encode-response":
			return dump(marshal(find(sampleResponses(), td.CmdArgs[0].Key, false)))
		case "decode-request":
			m, err := DecodeRequest(opArg(), undump(t, td.Input))
			if err != nil {
				return "error: " + err.Error()
			}
			return fmt.Sprintf("%T %+v", m, m)
		case "decode-response":
			m, err := DecodeResponse(opArg(), undump(t, td.Input), nil)
			if err != nil {
				return "error: " + err.Error()
			}
			return fmt.Sprintf("%T %+v", m, m)
		case "decode-header":
			var h Header
			if err := DecodeHeader(undump(t, td.Input), Limits{MaxBodyLen: 1 << 20, MaxPayloadLen: 1 << 30}, &h); err != nil {
				return "error: " + err.Error()
			}
			return fmt.Sprintf("op=%s flags=%#x status=%s body_len=%d request_id=%d payload_len=%d payload_checksum=%#x",
				h.Op, h.Flags, h.Status, h.BodyLen, h.RequestID, h.PayloadLen, h.PayloadChecksum)
		}
		t.Fatalf("unknown command %q", td.Cmd)
		return ""
	})
}

// findLast returns the last sample of op (the one with the newest trailing fields).
func findLast(msgs []Message, op Op) Message {
	var last Message
	for _, m := range msgs {
		if m.Op() == op {
			last = m
		}
	}
	return last
}

// dump prints p as hex, 16 bytes a line, for testdata files.
func dump(p []byte) string {
	var b strings.Builder
	for i := 0; i < len(p); i += 16 {
		line := p[i:min(i+16, len(p))]
		for j, c := range line {
			if j > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%02x", c)
		}
		b.WriteByte('\n')
	}
	if len(p) == 0 {
		return "(empty)\n"
	}
	return b.String()
}

func undump(t *testing.T, s string) []byte {
	t.Helper()
	s = strings.Join(strings.Fields(s), "")
	if s == "(empty)" {
		return nil
	}
	p, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex: %v", err)
	}
	return p
}
