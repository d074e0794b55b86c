package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
)

// The membership commands: `mooncake master add|remove|list`, client commands under `master`
// (which, with flags and no subcommand, runs a master). They talk to the leader through the
// client package like `mooncake status`.

// addMasterCmds adds add, remove and list under the master command.
func addMasterCmds(master *cobra.Command, e *env) {
	master.AddCommand(newMasterAddCmd(e), newMasterRemoveCmd(e), newMasterListCmd(e))
}

// validateMasterIDFlag checks --id before anything is sent (the leader checks it again).
func validateMasterIDFlag(id string) error {
	if id == "" {
		return usagef("--id is required (the master's raft id, e.g. m4)")
	}
	if err := base.ValidateWorkerID(base.WorkerID(id)); err != nil {
		return usagef("--id %q: want 1 to %d bytes of letters, digits, '.', '_' and '-'", id, base.MaxWorkerIDLen)
	}
	return nil
}

func newMasterAddCmd(e *env) *cobra.Command {
	var (
		f                     clientFlags
		id, raftAddr, rpcAddr string
	)
	cmd := &cobra.Command{
		Use:   "add --id m4 --raft_address HOST:PORT [--rpc_address HOST:PORT]",
		Short: "Add a master (started with --join) to the cluster's raft configuration as a voter",
		Long: `add asks the leader to add a master as a voter. Start the new master first with
  mooncake master --join --id m4 --data_dir DIR --rpc_address HOST:PORT --raft_address HOST:PORT
(it bootstraps nothing and waits). Adding a master that is already a member at the same raft
address changes nothing. With a master down, remove it first: every voter counts towards the
quorum from the moment it is added.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateMasterIDFlag(id); err != nil {
				return err
			}
			if raftAddr == "" {
				return usagef("--raft_address is required (the new master's --raft_address)")
			}
			if err := checkHostPort(raftAddr, true); err != nil {
				return fmt.Errorf("--raft_address: %w", err)
			}
			if rpcAddr != "" {
				if err := checkHostPort(rpcAddr, true); err != nil {
					return fmt.Errorf("--rpc_address: %w", err)
				}
			}
			c, err := f.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.AddMaster(cmd.Context(), id, raftAddr, rpcAddr); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "master %s is a voter (raft %s)\n", id, raftAddr)
			return nil
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&id, "id", "", "the new master's id (its --id)")
	cmd.Flags().StringVar(&raftAddr, "raft_address", "", "the new master's raft address (its --raft_address)")
	cmd.Flags().StringVar(&rpcAddr, "rpc_address", "", "the new master's client RPC address (its --rpc_address); optional but recommended: with it the leader checks that the new master is empty and has this id")
	return cmd
}

func newMasterRemoveCmd(e *env) *cobra.Command {
	var (
		f  clientFlags
		id string
	)
	cmd := &cobra.Command{
		Use:   "remove --id m3",
		Short: "Remove a master from the cluster's raft configuration",
		Long: `remove asks the leader to remove a master (a dead one, or one being retired). Removing the
leader works: it hands leadership to another voter first. The last voter is never removed.
Stop the removed master's process afterwards; it must not be restarted with its old data dir.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateMasterIDFlag(id); err != nil {
				return err
			}
			c, err := f.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.RemoveMaster(cmd.Context(), id); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "master %s removed\n", id)
			return nil
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().StringVar(&id, "id", "", "the id of the master to remove")
	return cmd
}

func newMasterListCmd(e *env) *cobra.Command {
	var (
		f      clientFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the masters of the raft configuration: id, raft and RPC addresses, leader",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := c.Status(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(e.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(st.Masters)
			}
			return printMasters(e.stdout, st.Masters)
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON list of {id, rpc_address, raft_address, leader}")
	return cmd
}

func printMasters(out io.Writer, ms []client.MasterStatus) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	writeMasters(w, ms)
	return w.Flush()
}

// writeMasters writes the masters table (header and one row per master) to a tabwriter; it
// is also the masters section of `mooncake status`.
func writeMasters(w io.Writer, ms []client.MasterStatus) {
	fmt.Fprintf(w, "MASTER\tRAFT ADDRESS\tRPC ADDRESS\tROLE\n")
	for _, m := range ms {
		role := "follower"
		if m.Leader {
			role = "leader"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.ID, dash(m.RaftAddress), dash(m.RPCAddress), role)
	}
}

// dash prints "-" for an unknown value.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
