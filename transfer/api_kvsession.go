package transfer

import "github.com/mooncake-go/mooncake/transfer/internal/wire"

// KV sessions (issue 21 item 2; docs/protocol.md, "KV sessions").
type (
	KVSessionRequest      = wire.KVSessionRequest
	KVSessionListRequest  = wire.KVSessionListRequest
	KVSessionInfoResponse = wire.KVSessionInfoResponse
	KVSessionPageResponse = wire.KVSessionPageResponse
	KVSessionPinsRequest  = wire.KVSessionPinsRequest
)

const (
	OpKVSessionPin    = wire.OpKVSessionPin
	OpKVSessionUnpin  = wire.OpKVSessionUnpin
	OpKVSessionUpdate = wire.OpKVSessionUpdate
	OpKVSessionGet    = wire.OpKVSessionGet
	OpKVSessionList   = wire.OpKVSessionList
	OpKVSessionAttach = wire.OpKVSessionAttach
	OpKVSessionPins   = wire.OpKVSessionPins
	// MaxKVSessionKeys bounds the keys of one KVSessionRequest (an update's keep set).
	MaxKVSessionKeys = wire.MaxKVSessionKeys
)
