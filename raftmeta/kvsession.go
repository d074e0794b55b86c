package raftmeta

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/mooncake-go/mooncake/internal/base"
)

// KV sessions: Mooncake's session-aware object membership and soft pin (issue 21, item 2;
// Mooncake's design page "Session-aware object membership and soft pin", its
// kv_session.{h,cpp} and master_service_kv_session.cpp).
//
// A session is an application's conversation id; its members are keys of stored objects. The
// registry holds, per session id, a pinned flag and the member keys, and per key the sessions
// it belongs to. Ids and keys are stored ones: a tenant's session id carries its prefix, as its
// keys do (base.TenantKVSessionID), so one registry holds every tenant's sessions apart. Its rules, each Mooncake's:
//  1. Attach adds keys to a session, creating it (unpinned) on its first member; attaching a
//     key that is not stored fails that key (OBJECT_NOT_FOUND) and creates nothing.
//  2. A session with no members does not exist: removing its last member (Detach, the object's
//     removal, eviction, RemoveAll) removes the session and its pin state.
//  3. Pin and Unpin need an existing session (ErrSessionNotFound); they never create one.
//  4. Upserting a member keeps its memberships (the key, not the version, is the member).
//
// Unlike Mooncake's (runtime-only, "excluded from snapshots and HA logs"), the registry is
// replicated: commands of type 27 and snapshot section 27, so it survives a leader change.
// The limits are constants, not Mooncake's MC_KV_SESSION_* environment variables: apply must
// decide the same on every master, whatever its environment.

// TypeKVSession is the command type of KV-session changes.
const TypeKVSession CommandType = 27

// KV-session limits: Mooncake's KvSessionLimits defaults.
const (
	// MaxKVSessions bounds the sessions of the cluster.
	MaxKVSessions = 100000
	// MaxKVSessionMembers bounds the members of one session (and the keep set of an update).
	MaxKVSessionMembers = 1000000
	// MaxKVSessionsPerObject bounds the sessions one object belongs to.
	MaxKVSessionsPerObject = 100000
	// MaxKVSessionBatch bounds the keys of one attach and the keys of one listed page.
	MaxKVSessionBatch = 4096
)

// KVSessionOp says what a KVSession command does.
type KVSessionOp uint8

const (
	// KVSessionAttach adds Keys to session ID (creating it). Per key: nil, or
	// base.ErrObjectNotFound (no visible object), or ErrSessionLimitExceeded.
	KVSessionAttach KVSessionOp = 1
	// KVSessionDetach removes Keys from session ID (keys that are not members are ignored; an
	// absent session is no error). A session left empty is removed.
	KVSessionDetach KVSessionOp = 2
	// KVSessionPin and KVSessionUnpin set the session's pinned flag; an absent session gives
	// base.ErrSessionNotFound.
	KVSessionPin   KVSessionOp = 3
	KVSessionUnpin KVSessionOp = 4
)

// KVSession is one change to the KV-session registry.
type KVSession struct {
	Op   KVSessionOp
	ID   string
	Keys []string // Attach and Detach: 1 to MaxKVSessionBatch keys; Pin/Unpin: none
}

func (KVSession) Type() CommandType { return TypeKVSession }

func (c KVSession) Validate() error {
	if err := base.ValidateStoredKVSessionID(c.ID); err != nil {
		return err
	}
	switch c.Op {
	case KVSessionAttach, KVSessionDetach:
		if len(c.Keys) == 0 || len(c.Keys) > MaxKVSessionBatch {
			return invalidf("KV session: %d keys, want 1 to %d", len(c.Keys), MaxKVSessionBatch)
		}
		for _, k := range c.Keys {
			if err := base.ValidateKey(k); err != nil {
				return err
			}
		}
	case KVSessionPin, KVSessionUnpin:
		if len(c.Keys) != 0 {
			return invalidf("KV session pin with %d keys", len(c.Keys))
		}
	default:
		return invalidf("KV session op %d", c.Op)
	}
	return nil
}

func (c KVSession) appendFields(b []byte) []byte {
	b = append(b, byte(c.Op))
	b = appendStr(b, c.ID)
	b = binary.AppendUvarint(b, uint64(len(c.Keys)))
	for _, k := range c.Keys {
		b = appendStr(b, k)
	}
	return b
}

// decodeKVSession decodes a KVSession's fields.
func decodeKVSession(d *decoder) Command {
	var c KVSession
	if len(d.b) == 0 {
		d.fail("truncated")
		return c
	}
	c.Op = KVSessionOp(d.b[0])
	d.b = d.b[1:]
	c.ID = d.str(base.MaxStoredKVSessionIDLen)
	n := d.count(MaxKVSessionBatch, 2)
	if n > 0 {
		c.Keys = make([]string, n)
		for i := range c.Keys {
			c.Keys[i] = d.str(base.MaxKeyLen)
		}
	}
	return c
}

