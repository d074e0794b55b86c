// Package mooncakestore has the API of Mooncake's Go binding of the same name
// (github.com/kvcache-ai/Mooncake/mooncake-store/go/mooncakestore), in pure Go over the client
// package: no cgo, no C library. A Go program written for Mooncake's binding runs against a
// mooncake-go cluster with only its import line changed:
//
//	import "github.com/mooncake-go/mooncake/client/mooncakestore"
//
//	s, _ := mooncakestore.New()
//	defer s.Close()
//	err := s.Setup("10.0.0.5", "P2PHANDSHAKE", 4<<30, 16<<20, "rdma", "", "10.0.0.1:50051")
//	err = s.Put("key", value, &mooncakestore.ReplicateConfig{ReplicaNum: 1})
//	n, err := s.Get("key", buf)
//
// Where it differs from Mooncake's binding:
//   - Setup's metadataServer, localBufferSize and deviceName have no effect (no metadata server,
//     no transfer engine); a protocol other than "tcp" runs over TCP. globalSegmentSize is not
//     contributed by this process: the DRAM of a cluster comes from its workers (run
//     `mooncake worker` or `mooncake_client` on the host). masterServerAddr may list several
//     masters ("a:50051,b:50051"); etcd:// discovery is not supported.
//   - RegisterBuffer records the region so that PutFrom, BatchPutFrom, GetInto and BatchGetInto
//     can check that every pointer they get lies inside a registered region, as Mooncake's
//     transfer engine requires; there is no RDMA registration. The memory must stay valid and
//     must not be moved by the Go runtime: allocate it outside the Go heap (mmap, C.malloc) or
//     keep the Go slice alive and pinned for as long as it is registered.
//   - The error values are Mooncake's; each wraps the cause, so errors.Is also matches the
//     client package's sentinels (base.ErrObjectNotFound, ...). Per-key batch results use
//     Mooncake's ErrorCode numbers (0 success, -704 OBJECT_NOT_FOUND, ...).
//   - Remove's force flag has no effect: there are no leases to break; a reader in flight
//     keeps its bytes until it finishes.
//   - NewWithType(MOONCAKE_CLIENT_DUMMY) and DummySetup are not supported (the Go client talks
//     to masters and workers directly).
//
// A Store is safe for concurrent use. It must not import server (design.md section 6).
package mooncakestore
