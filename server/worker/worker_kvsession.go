package worker

import (
	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// kvSessionPins answers the leader's KVSessionPins (issue 21 item 2): each listed version is
// marked (or unmarked) as a member of a pinned KV session, which eviction keeps with the soft
// pins (tier/kvpin.go). One item per key: OK, OBJECT_NOT_FOUND, INVALID_VERSION.
func (w *Worker) kvSessionPins(req *transfer.KVSessionPinsRequest) *transfer.BatchResponse {
	items := make([]transfer.ItemError, len(req.Items))
	for i, it := range req.Items {
		err := base.ValidateKey(it.Key)
		if err == nil {
			err = w.eng.SetSessionPin(it.Key, it.Version, req.Pinned)
		}
		items[i] = transfer.ItemErrorOf(err)
	}
	return transfer.NewBatchResponse(transfer.OpKVSessionPins, items)
}
