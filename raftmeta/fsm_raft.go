package raftmeta

import (
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/mooncake-go/mooncake/internal/base"
)

// The FSM as raft sees it (raft.FSM, raft.BatchingFSM): committed entries in, snapshots out
// and back. Raft calls Apply, Snapshot and Restore on its FSM goroutine, one at a time;
// Persist streams a snapshot's clone on another while applies go on. The state is fsm.go's.

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch implements raft.BatchingFSM: one write lock for the whole batch.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = f.applyLocked(l.Index, l.Data)
		}
		f.advanceLocked(l.Index)
	}
	return out
}

// applyLocked decodes and applies one entry. REQUIRES: f.mu held for writing.
func (f *fsm) applyLocked(index uint64, data []byte) Result {
	cmd, err := DecodeCommand(data)
	if err != nil {
		// Every node decodes the same bytes the same way, so every node skips this entry
		// alike. It means a bug or a proposer newer than this build.
		return Result{Index: index, Err: fmt.Errorf("raftmeta: entry %d: %w: %w", index, base.ErrInternal, err)}
	}
	f.st.evKeep = f.keepEvents
	res := f.st.apply(cmd)
	res.Index = index
	if b, ok := f.st.takeEvents(index); ok && f.keepEvents {
		f.addEventsLocked(b)
	}
	return res
}

// Snapshot implements raft.FSM. It runs on raft's FSM goroutine (no apply runs meanwhile) and
// clones the state; Persist streams the clone while apply goes on.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &fsmSnapshot{st: f.st.clone(), applied: f.applied}, nil
}

// Restore implements raft.FSM: the stream replaces the whole state.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, applied, err := readSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
	// The retained KV event batches describe the state being replaced.
	f.events.buf = nil
	if applied < f.applied {
		// A restore moves the state back (a follower receiving an older leader's snapshot
		// cannot happen, but an operator restore can); waiters keyed on indexes must not be
		// told an index is applied that the new state lacks.
		f.applied = applied
	}
	f.advanceLocked(applied)
	return nil
}

type fsmSnapshot struct {
	st      *state
	applied uint64
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := writeSnapshot(sink, s.st, s.applied); err != nil {
		sink.Cancel()
		return fmt.Errorf("raftmeta: write snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() { s.st = nil }
