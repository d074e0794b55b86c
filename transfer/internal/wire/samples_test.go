package wire

import (
	"reflect"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
)

// sampleRequests and sampleResponses hold one filled message of every call; they drive the
// round-trip tests and seed the fuzzers.
func sampleRequests() []Message {
	cfg := base.PutConfig{Replicas: 2, PreferredWorker: "w-1", SoftPinTTL: time.Minute, HardPin: true,
		Persistence: base.PersistenceDurable, Upsert: true}
	ps := PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "model/layer0/kv", Size: 1 << 20}},
		Config: cfg}
	pe := PutEndRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "model/layer0/kv", Version: 77,
		Size: 1 << 20, Checksum: 0xdeadbeef},
		Replicas: []base.WorkerID{"w-1", "w-2"}}, Config: cfg}
	petok := pe
	petok.Tokens, petok.Model = 256, "qwen2-7b"
	return []Message{
		NewEmpty(OpPing),
		&ps,
		&pe,
		&PutRevokeRequest{Key: "k", Version: 9},
		&BatchPutRevokeRequest{Items: []base.KeyVersion{{Key: "a", Version: 1}, {Key: "b", Version: 2}}},
		&LookupRequest{Key: "k", AllowStale: true},
		&ExistsRequest{Key: "k"},
		&RemoveRequest{Key: "k"},
		&RemoveByRegexRequest{Pattern: "^model/.*$"},
		NewEmpty(OpRemoveAll),
		&BatchPutStartRequest{Items: []PutStartRequest{ps, {Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "x",
			Size: 3}}}}},
		&BatchPutEndRequest{Items: []PutEndRequest{pe}},
		&BatchLookupRequest{Keys: []string{"a", "b\x00c"}, AllowStale: true},
		&BatchExistsRequest{Keys: []string{"a"}},
		&BatchRemoveRequest{Keys: []string{"a", "b"}},
		&ListRequest{Prefix: "model/", Cursor: "model/a", Limit: 100},
		&RegisterWorkerRequest{WorkerID: "w-1", Address: "10.0.0.1:12345", DRAMCapacity: 4 << 30, NVMeCapacity: 1 << 40,
			Inventory: []base.ObjectMeta{{Key: "a", Version: 1, Size: 10, Checksum: 5}, {Key: "b", Version: 2, Size: 0, Checksum: 0}},
			Session:   0x5eed_0000_0000_0001, Page: 2, More: true},
		&HeartbeatRequest{WorkerID: "w-1", DRAMUsed: 100, NVMeUsed: 200, DRAMObjects: 3, NVMeObjects: 4, HasNVMeObjects: true,
			Leaving: true, HasLeaving: true},
		NewEmpty(OpStatus),
		&WriteRequest{Key: "k", Version: 3, TotalSize: 100, Offset: 50, Persistence: base.PersistenceSpill,
			SoftPinTTL: time.Second, HardPin: false, Checksum: 42, Commit: true},
		&CommitRequest{Key: "k", Version: 3, Checksum: 42},
		&ReadRequest{Key: "k", Version: 3},
		&ReadRequest{Key: "k", Version: 3, Offset: 10, Length: 20},
		&DropRequest{Key: "k", Version: 3},
		&RegisterMasterRequest{MasterID: "m2", RPCAddr: "10.0.0.2:50051"},
		NewEmpty(OpShmOpen),
		&ShmPinRequest{Key: "k", Version: 3},
		&ShmPinRequest{Key: "k", Version: 3, Offset: 4096, Length: 100},
		&ShmReleaseRequest{Leases: []uint64{1, 1 << 63}},
		&AddMasterRequest{MasterID: "m4", RaftAddr: "10.0.0.4:7001", RPCAddr: "10.0.0.4:50051"},
		&RemoveMasterRequest{MasterID: "m3"},
		// The last page of a paged registration (More false).
		&RegisterWorkerRequest{WorkerID: "w-1", Address: "10.0.0.1:12345", DRAMCapacity: 4 << 30,
			Inventory: []base.ObjectMeta{{Key: "c", Version: 3, Size: 1, Checksum: 1}}, Session: 1 << 63, Page: 3},
		// Memory and models (models.go): puts carrying tokens, the model calls.
		&petok,
		&BatchPutEndRequest{Items: []PutEndRequest{pe, petok}},
		&ModelAddRequest{Name: "qwen2-7b", BytesPerToken: 57344, Description: "4 x 128 x 2 x 2 x 28"},
		&ModelRemoveRequest{Name: "qwen2-7b"},
		NewEmpty(OpMemory),
		NewEmpty(OpWorkerMemory),
		// Lifecycle calls (60-69).
		&ReplicateRequest{Key: "k", Version: 5, To: "w-2", ToAddr: "10.0.0.2:12345", Persistence: base.PersistenceDurable},
		&DrainWorkerRequest{WorkerID: "w-1", Cancel: true},
		&RetireWorkerRequest{WorkerID: "w-3"},
		// Trailing fields of issue 13's per-model tallies and issue 12's worker counters.
		&WriteRequest{Key: "k", Version: 4, TotalSize: 57344, Checksum: 43, Commit: true, Model: "qwen2-7b"},
		&HeartbeatRequest{WorkerID: "w-2", DRAMUsed: 1 << 20, DRAMObjects: 2, HasNVMeObjects: true, HasLeaving: true, HasStats: true, AskClientTTL: true,
			Stats: WorkerStats{HitsDRAM: 10, HitsNVMe: 3, Misses: 1, Evictions: 4, EvictedBytes: 4 << 20, EvictPasses: 2, NoSpace: 1,
				Spills: 3, SpillBytes: 3 << 20, Promotions: 1, Models: []ModelStats{
					{Model: "qwen2-7b", DRAMObjects: 2, DRAMBytes: 1 << 20, NVMeObjects: 3, NVMeBytes: 3<<20 + 4096},
					{Model: "", NVMeObjects: 1, NVMeBytes: 8192}}}},
		// Same-host puts (100-109).
		&ShmPutOpenRequest{BootID: "350a5823-aa02-4ead-8e24-88d308efba0e"},
		&ShmPutWriteRequest{Stage: 1 << 62, StageOffset: 4 << 20, Length: 1 << 20, Write: WriteRequest{Key: "k", Version: 3,
			TotalSize: 3 << 20, Offset: 2 << 20, Persistence: base.PersistenceDurable, SoftPinTTL: time.Minute, HardPin: true}},
		&ShmPutWriteRequest{Stage: 7, Length: 100, Write: WriteRequest{Key: "k", Version: 4, TotalSize: 100, Checksum: 43,
			Commit: true, Model: "qwen2-7b"}},
		&ShmPutCloseRequest{Stage: 7},
		// C library calls (90-99).
		&ShmTouchRequest{Items: []base.KeyVersion{{Key: "a", Version: 1}, {Key: "b", Version: 2}}},
		// Reads with the optional flags byte (a verifying client: sendfile allowed).
		&ReadRequest{Key: "k", Version: 3, Verifies: true},
		&ReadRequest{Key: "k", Version: 3, Offset: 10, Length: 20, Verifies: true},
		// Re-placed puts (messages_exclude.go): the workers an earlier attempt failed on.
		&PutStartRequest{Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "model/layer0/kv", Size: 1 << 20}},
			Config:  cfg,
			Exclude: []base.WorkerID{"w-1", "w-3"}},
		&BatchPutStartRequest{Items: []PutStartRequest{ps, {Object: base.Object{ObjectMeta: base.ObjectMeta{Key: "x",
			Size: 3}},
			Exclude: []base.WorkerID{"w-2"}}}},
		// Workers that leave or lose their connection (issue 18): lifecycle calls 63, 64.
		&LeaveWorkerRequest{WorkerID: "embedded-host-4242-0000beef"},
		&AttachWorkerRequest{WorkerID: "w-1"},
		// Prefetch on exist (110).
		&PrefetchRequest{Items: []base.KeyVersion{{Key: "a", Version: 1}, {Key: "b", Version: 0}}},
		// Copy and move tasks (messages_tasks.go): lifecycle calls 65, 66.
		&CreateTaskRequest{Type: base.TaskCopy, Key: "k", Targets: []string{"w-2", "10.0.0.3:12345"}},
		&CreateTaskRequest{Type: base.TaskMove, Key: "k", Source: "w-1", Targets: []string{"w-2"}},
		&QueryTaskRequest{ID: base.TaskID{Hi: 1 << 63, Lo: 42}},
		// Put sessions (120).
		&SessionCommitRequest{Key: "layerwise/block-7/rank-0", Version: 42},
		// CreateTask with the client's task id (a trailing optional field, messages_tasks.go).
		&CreateTaskRequest{Type: base.TaskCopy, Key: "k", Targets: []string{"w-2"}, ID: base.TaskID{Hi: 7, Lo: 1 << 63}},
		// KV sessions (140-145).
		&KVSessionRequest{Call: OpKVSessionPin, ID: "conv-a"},
		&KVSessionRequest{Call: OpKVSessionUnpin, ID: "conv-a"},
		&KVSessionRequest{Call: OpKVSessionUpdate, ID: "conv-a", Keys: []string{"block-1", "block-2"}},
		&KVSessionRequest{Call: OpKVSessionGet, ID: "conv-a"},
		&KVSessionListRequest{ID: "conv-a", Cursor: "block-1", Limit: 1024},
		&KVSessionRequest{Call: OpKVSessionAttach, ID: "conv-a", Keys: []string{"block-3"}},
		&KVSessionPinsRequest{Pinned: true, Items: []base.KeyVersion{{Key: "block-1", Version: 3}, {Key: "block-2"}}},
		// Tenants (130-132).
		&TenantRemoveRequest{Tenant: "team-a", Pattern: "^prefix/"},
		&TenantRemoveRequest{Tenant: "team-b", All: true},
		&TenantQuotaSetRequest{Quota: TenantQuota{Tenant: "team-a", DRAMBytes: 1 << 30, NVMeBytes: 4 << 30}},
		NewEmpty(OpTenantList),
		// Exists with placements (optional flags byte).
		&ExistsRequest{Key: "k", Placements: true},
		&BatchExistsRequest{Keys: []string{"a", "b"}, AllowStale: true, Placements: true},
		// A read from a kept lookup (flags bit 1).
		&ReadRequest{Key: "k", Version: 3, Verifies: true, Cached: true},
		&ReadRequest{Key: "k", Version: 3, Offset: 10, Length: 20, Cached: true},
		// A heartbeat that asks whether the leader owes the worker anything (fifth trailing).
		&HeartbeatRequest{WorkerID: "w-3", DRAMUsed: 4096, DRAMObjects: 1, HasNVMeObjects: true, HasLeaving: true, HasStats: true,
			AskClientTTL: true, AskSettled: true, Stats: WorkerStats{HitsDRAM: 1}},
	}
}

