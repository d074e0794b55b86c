package client

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// Tenants (docs/protocol.md, "Tenants"). A client is in one tenant for its life
// (Config.TenantID) and every key it is given is in that tenant's namespace: each public call
// turns its keys into stored keys (base.TenantKey) on the way in, once, and List turns them
// back on the way out, so the rest of the package, the wire and the workers only see stored
// keys. The default tenant's stored keys are the keys themselves.
//
// NB: a public call that calls another public call passes the caller's keys unchanged (the
// callee maps them); internal helpers take stored keys.

// tenant returns the client's tenant id ("default" for none).
func (c *Client) tenant() string { return base.NormalizeTenant(c.cfg.TenantID) }

// storedKey returns the stored key of key in the client's tenant, checked as base.TenantKey
// checks it.
func (c *Client) storedKey(key string) (string, error) {
	return base.TenantKey(c.cfg.TenantID, key)
}

// storedKeys returns the stored keys of keys (a new slice; keys is not changed). Only what the
// namespace adds is checked here (a default-tenant key that starts with NUL fails the batch);
// the callers check each key as before, so an empty key still fails only its item.
func (c *Client) storedKeys(keys []string) ([]string, error) {
	p := base.TenantPrefix(c.cfg.TenantID)
	out := make([]string, len(keys))
	for i, k := range keys {
		if p == "" && strings.HasPrefix(k, "\x00") {
			_, err := base.TenantKey(c.cfg.TenantID, k)
			return nil, err
		}
		if k != "" {
			out[i] = p + k
		}
	}
	return out, nil
}

// userKey returns the client's key of a stored key of its tenant, and whether it is one.
func (c *Client) userKey(stored string) (string, bool) {
	t, k := base.SplitTenantKey(stored)
	return k, t == c.tenant()
}

// TenantStatus is one tenant in Status, as the master reports it (Mooncake's fields).
type TenantStatus struct {
	TenantID string `json:"tenant_id"`
	// MaxBytes is the tenant's DRAM quota: the most bytes of objects it may hold (0: none).
	MaxBytes int64 `json:"max_bytes"`
	// NVMeMaxBytes is its NVMe quota (0: none): the workers hold its bytes on NVMe under it.
	NVMeMaxBytes int64 `json:"nvme_max_bytes"`
	// UsedBytes and CommittedCount are its committed objects (one replica's worth of bytes).
	UsedBytes      int64 `json:"used_bytes"`
	CommittedCount int64 `json:"committed_count"`
	// ReservedBytes is the bytes of its puts in flight, as the leader counts them.
	ReservedBytes int64 `json:"reserved_bytes"`
	// HasExplicitPolicy (Mooncake's field) is true when the quota is the tenant's own, false
	// when it is the default quota's (Status.TenantDefault; both 0 when none is set). Status
	// reports it; Tenants leaves it false.
	HasExplicitPolicy bool `json:"has_explicit_policy"`
}

// SetTenantQuota sets tenant t's DRAM quota to dramBytes and its NVMe quota to nvmeBytes (0:
// no limit; both 0 removes the quota) with one raft commit on the leader: puts that would
// take the tenant past its DRAM quota fail with base.ErrQuotaExceeded. A quota under what the
// tenant holds refuses its next puts and removes nothing. t == base.DefaultQuotaTenant
// ("_default") sets the default quota, that of every tenant without its own; other ids
// starting with '_' are refused (base.ValidateQuotaTenant).
func (c *Client) SetTenantQuota(ctx context.Context, t string, dramBytes, nvmeBytes int64) error {
	if t != base.DefaultQuotaTenant {
		if err := base.ValidateQuotaTenant(t); err != nil {
			return err
		}
		t = base.NormalizeTenant(t)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	req := &transfer.TenantQuotaSetRequest{Quota: transfer.TenantQuota{Tenant: t, DRAMBytes: dramBytes, NVMeBytes: nvmeBytes}}
	if err := c.masterCall(ctx, req, transfer.NewEmpty(transfer.OpTenantQuotaSet), nil); err != nil {
		return fmt.Errorf("tenant %q quota: %w", t, err)
	}
	return nil
}

// Tenants returns every tenant with a quota or an object, by name, from the leader.
func (c *Client) Tenants(ctx context.Context) ([]TenantStatus, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var resp transfer.TenantListResponse
	if err := c.masterCall(ctx, transfer.NewEmpty(transfer.OpTenantList), &resp, nil); err != nil {
		return nil, fmt.Errorf("tenants: %w", err)
	}
	out := make([]TenantStatus, len(resp.Items))
	for i, q := range resp.Items {
		out[i] = TenantStatus{TenantID: q.Tenant, MaxBytes: q.DRAMBytes, NVMeMaxBytes: q.NVMeBytes, UsedBytes: q.Bytes, CommittedCount: q.Objects}
	}
	return out, nil
}

// removeInTenant removes this client's tenant's objects whose keys match re, or all of them
// (re == ""), and returns how many it removed. The default tenant's go through the calls
// Mooncake's clients know (RemoveByRegex, RemoveAll), which the master scopes to it.
func (c *Client) removeInTenant(ctx context.Context, re string) (int64, error) {
	if re != "" {
		if _, err := regexp.Compile(re); err != nil {
			return 0, fmt.Errorf("%w: regex %q: %v", base.ErrInvalidParams, re, err)
		}
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	defer c.lookups.clear()
	var req transfer.Message
	op := transfer.OpTenantRemove
	switch t := c.tenant(); {
	case t != base.DefaultTenant:
		req = &transfer.TenantRemoveRequest{Tenant: t, Pattern: re, All: re == ""}
	case re != "":
		op, req = transfer.OpRemoveByRegex, &transfer.RemoveByRegexRequest{Pattern: re}
	default:
		op, req = transfer.OpRemoveAll, transfer.NewEmpty(transfer.OpRemoveAll)
	}
	resp := transfer.NewCountResponse(op, 0)
	if err := c.masterCall(ctx, req, resp, nil); err != nil {
		if re != "" {
			return 0, fmt.Errorf("remove by regex %q: %w", re, err)
		}
		return 0, fmt.Errorf("remove all: %w", err)
	}
	return resp.Count, nil
}
