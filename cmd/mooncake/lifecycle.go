package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
)

// The lifecycle commands: `mooncake worker drain`, a client command under `worker` (which,
// with flags and no subcommand, runs a worker), and the repair lines of `mooncake status`.

// addWorkerCmds adds drain under the worker command.
func addWorkerCmds(worker *cobra.Command, e *env) {
	worker.AddCommand(newWorkerDrainCmd(e), newWorkerRetireCmd(e))
}

// workerIDFlag checks --worker_id before anything is sent (the leader checks it again).
func workerIDFlag(id string) error {
	if id == "" {
		return usagef("--worker_id is required (the worker's --worker_id)")
	}
	if err := base.ValidateWorkerID(base.WorkerID(id)); err != nil {
		return usagef("--worker_id %q: want 1 to %d bytes of letters, digits, '.', '_' and '-'", id, base.MaxWorkerIDLen)
	}
	return nil
}

func newWorkerRetireCmd(e *env) *cobra.Command {
	var (
		f  clientFlags
		id string
	)
	cmd := &cobra.Command{
		Use:   "retire --worker_id ID",
		Short: "Forget a dead worker for good: drop the replicas kept for its return",
		Long: `retire tells the leader that a dead worker will not come back. The replicas the
metadata kept for its return are dropped, and objects that only it held are removed (they
were unreadable since it died). Only a dead worker can be retired; drain and stop a live one
first.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := workerIDFlag(id); err != nil {
				return err
			}
			c, err := f.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.RetireWorker(cmd.Context(), base.WorkerID(id)); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "worker %s retired\n", id)
			return nil
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&id, "worker_id", "", "the dead worker to retire (its --worker_id)")
	return cmd
}

func newWorkerDrainCmd(e *env) *cobra.Command {
	var (
		f      clientFlags
		id     string
		cancel bool
	)
	cmd := &cobra.Command{
		Use:   "drain --worker_id ID [--cancel]",
		Short: "Move a worker's objects to the other workers and give it no new puts (--cancel undoes it)",
		Long: `drain asks the leader to stop placing puts on a worker and to copy its objects to the
other workers in the background. Follow the progress with 'mooncake status' (the worker's
OBJECTS column falls to 0); then the worker can be stopped with nothing lost. --cancel stops
the drain: the objects already moved stay where they are, and the worker takes puts again.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := workerIDFlag(id); err != nil {
				return err
			}
			c, err := f.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.DrainWorker(cmd.Context(), base.WorkerID(id), cancel); err != nil {
				return err
			}
			if cancel {
				fmt.Fprintf(e.stdout, "worker %s: drain cancelled; it takes new puts again\n", id)
			} else {
				fmt.Fprintf(e.stdout, "worker %s: draining (no new puts; its objects move to the other workers; see mooncake status)\n", id)
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&id, "worker_id", "", "the worker to drain (its --worker_id)")
	cmd.Flags().BoolVar(&cancel, "cancel", false, "cancel the drain")
	return cmd
}

// printRepair writes the repair and drain lines of `mooncake status` (leader only), and
// what the metadata keeps for dead workers.
func printRepair(w io.Writer, st client.Status) {
	r := st.Repair
	if st.UsageReported {
		fmt.Fprintf(w, "repair\t%d under-replicated, %d replicas on draining workers; %d queued, %d copying, %d copied (%s), %d failed\n",
			r.UnderReplicatedObjects, r.DrainingReplicas, r.Queued, r.InFlight, r.Copied, base.Bytes(r.CopiedBytes), r.Failed)
	}
	if st.LostReplicas > 0 || st.InvisibleObjects > 0 {
		fmt.Fprintf(w, "lost replicas\t%d (kept for their worker's return, or repaired); %d objects unreadable until their worker returns\n",
			st.LostReplicas, st.InvisibleObjects)
	}
}

// workerState is a worker's STATE column: the metadata's state, with the leader's lifecycle
// state when it says more (suspect, leaving, draining, ...).
func workerState(wk client.WorkerStatus) string {
	s := wk.State
	switch {
	case wk.Draining && wk.State == "active":
		s = "draining"
	case wk.Lifecycle != "" && wk.Lifecycle != "alive" && wk.Lifecycle != "dead":
		s += "/" + wk.Lifecycle
	}
	if wk.LostReplicas > 0 {
		s += fmt.Sprintf(" (%d lost)", wk.LostReplicas)
	}
	return s
}
