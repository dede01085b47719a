package servecli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/server"
)

// tokenCommand is serve token: create, list and revoke API keys. It works
// on the registry directly, or through the running server's admin socket
// when a server holds it.
func tokenCommand() *cobra.Command {
	var data string
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke tenants' API keys",
		Long: `Manage the API keys tenants authenticate with. A key is shown once, at
creation; the server keeps only its hash. Revoked keys stay listed.
These commands work whether or not a server is running on --data.`,
	}
	cmd.PersistentFlags().StringVar(&data, "data", defaultData(), "the server's data `DIR`")
	open := func() (server.KeyAdmin, error) {
		ka, err := server.OpenKeyAdmin(data)
		if err != nil {
			return nil, cli.Fail(err)
		}
		return ka, nil
	}
	var tenant string
	create := &cobra.Command{
		Use:   "create --tenant NAME",
		Short: "Make an API key for a tenant and print it (once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tenant == "" {
				return cli.Failf("token create: --tenant is required")
			}
			ka, err := open()
			if err != nil {
				return err
			}
			defer ka.Close()
			k, tok, err := ka.CreateKey(tenant)
			if err != nil {
				return cli.Fail(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			fmt.Fprintf(cmd.ErrOrStderr(), "key %s for tenant %s; the token above is not shown again\n", k.ID, k.Tenant)
			return nil
		},
	}
	create.Flags().StringVar(&tenant, "tenant", "", "the tenant `NAME` the key acts for (a-z, 0-9, _ . -)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List API keys (without their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ka, err := open()
			if err != nil {
				return err
			}
			defer ka.Close()
			keys, err := ka.Keys()
			if err != nil {
				return cli.Fail(err)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tTENANT\tCREATED\tREVOKED")
			for _, k := range keys {
				revoked := "-"
				if !k.RevokedAt.IsZero() {
					revoked = k.RevokedAt.Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.ID, k.Tenant, k.CreatedAt.Format(time.RFC3339), revoked)
			}
			return tw.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke KEY",
		Short: "Revoke an API key; requests with it are refused from now on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ka, err := open()
			if err != nil {
				return err
			}
			defer ka.Close()
			k, err := ka.RevokeKey(args[0])
			if err != nil {
				return cli.Fail(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked key %s of tenant %s\n", k.ID, k.Tenant)
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}
