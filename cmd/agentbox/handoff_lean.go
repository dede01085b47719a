//go:build lean

package main

import "github.com/spf13/cobra"

// The lean build's stand-ins for the commands it does not link: each
// takes its arguments unparsed (so --help reaches the real command) and
// hands off to agentbox-full, as does `agentbox help CMD`.
func init() {
	handOff = execFull
	for _, c := range fullOnly {
		register(func() *cobra.Command {
			cmd := &cobra.Command{
				Use:                c.name,
				Short:              c.short,
				DisableFlagParsing: true,
				RunE: func(*cobra.Command, []string) error {
					return handOff(c.name)
				},
			}
			cmd.SetHelpFunc(func(*cobra.Command, []string) {
				if err := handOff(c.name); err != nil {
					fail(err)
				}
			})
			return cmd
		})
	}
}
