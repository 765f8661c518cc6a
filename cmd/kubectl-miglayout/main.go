// Command kubectl-miglayout is the kubectl plugin of miglayout
// (`kubectl miglayout ...`): it prints the MIG profile catalog and inspects
// layouts.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "kubectl-miglayout",
		Short:         "Inspect and plan MIG layouts managed by miglayout",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newProfilesCommand())
	return root
}