func sampleResponses() []Message {
	reps := []base.Placement{{WorkerID: "w-1", Address: "10.0.0.1:1"}, {WorkerID: "w-2", Address: "[::1]:2"}}
	psr := PutStartResponse{Version: 5, Replicas: reps}
	lr := LookupResponse{ObjectMeta: base.ObjectMeta{Version: 5, Size: 1 << 20, Checksum: 99}, Replicas: reps}
	rr := NewReadResponse(OpRead)
	rr.Version, rr.Size, rr.Checksum, rr.Tier = 5, 100, 7, base.TierNVMe
	return []Message{
		NewEmpty(OpPing),
		&psr,
		NewEmpty(OpPutEnd),
		&lr,
		&ExistsResponse{Exists: true},
		NewCountResponse(OpRemoveByRegex, 12),
		NewCountResponse(OpRemoveAll, 0),
		&BatchPutStartResponse{Items: []PutStartResult{{PutStartResponse: psr}, {Err: ItemError{Code: base.CodeObjectAlreadyExists, Msg: "dup"}}}},
		NewBatchResponse(OpBatchPutEnd, []ItemError{{}, {Code: base.CodeNoAvailableHandle, Msg: "full"}}),
		&BatchLookupResponse{Items: []LookupResult{{LookupResponse: lr}, {Err: ItemError{Code: base.CodeObjectNotFound}}}},
		&BatchExistsResponse{Exists: []bool{true, false, true}},
		NewBatchResponse(OpBatchRemove, []ItemError{{}}),
		&ListResponse{Items: []ListItem{{Key: "a", Size: 1}, {Key: "b", Size: 2}}, NextCursor: "b"},
		&RegisterWorkerResponse{Drop: []base.KeyVersion{{Key: "old", Version: 1}}, HeartbeatInterval: time.Second},
		&HeartbeatResponse{Drop: []base.KeyVersion{{Key: "gone", Version: 0}}, Reregister: true, ClientTTL: 3 * time.Second},
		&StatusResponse{JSON: []byte(`{"keys":3}`)},
		rr,
		&ShmOpenResponse{BootID: "350a5823-aa02-4ead-8e24-88d308efba0e", PID: 4242, FD: 7, Inode: 1234, Dev: 5,
			Size: 1 << 30, ArenaID: 0xfeedface, LeaseTTL: 30 * time.Second, GenFD: 8, GenInode: 1235, GenDev: 5, GenSize: 32 << 10},
		&ShmPinResponse{Lease: 9, ArenaID: 0xfeedface, ArenaOffset: 2 << 20, Length: 1 << 20, Version: 5,
			Size: 1 << 20, Checksum: 77, Tier: base.TierDRAM},
		NewCountResponse(OpShmRelease, 1),
		NewEmpty(OpAddMaster),
		NewEmpty(OpRemoveMaster),
		NewEmpty(OpModelAdd),
		NewEmpty(OpModelRemove),
		&JSONResponse{Call: OpMemory, JSON: []byte(`{"verdict":"expected"}`)},
		&JSONResponse{Call: OpWorkerMemory, JSON: []byte(`{"arena_capacity_bytes":1}`)},
		NewEmpty(OpReplicate),
		NewEmpty(OpDrainWorker),
		NewEmpty(OpRetireWorker),
		&ShmPutOpenResponse{BootID: "350a5823-aa02-4ead-8e24-88d308efba0e", PID: 4242, FD: 9, Inode: 99, Dev: 5,
			Size: 64 << 20, Stage: 1 << 62},
		NewEmpty(OpShmPutWrite),
		NewEmpty(OpShmPutClose),
		NewBatchResponse(OpShmTouch, []ItemError{{}, {Code: base.CodeObjectNotFound, Msg: "gone"}}),
		NewEmpty(OpLeaveWorker),
		NewEmpty(OpAttachWorker),
		NewBatchResponse(OpPrefetch, []ItemError{{}, {Code: base.CodeNoAvailableHandle, Msg: "prefetch budget spent"}}),
		&CreateTaskResponse{ID: base.TaskID{Hi: 0x0123456789abcdef, Lo: 1}},
		&QueryTaskResponse{Type: base.TaskMove, Status: base.TaskFailed, Key: "k", CreatedMs: 1_790_000_000_000,
			UpdatedMs: 1_790_000_000_250, AssignedClient: "w-1", Message: "copy to w-2: no space"},
		&SessionCommitResponse{Checksum: 0x0123456789abcdef, Size: 28 << 20},
		NewEmpty(OpKVSessionPin),
		NewEmpty(OpKVSessionUnpin),
		NewEmpty(OpKVSessionUpdate),
		&KVSessionInfoResponse{ID: "conv-a", Pinned: true, MemberCount: 3},
		&KVSessionPageResponse{Keys: []string{"block-2", "block-3"}, NextCursor: "block-3"},
		NewBatchResponse(OpKVSessionAttach, []ItemError{{}, {Code: base.CodeObjectNotFound, Msg: "absent"}}),
		NewBatchResponse(OpKVSessionPins, []ItemError{{}, {Code: base.CodeInvalidVersion, Msg: "at version 4"}}),
		NewCountResponse(OpTenantRemove, 3),
		NewEmpty(OpTenantQuotaSet),
		&TenantListResponse{DRAMCapacity: 64 << 30, Items: []TenantQuota{{Tenant: "default", Objects: 2, Bytes: 100},
			{Tenant: "team-a", DRAMBytes: 1 << 30, NVMeBytes: 4 << 30, Objects: 1, Bytes: 64}}},
		&TenantListResponse{DRAMCapacity: 64 << 30, Items: []TenantQuota{{Tenant: "team-a", NVMeBytes: 4 << 30}},
			NVMeCapacity: 1 << 40},
		// Exists with placements (trailing).
		&ExistsResponse{Exists: true, Lookup: &lr},
		&BatchExistsResponse{Exists: []bool{true, false}, Lookups: []LookupResult{{LookupResponse: lr},
			{Err: ItemError{Code: base.CodeObjectNotFound}}}},
		// The leader owes the worker nothing more (the answer to AskSettled).
		&HeartbeatResponse{Drop: []base.KeyVersion{{Key: "last", Version: 9}}, ClientTTL: 10 * time.Second, Settled: true},
	}
}

