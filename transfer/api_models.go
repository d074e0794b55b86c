package transfer

import "github.com/mooncake-go/mooncake/transfer/internal/wire"

// Memory and model calls (issue 13; docs/protocol.md, "Memory and models").
type (
	ModelAddRequest    = wire.ModelAddRequest
	ModelRemoveRequest = wire.ModelRemoveRequest
	// JSONResponse carries the JSON of Memory (a master's memory report) and WorkerMemory (a
	// worker's memory breakdown).
	JSONResponse = wire.JSONResponse
)

const (
	OpModelAdd     = wire.OpModelAdd
	OpModelRemove  = wire.OpModelRemove
	OpMemory       = wire.OpMemory
	OpWorkerMemory = wire.OpWorkerMemory
	// MaxModelNameLen bounds a model name.
	MaxModelNameLen = wire.MaxModelNameLen
)