// kvSess is one session.
//
// Invariant: members is non-empty and every member is a key in state.objects whose
// kvSessions.byKey entry lists this session once.
type kvSess struct {
	pinned  bool
	members map[string]struct{}
}

// kvSessions is the registry. Its zero value is ready (maps are made on first use).
//
// Invariant: byKey[k] lists session ids without duplicates, each a session whose members hold
// k; a key with no session has no entry.
type kvSessions struct {
	byID  map[string]*kvSess
	byKey map[string][]string
}

func (r *kvSessions) clone() kvSessions {
	c := kvSessions{}
	if r.byID == nil {
		return c
	}
	c.byID = make(map[string]*kvSess, len(r.byID))
	for id, s := range r.byID {
		m := make(map[string]struct{}, len(s.members))
		for k := range s.members {
			m[k] = struct{}{}
		}
		c.byID[id] = &kvSess{pinned: s.pinned, members: m}
	}
	c.byKey = make(map[string][]string, len(r.byKey))
	for k, ids := range r.byKey {
		c.byKey[k] = slices.Clone(ids)
	}
	return c
}

// add makes key a member of session id (creating it). REQUIRES: the limits were checked.
func (r *kvSessions) add(id, key string) {
	if r.byID == nil {
		r.byID, r.byKey = make(map[string]*kvSess), make(map[string][]string)
	}
	s := r.byID[id]
	if s == nil {
		s = &kvSess{members: make(map[string]struct{})}
		r.byID[id] = s
	}
	if _, ok := s.members[key]; ok {
		return
	}
	s.members[key] = struct{}{}
	r.byKey[key] = append(r.byKey[key], id)
}

// remove drops key from session id (nothing when it is not a member); a session left empty
// goes, with its pin.
func (r *kvSessions) remove(id, key string) {
	s := r.byID[id]
	if s == nil {
		return
	}
	if _, ok := s.members[key]; !ok {
		return
	}
	delete(s.members, key)
	if len(s.members) == 0 {
		delete(r.byID, id)
	}
	ids := r.byKey[key]
	if i := slices.Index(ids, id); i >= 0 {
		ids = slices.Delete(ids, i, i+1)
	}
	if len(ids) == 0 {
		delete(r.byKey, key)
	} else {
		r.byKey[key] = ids
	}
}

// dropKey removes key from every session (the object is gone): Mooncake's membership
// destructor. O(sessions of the key).
func (r *kvSessions) dropKey(key string) {
	ids, ok := r.byKey[key]
	if !ok {
		return
	}
	delete(r.byKey, key)
	for _, id := range ids {
		s := r.byID[id]
		delete(s.members, key)
		if len(s.members) == 0 {
			delete(r.byID, id)
		}
	}
}

// pinned reports whether a session key belongs to is pinned.
func (r *kvSessions) pinned(key string) bool {
	for _, id := range r.byKey[key] {
		if r.byID[id].pinned {
			return true
		}
	}
	return false
}

// applyKVSession applies a KVSession command (validated).
func (st *state) applyKVSession(c *KVSession) Result {
	r := &st.kvs
	switch c.Op {
	case KVSessionPin, KVSessionUnpin:
		s := r.byID[c.ID]
		if s == nil {
			return Result{Err: fmt.Errorf("raftmeta: KV session: %w", base.ErrSessionNotFound)}
		}
		s.pinned = c.Op == KVSessionPin
		return Result{}
	case KVSessionDetach:
		for _, k := range c.Keys {
			r.remove(c.ID, k)
		}
		return Result{}
	}
	res := Result{Items: make([]error, len(c.Keys))}
	for i, k := range c.Keys {
		if _, rec := st.find(k); rec == nil || rec.nreps() == 0 {
			res.Items[i] = fmt.Errorf("raftmeta: KV session attach %q: %w", k, base.ErrObjectNotFound)
			continue
		}
		s := r.byID[c.ID]
		if s != nil {
			if _, ok := s.members[k]; ok {
				continue // idempotent
			}
		}
		switch {
		case s == nil && len(r.byID) >= MaxKVSessions:
			res.Items[i] = fmt.Errorf("raftmeta: KV session attach %q: %d sessions: %w", k, MaxKVSessions, base.ErrSessionLimitExceeded)
		case s != nil && len(s.members) >= MaxKVSessionMembers:
			res.Items[i] = fmt.Errorf("raftmeta: KV session attach %q: %d members: %w", k, MaxKVSessionMembers, base.ErrSessionLimitExceeded)
		case len(r.byKey[k]) >= MaxKVSessionsPerObject:
			res.Items[i] = fmt.Errorf("raftmeta: KV session attach %q: in %d sessions: %w", k, MaxKVSessionsPerObject, base.ErrSessionLimitExceeded)
		default:
			r.add(c.ID, k)
		}
	}
	return res
}

// KVSessionInfo is Mooncake's KvSessionInfo: one session as the registry holds it.
type KVSessionInfo struct {
	ID          string
	Pinned      bool
	MemberCount int64
}

