// Package wire is the byte-level codec of the mooncake-go transfer protocol: the connection
// handshake, the fixed 32-byte frame header, and the body of every message (docs/protocol.md
// describes the same bytes for implementers in other languages).
//
// # Frame format
//
// Every frame is a 32-byte little-endian header, then BodyLen bytes of message body, then
// PayloadLen bytes of bulk payload (object bytes; only Write requests and Read responses
// carry one):
//
//	| op (1B) | flags (1B) | status (2B) | body_len (4B) | request_id (8B) | payload_len (8B) | payload_checksum (8B) |
//
// # Ownership and bounds
//
// Decoders never trust a length: every length read from the wire is checked against its bound
// (Limits, base.MaxKeyLen, the bytes left in the body) before anything is allocated, so a peer
// that declares a huge length costs nothing. Decoded strings and byte slices are copies; the
// decoder's input may be reused by the caller once Decode returns.
//
// It owns no goroutines and no connections. It must never import any mooncake-go package but
// internal/base.
package wire
