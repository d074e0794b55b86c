package main

import (
	"context"
	"fmt"

	"github.com/mooncake-go/mooncake/internal/base"
)

func runMaster(ctx context.Context, e *env, s masterSettings) error {
	e.logger().Info("mooncake master", "config", fmt.Sprintf("%+v", s))
	return fmt.Errorf("%w: the master arrives with the server package", base.ErrNotSupported)
}

func runWorker(ctx context.Context, e *env, s workerSettings) error {
	e.logger().Info("mooncake worker", "config", fmt.Sprintf("%+v", s))
	return fmt.Errorf("%w: the worker arrives with the server package", base.ErrNotSupported)
}

func runStandalone(ctx context.Context, e *env, ms masterSettings, ws workerSettings) error {
	e.logger().Info("mooncake standalone", "master", fmt.Sprintf("%+v", ms), "worker", fmt.Sprintf("%+v", ws))
	return fmt.Errorf("%w: standalone arrives with the server package", base.ErrNotSupported)
}
