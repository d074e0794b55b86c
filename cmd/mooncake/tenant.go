package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mooncake-go/mooncake/client"
	"github.com/mooncake-go/mooncake/internal/base"
)

// newTenantCmd is `mooncake tenant`: tenant quotas (kept in raft) and usage. The admin HTTP's
// /tenants/quota endpoints (Mooncake's) do the same on the master's metrics port.
func newTenantCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tenant ls | quota set TENANT BYTES | quota rm TENANT",
		Short: "List tenants with their quota and usage, set or remove a tenant's quota",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return usagef("tenant: want ls or quota") },
	}
	var lf clientFlags
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List every tenant with a quota or an object: quota, bytes and objects held, bytes in flight",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := lf.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := c.Status(cmd.Context())
			if err != nil {
				return err
			}
			return printTenants(e.stdout, st.Tenants, st.TenantDefault)
		},
	}
	lf.register(ls.Flags())

	quota := &cobra.Command{
		Use:   "quota set TENANT BYTES | rm TENANT",
		Short: "Set or remove a tenant's quota: the most bytes of objects it may hold (TENANT _default: the default quota of tenants without their own)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return usagef("tenant quota: want set or rm") },
	}
	var (
		sf   clientFlags
		nvme string
	)
	set := &cobra.Command{
		Use:   "set TENANT BYTES [--nvme BYTES]",
		Short: "Set TENANT's DRAM quota (sizes as 64GB; 0: no limit) and NVMe quota, one raft commit; puts past the DRAM quota fail with TENANT_QUOTA_EXCEEDED. TENANT _default sets the default quota: that of every tenant without its own",
		Args:  exactArgs(2, "TENANT BYTES"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkQuotaTenant(args[0]); err != nil {
				return usageError{err}
			}
			dram, err := base.ParseBytes(args[1])
			if err != nil {
				return usageError{err}
			}
			nv, err := base.ParseBytes(nvme)
			if err != nil {
				return usageError{fmt.Errorf("--nvme: %w", err)}
			}
			c, err := sf.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.SetTenantQuota(cmd.Context(), args[0], int64(dram), int64(nv)); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s: quota %s, NVMe quota %s\n", quotaSubject(args[0]), quotaString(int64(dram)), quotaString(int64(nv)))
			return nil
		},
	}
	sf.register(set.Flags())
	set.Flags().StringVar(&nvme, "nvme", "0", "NVMe quota (0: no limit): the most bytes of TENANT's objects the workers' NVMe tiers hold; each worker holds its share, evicting the tenant's own least recently used NVMe objects (docs/operations.md)")
	var rf clientFlags
	rm := &cobra.Command{
		Use:   "rm TENANT",
		Short: "Remove TENANT's quota (its objects stay; it then has the default quota, if one is set). TENANT _default removes the default quota",
		Args:  exactArgs(1, "TENANT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkQuotaTenant(args[0]); err != nil {
				return usageError{err}
			}
			c, err := rf.connect(cmd, e)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.SetTenantQuota(cmd.Context(), args[0], 0, 0); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s: no quota\n", quotaSubject(args[0]))
			return nil
		},
	}
	rf.register(rm.Flags())
	quota.AddCommand(set, rm)
	cmd.AddCommand(ls, quota)
	return cmd
}

// checkQuotaTenant checks a TENANT argument of `tenant quota`: a tenant that may have a quota
// of its own, or base.DefaultQuotaTenant.
func checkQuotaTenant(t string) error {
	if t == base.DefaultQuotaTenant {
		return nil
	}
	return base.ValidateQuotaTenant(t)
}

// quotaSubject names whose quota a TENANT argument sets.
func quotaSubject(t string) string {
	if t == base.DefaultQuotaTenant {
		return "default quota (tenants without their own)"
	}
	return "tenant " + base.NormalizeTenant(t)
}

func quotaString(n int64) string {
	if n == 0 {
		return "none"
	}
	return base.Bytes(n).String()
}

// printTenants writes the tenants table of `mooncake tenant ls` and `mooncake status`: the
// default quota first, as the row "_default" (when set), then each tenant, its quota marked
// "(default)" when it is the default quota's.
func printTenants(out io.Writer, ts []client.TenantStatus, def *client.TenantStatus) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TENANT\tQUOTA\tNVME QUOTA\tUSED\tOBJECTS\tIN FLIGHT")
	if def != nil {
		fmt.Fprintf(w, "%s\t%s\t%s\t-\t-\t-\n", base.DefaultQuotaTenant, quotaString(def.MaxBytes), quotaString(def.NVMeMaxBytes))
	}
	for _, t := range ts {
		dram, nvme := quotaString(t.MaxBytes), quotaString(t.NVMeMaxBytes)
		if !t.HasExplicitPolicy && (t.MaxBytes != 0 || t.NVMeMaxBytes != 0) {
			dram, nvme = dram+" (default)", nvme+" (default)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", t.TenantID, dram, nvme, base.Bytes(t.UsedBytes), t.CommittedCount, base.Bytes(t.ReservedBytes))
	}
	return w.Flush()
}
