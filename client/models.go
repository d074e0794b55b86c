package client

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// maxTokens is the largest token count of one object (the metadata keeps 32 bits).
const maxTokens = 1<<32 - 1

func (rc ReplicateConfig) checkTokens() error {
	if rc.Tokens < 0 || rc.Tokens > maxTokens {
		return fmt.Errorf("%w: tokens must be 0 to %d, got %d", base.ErrInvalidParams, int64(maxTokens), rc.Tokens)
	}
	if rc.Model != "" {
		return ValidateModelName(rc.Model)
	}
	return nil
}

// ValidateModelName checks a model name: 1 to 128 printable bytes without spaces.
func ValidateModelName(name string) error {
	if name == "" || len(name) > transfer.MaxModelNameLen {
		return fmt.Errorf("%w: model name must be 1 to %d bytes, got %d", base.ErrInvalidParams, transfer.MaxModelNameLen, len(name))
	}
	if strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0 {
		return fmt.Errorf("%w: model name %q: no spaces or control characters", base.ErrInvalidParams, name)
	}
	return nil
}

// AddModel registers a model with the cluster (or replaces a registered one's figures):
// bytesPerToken is its KV-cache cost per token (see `mooncake kvcost`), description how it was
// computed. Registration is kept in raft.
func (c *Client) AddModel(ctx context.Context, name string, bytesPerToken int64, description string) error {
	if err := ValidateModelName(name); err != nil {
		return err
	}
	if bytesPerToken <= 0 {
		return fmt.Errorf("%w: model %q: bytes per token must be positive", base.ErrInvalidParams, name)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	req := &transfer.ModelAddRequest{Name: name, BytesPerToken: bytesPerToken, Description: description}
	if err := c.masterCall(ctx, req, transfer.NewEmpty(transfer.OpModelAdd), nil); err != nil {
		return fmt.Errorf("model add %q: %w", name, err)
	}
	return nil
}

// RemoveModel unregisters a model; objects naming it keep their token counts. An unknown
// model gives an error wrapping base.ErrObjectNotFound.
func (c *Client) RemoveModel(ctx context.Context, name string) error {
	if err := ValidateModelName(name); err != nil {
		return err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if err := c.masterCall(ctx, &transfer.ModelRemoveRequest{Name: name}, transfer.NewEmpty(transfer.OpModelRemove), nil); err != nil {
		return fmt.Errorf("model rm %q: %w", name, err)
	}
	return nil
}

// MemoryJSON returns the leader's memory report as JSON (the document of the master's
// /api/v1/memory; docs/memory.md explains every field).
func (c *Client) MemoryJSON(ctx context.Context) ([]byte, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp := &transfer.JSONResponse{Call: transfer.OpMemory}
	if err := c.masterCall(ctx, transfer.NewEmpty(transfer.OpMemory), resp, nil); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	return resp.JSON, nil
}
