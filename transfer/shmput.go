package transfer

// StagingArea is a shared-memory file that carries same-host puts from one client to a worker
// (ShmPutOpen, ShmPutWrite in docs/protocol.md). The worker creates it (NewStagingArea) and
// maps it read-only: it only copies out of it. The client maps it read-write (MapStagingArea),
// copies a value into a range of it, and asks the worker to copy that range into the object's
// arena range. So the arena stays read-only to every client, and a client can corrupt only
// its own staged bytes, which the worker's checksum of what it copied catches.
//
// Ownership: as SharedArena (the embedded mapping): the creator owns the first reference;
// every copy Acquires and Releases; Close drops the owner's, and the last Release unmaps (and,
// on the worker, closes the memfd).
type StagingArea struct {
	info ShmPutOpenResponse
	mapping
}

// Info returns the area's description: on the worker, what ShmPutOpen answers (BootID, PID,
// FD, Inode, Dev, Size; Stage is the caller's to fill); on a client, the answer it mapped.
func (s *StagingArea) Info() ShmPutOpenResponse { return s.info }

// Size returns the area's length in bytes.
func (s *StagingArea) Size() int64 { return s.info.Size }
