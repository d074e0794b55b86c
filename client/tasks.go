package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/mooncake-go/mooncake/internal/base"
	"github.com/mooncake-go/mooncake/transfer"
)

// TaskInfo is a task's state (Mooncake's QueryTaskResponse).
type TaskInfo struct {
	ID               base.TaskID
	Type             base.TaskType
	Status           base.TaskStatus
	Key              string
	Created, Updated time.Time
	// AssignedClient is the worker that copies; Message the first failure's reason.
	AssignedClient string
	Message        string
}

// CreateCopyTask copies key's object to each target segment (a worker id, or its address):
// each gets one more replica, in the background, on the leader's repair queue. It returns
// the task's id at once; QueryTask follows it. Errors wrap base.ErrObjectNotFound (no such
// key), base.ErrSegmentNotFound (a segment unknown, or a target not alive or draining),
// base.ErrObjectAlreadyExists (a target holds it), base.ErrInvalidParams (no target, one named
// twice).
func (c *Client) CreateCopyTask(ctx context.Context, key string, targets []string) (base.TaskID, error) {
	return c.createTask(ctx, &transfer.CreateTaskRequest{Type: base.TaskCopy, Key: key, Targets: targets})
}

// CreateMoveTask moves key's replica on source to target (segments named as for
// CreateCopyTask): a copy to target, then source's replica is dropped. Errors as
// CreateCopyTask's; base.ErrObjectNotFound also when source holds no replica of key.
func (c *Client) CreateMoveTask(ctx context.Context, key, source, target string) (base.TaskID, error) {
	return c.createTask(ctx, &transfer.CreateTaskRequest{Type: base.TaskMove, Key: key, Source: source, Targets: []string{target}})
}

// createTask sends req under a task id of its own choosing, random, so that the call is safe
// to resend: the transfer client and masterCall send it again after a broken connection, and
// the leader answers a resend with the task the first one created (docs/protocol.md).
func (c *Client) createTask(ctx context.Context, req *transfer.CreateTaskRequest) (base.TaskID, error) {
	var err error
	if req.Key, err = c.storedKey(req.Key); err != nil {
		return base.TaskID{}, err
	}
	if len(req.Targets) > transfer.MaxTaskTargets {
		return base.TaskID{}, fmt.Errorf("%w: %d targets, at most %d", base.ErrInvalidParams, len(req.Targets), transfer.MaxTaskTargets)
	}
	for req.ID == (base.TaskID{}) {
		req.ID = base.TaskID{Hi: rand.Uint64(), Lo: rand.Uint64()}
	}
	ctx, done := c.withTimeout(ctx)
	defer done()
	var resp transfer.CreateTaskResponse
	if err := c.masterCall(ctx, req, &resp, nil); err != nil {
		return base.TaskID{}, fmt.Errorf("create task for %q: %w", req.Key, err)
	}
	return resp.ID, nil
}

// QueryTask returns a task's state. A task the leader does not know (created under an
// earlier leader, or forgotten past the leader's task bound) fails with an error wrapping
// base.ErrObjectNotFound.
func (c *Client) QueryTask(ctx context.Context, id base.TaskID) (TaskInfo, error) {
	ctx, done := c.withTimeout(ctx)
	defer done()
	var resp transfer.QueryTaskResponse
	if err := c.masterCall(ctx, &transfer.QueryTaskRequest{ID: id}, &resp, nil); err != nil {
		return TaskInfo{}, fmt.Errorf("query task %s: %w", id, err)
	}
	key, ok := c.userKey(resp.Key)
	if !ok {
		key = resp.Key // another tenant's task: its stored key
	}
	return TaskInfo{ID: id, Type: resp.Type, Status: resp.Status, Key: key, Created: time.UnixMilli(resp.CreatedMs),
		Updated: time.UnixMilli(resp.UpdatedMs), AssignedClient: resp.AssignedClient, Message: resp.Message}, nil
}
