// Command kubectl-miglayout is the kubectl plugin of miglayout
// (`kubectl miglayout ...`): it prints the MIG profile catalog, shows and
// plans layouts, imports mig-parted configurations, converts workloads from
// device-plugin resources to DRA claims, and checks DRA manifests.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	err := newRootCommand().Execute()
	var code exitCode
	switch {
	case errors.As(err, &code):
		os.Exit(int(code)) // plan --exit-code: not an error, its output says why
	case err != nil:
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// exitCode is an error that only sets the process's exit status.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

func newRootCommand() *cobra.Command { return newRootCommandEnv(&env{}) }

// newRootCommandEnv builds the command tree; e carries the kubeconfig flags
// (or a client, in tests).
func newRootCommandEnv(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:           "kubectl-miglayout",
		Short:         "Inspect, plan and pause MIG layouts managed by miglayout",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	e.bindFlags(root)
	root.AddCommand(newProfilesCommand(), newStatusCommand(e), newPlanCommand(e), newImportCommand(e),
		newConvertCommand(e), newCheckCommand(e), newPauseCommand(e, true), newPauseCommand(e, false), newClearXidsCommand(e))
	return root
}
