package worker

import (
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

// ready is the worker's readiness: registered with a leader and not shutting down.
func (w *Worker) ready() error {
	switch {
	case w.closing.Load():
		return fmt.Errorf("%w: worker %s is shutting down", base.ErrUnavailable, w.id)
	case w.registered.Load() == 0:
		return fmt.Errorf("%w: worker %s has not registered with a leader yet", base.ErrUnavailable, w.id)
	}
	return nil
}