// KVSession returns session id; an absent one gives an error wrapping base.ErrSessionNotFound.
func (n *Node) KVSession(id string) (KVSessionInfo, error) {
	n.fsm.mu.RLock()
	defer n.fsm.mu.RUnlock()
	s := n.fsm.st.kvs.byID[id]
	if s == nil {
		return KVSessionInfo{}, fmt.Errorf("raftmeta: KV session: %w", base.ErrSessionNotFound)
	}
	return KVSessionInfo{ID: id, Pinned: s.pinned, MemberCount: int64(len(s.members))}, nil
}

// KVSessionKeys returns up to limit member keys of session id that sort after cursor (an
// exclusive lexical cursor, "" for the start), in order, and the cursor of the next page ("" at
// the end): Mooncake's KvSessionPage. O(members log members).
func (n *Node) KVSessionKeys(id, cursor string, limit int) (keys []string, next string, err error) {
	if limit <= 0 {
		return nil, "", invalidf("KV session list limit %d", limit)
	}
	n.fsm.mu.RLock()
	s := n.fsm.st.kvs.byID[id]
	if s == nil {
		n.fsm.mu.RUnlock()
		return nil, "", fmt.Errorf("raftmeta: KV session: %w", base.ErrSessionNotFound)
	}
	for k := range s.members {
		if k > cursor {
			keys = append(keys, k)
		}
	}
	n.fsm.mu.RUnlock()
	slices.Sort(keys)
	if len(keys) > limit {
		keys = keys[:limit:limit]
		next = keys[limit-1]
	}
	return keys, next, nil
}

// KVSessionPinned reports whether key belongs to a pinned KV session: with a live soft pin,
// Mooncake's "effectively soft pinned".
func (n *Node) KVSessionPinned(key string) bool {
	n.fsm.mu.RLock()
	defer n.fsm.mu.RUnlock()
	return n.fsm.st.kvs.pinned(key)
}

// Snapshot section 27 (trailing, written only when a session exists, so older snapshots and
// states without sessions stay byte-identical):
//
//	tag (1B) = 27 | version (1B) = 1
//	sessions uvarint | sessions x { id string | pinned bool | members uvarint | members x key string }
const (
	sectionKVSessions        = 27
	sectionKVSessionsVersion = 1
)

// appendKVSessionsSection appends the section (nothing without sessions); flush is called
// whenever b grows large.
func appendKVSessionsSection(b []byte, st *state, flush func([]byte) ([]byte, error)) ([]byte, error) {
	if len(st.kvs.byID) == 0 {
		return b, nil
	}
	b = append(b, sectionKVSessions, sectionKVSessionsVersion)
	b = binary.AppendUvarint(b, uint64(len(st.kvs.byID)))
	var err error
	for id, s := range st.kvs.byID {
		b = appendStr(b, id)
		b = appendBool(b, s.pinned)
		b = binary.AppendUvarint(b, uint64(len(s.members)))
		for k := range s.members {
			b = appendStr(b, k)
			if len(b) > 32<<10 {
				if b, err = flush(b); err != nil {
					return b, err
				}
			}
		}
	}
	return b, nil
}

// readKVSessionsSection reads the section (its tag already read) into st, checking every
// invariant of kvSessions against the objects.
func readKVSessionsSection(d *snapReader, st *state) {
	if st.kvs.byID != nil {
		d.fail("KV sessions section listed twice")
		return
	}
	if v := d.byte1(); d.err == nil && v != sectionKVSessionsVersion {
		d.fail("unknown KV sessions section version %d", v)
		return
	}
	ns := d.uvarint()
	if d.err == nil && (ns == 0 || ns > MaxKVSessions) {
		d.fail("%d KV sessions", ns)
		return
	}
	st.kvs = kvSessions{byID: make(map[string]*kvSess), byKey: make(map[string][]string)}
	for range ns {
		id := d.str(base.MaxStoredKVSessionIDLen)
		pinned := d.byte1()
		nm := d.uvarint()
		if d.err != nil {
			return
		}
		if base.ValidateStoredKVSessionID(id) != nil || pinned > 1 || nm == 0 || nm > MaxKVSessionMembers || st.kvs.byID[id] != nil {
			d.fail("bad KV session of %d bytes (%d members)", len(id), nm)
			return
		}
		for range nm {
			k := d.str(base.MaxKeyLen)
			if d.err != nil {
				return
			}
			if _, ok := st.objects[k]; !ok || len(st.kvs.byKey[k]) >= MaxKVSessionsPerObject {
				d.fail("KV session member %q: no such object, or too many sessions", k)
				return
			}
			before := len(st.kvs.byID[id].membersOrNil())
			st.kvs.add(id, k)
			if len(st.kvs.byID[id].members) == before {
				d.fail("KV session member %q listed twice", k)
				return
			}
		}
		st.kvs.byID[id].pinned = pinned == 1
	}
}

func (s *kvSess) membersOrNil() map[string]struct{} {
	if s == nil {
		return nil
	}
	return s.members
}
