package client

import (
	"context"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// KV sessions (issue 21 item 2): Mooncake's session-aware object membership and soft pin. A
// session is an application's conversation id, shared by every client that names it; its
// members are keys of stored objects. The leader keeps the registry in raft, so sessions
// survive a leader change. Sessions are per tenant: this file is the one place that maps a
// session id to its stored id (base.TenantKVSessionID) and member keys to stored keys on the
// way in, and member keys back on the way out; the master and raft only see stored ids and
// keys. A session id of another tenant is absent here (base.ErrSessionNotFound). Errors wrap base.ErrSessionNotFound (no session of that id),
// base.ErrSessionLimitExceeded, base.ErrInvalidParams (a bad id or limit). See
// docs/python.md, "KV sessions".

// KVSessionInfo is Mooncake's KvSessionInfo.
type KVSessionInfo struct {
	ID          string
	Pinned      bool
	MemberCount uint64
}

// KVSessionPage is Mooncake's KvSessionPage: member keys in lexical order, and the exclusive
// cursor of the next page ("" when there is none).
type KVSessionPage struct {
	Keys       []string
	NextCursor string
}

// kvSessionCall makes one KV-session call to the leader.
func (c *Client) kvSessionCall(ctx context.Context, req, resp transfer.Message) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	return c.masterCall(ctx, req, resp, nil)
}

// PinKVSession gives session id's current and future members soft-pin priority (no TTL);
// the session must exist.
func (c *Client) PinKVSession(ctx context.Context, id string) error {
	return c.kvSessionSimple(ctx, transfer.OpKVSessionPin, id, nil)
}

// UnpinKVSession lifts session id's pin; memberships and other sessions' pins stay.
func (c *Client) UnpinKVSession(ctx context.Context, id string) error {
	return c.kvSessionSimple(ctx, transfer.OpKVSessionUnpin, id, nil)
}

// UpdateKVSession keeps only the members of session id that keep names (one complete keep
// set: never split it into several calls). An absent session is no error; a session left
// with no member is removed with its pin. Objects are never deleted.
func (c *Client) UpdateKVSession(ctx context.Context, id string, keep []string) error {
	return c.kvSessionSimple(ctx, transfer.OpKVSessionUpdate, id, keep)
}

// CloseKVSession removes every member of session id, and so the session; objects stay. An
// absent session is no error.
func (c *Client) CloseKVSession(ctx context.Context, id string) error {
	return c.kvSessionSimple(ctx, transfer.OpKVSessionUpdate, id, nil)
}

// sessionID returns the stored id of the client's session id, checked.
func (c *Client) sessionID(id string) (string, error) {
	return base.TenantKVSessionID(c.cfg.TenantID, id)
}

func (c *Client) kvSessionSimple(ctx context.Context, op transfer.Op, id string, keys []string) error {
	sid, err := c.sessionID(id)
	if err != nil {
		return err
	}
	if len(keys) > transfer.MaxKVSessionKeys {
		return fmt.Errorf("%w: %d keys, the limit is %d", base.ErrSessionLimitExceeded, len(keys), transfer.MaxKVSessionKeys)
	}
	stored, err := c.storedKeys(keys)
	if err != nil {
		return err
	}
	if err := c.kvSessionCall(ctx, &transfer.KVSessionRequest{Call: op, ID: sid, Keys: stored}, transfer.NewEmpty(op)); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// KVSession returns session id's pin and member count.
func (c *Client) KVSession(ctx context.Context, id string) (KVSessionInfo, error) {
	sid, err := c.sessionID(id)
	if err != nil {
		return KVSessionInfo{}, err
	}
	resp := new(transfer.KVSessionInfoResponse)
	if err := c.kvSessionCall(ctx, &transfer.KVSessionRequest{Call: transfer.OpKVSessionGet, ID: sid}, resp); err != nil {
		return KVSessionInfo{}, fmt.Errorf("get KV session: %w", err)
	}
	if resp.ID != sid {
		return KVSessionInfo{}, fmt.Errorf("%w: get KV session: the master answered for another session", base.ErrInternal)
	}
	return KVSessionInfo{ID: id, Pinned: resp.Pinned, MemberCount: resp.MemberCount}, nil
}

// ListKVSessionKeys returns up to limit (1 to 4096) member keys sorting after cursor.
// Enumeration is weakly consistent: members added or removed between pages may be missed.
func (c *Client) ListKVSessionKeys(ctx context.Context, id, cursor string, limit int) (KVSessionPage, error) {
	sid, err := c.sessionID(id)
	if err != nil {
		return KVSessionPage{}, err
	}
	if limit <= 0 || limit > 1<<32-1 {
		return KVSessionPage{}, fmt.Errorf("%w: list limit %d", base.ErrInvalidParams, limit)
	}
	// The members of a tenant's session are its stored keys, which all share its prefix, so
	// the prefixed cursor pages them in the client's lexical order.
	if cursor != "" {
		cursor = base.TenantPrefix(c.cfg.TenantID) + cursor
		if len(cursor) > base.MaxKeyLen {
			return KVSessionPage{}, fmt.Errorf("%w: list cursor of %d bytes, the limit in tenant %q is %d", base.ErrInvalidParams, len(cursor), c.tenant(), base.MaxKeyLen)
		}
	}
	resp := new(transfer.KVSessionPageResponse)
	req := &transfer.KVSessionListRequest{ID: sid, Cursor: cursor, Limit: uint32(limit)}
	if err := c.kvSessionCall(ctx, req, resp); err != nil {
		return KVSessionPage{}, fmt.Errorf("list KV session keys: %w", err)
	}
	page := KVSessionPage{Keys: make([]string, 0, len(resp.Keys))}
	for _, k := range resp.Keys {
		if uk, ok := c.userKey(k); ok { // always: only this client's tenant attaches to sid
			page.Keys = append(page.Keys, uk)
		}
	}
	if resp.NextCursor != "" {
		page.NextCursor, _ = c.userKey(resp.NextCursor)
	}
	return page, nil
}

// AttachKVSession adds keys to session id, creating it (unpinned) on its first member. One
// error per key (nil: attached, or a member already; base.ErrObjectNotFound: no such object;
// base.ErrSessionLimitExceeded); the second result fails the whole call.
func (c *Client) AttachKVSession(ctx context.Context, id string, keys []string) ([]error, error) {
	sid, err := c.sessionID(id)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	stored, err := c.storedKeys(keys)
	if err != nil {
		return nil, err
	}
	resp := transfer.NewBatchResponse(transfer.OpKVSessionAttach, nil)
	if err := c.kvSessionCall(ctx, &transfer.KVSessionRequest{Call: transfer.OpKVSessionAttach, ID: sid, Keys: stored}, resp); err != nil {
		return nil, fmt.Errorf("attach KV session: %w", err)
	}
	if len(resp.Items) != len(keys) {
		return nil, fmt.Errorf("%w: attach KV session: %d answers for %d keys", base.ErrInternal, len(resp.Items), len(keys))
	}
	errs := make([]error, len(keys))
	for i, it := range resp.Items {
		if err := it.Err(); err != nil {
			errs[i] = fmt.Errorf("attach %q: %w", keys[i], err)
		}
	}
	return errs, nil
}