// earlierRevisions returns m as each earlier sender encodes it, newest first: each drops one
// more of m's trailing optional fields (see HeartbeatRequest). Empty when m's op has none.
func earlierRevisions(m Message) []Message {
	switch p := m.(type) {
	case *PutStartRequest:
		if len(p.Exclude) == 0 {
			return nil
		}
		old := *p
		old.Exclude = nil
		return []Message{&old}
	case *BatchPutStartRequest:
		old := &BatchPutStartRequest{}
		for _, it := range p.Items {
			it.Exclude = nil
			old.Items = append(old.Items, it)
		}
		if reflect.DeepEqual(old, p) {
			return nil
		}
		return []Message{old}
	case *PutEndRequest:
		if p.Tokens == 0 && p.Model == "" {
			return nil
		}
		old := *p
		old.Tokens, old.Model = 0, ""
		return []Message{&old}
	case *ReadRequest:
		if !p.Verifies && !p.Cached {
			return nil
		}
		old := *p
		old.Verifies, old.Cached = false, false
		return []Message{&old}
	case *ExistsRequest:
		if !p.Placements {
			return nil
		}
		old := *p
		old.Placements = false
		return []Message{&old}
	case *BatchExistsRequest:
		if !p.Placements {
			return nil
		}
		old := *p
		old.Placements = false
		return []Message{&old}
	case *ExistsResponse:
		if p.Lookup == nil {
			return nil
		}
		old := *p
		old.Lookup = nil
		return []Message{&old}
	case *BatchExistsResponse:
		if p.Lookups == nil {
			return nil
		}
		old := *p
		old.Lookups = nil
		return []Message{&old}
	case *TenantListResponse:
		if p.NVMeCapacity == 0 {
			return nil
		}
		old := *p
		old.NVMeCapacity = 0
		return []Message{&old}
	case *CreateTaskRequest:
		if p.ID == (base.TaskID{}) {
			return nil
		}
		old := *p
		old.ID = base.TaskID{}
		return []Message{&old}
	case *WriteRequest:
		if p.Model == "" {
			return nil
		}
		old := *p
		old.Model = ""
		return []Message{&old}
	case *ShmOpenResponse:
		if p.GenSize == 0 {
			return nil
		}
		old := *p
		old.GenFD, old.GenInode, old.GenDev, old.GenSize = 0, 0, 0, 0
		return []Message{&old}
	case *ShmPutWriteRequest:
		// Not an earlier revision: the embedded Write's model is optional from the start.
		if p.Write.Model == "" {
			return nil
		}
		old := *p
		old.Write.Model = ""
		return []Message{&old}
	case *BatchPutEndRequest:
		old := &BatchPutEndRequest{}
		for _, it := range p.Items {
			it.Tokens, it.Model = 0, ""
			old.Items = append(old.Items, it)
		}
		if reflect.DeepEqual(old, p) {
			return nil
		}
		return []Message{old}
	}
	if rw, ok := m.(*RegisterWorkerRequest); ok {
		if rw.Session == 0 {
			return nil
		}
		old := *rw
		old.Session, old.Page, old.More = 0, 0, false
		return []Message{&old}
	}
	if hr, ok := m.(*HeartbeatResponse); ok {
		var out []Message
		if hr.Settled {
			old := *hr
			old.Settled = false
			out = append(out, &old)
		}
		if hr.ClientTTL != 0 {
			old := *hr
			old.ClientTTL, old.Settled = 0, false
			out = append(out, &old)
		}
		return out
	}
	hb, ok := m.(*HeartbeatRequest)
	if !ok {
		return nil
	}
	var out []Message
	if hb.AskSettled {
		old := *hb
		old.AskSettled = false
		out = append(out, &old)
	}
	if hb.AskClientTTL {
		old := *hb
		old.AskClientTTL, old.AskSettled = false, false
		out = append(out, &old)
	}
	if hb.HasStats {
		old := *hb
		old.AskClientTTL, old.AskSettled = false, false
		old.Stats, old.HasStats = WorkerStats{}, false
		out = append(out, &old)
	}
	if hb.HasLeaving {
		old := *hb
		old.AskClientTTL, old.AskSettled = false, false
		old.Stats, old.HasStats = WorkerStats{}, false
		old.Leaving, old.HasLeaving = false, false
		out = append(out, &old)
	}
	if hb.HasNVMeObjects {
		old := *hb
		old.AskClientTTL, old.AskSettled = false, false
		old.Stats, old.HasStats = WorkerStats{}, false
		old.Leaving, old.HasLeaving = false, false
		old.NVMeObjects, old.HasNVMeObjects = 0, false
		out = append(out, &old)
	}
	return out
}
