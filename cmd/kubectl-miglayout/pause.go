package main

import (
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// newPauseCommand is `pause` (paused true) or `resume` (false): it sets
// spec.paused of the named MigLayouts with a merge patch.
func newPauseCommand(e *env, paused bool) *cobra.Command {
	use, short, long := "pause NAME...", "Stop MigLayouts from starting GPU changes (spec.paused: true)",
		`Set spec.paused on the named MigLayouts: the controller starts no change on
their nodes' GPUs (a change an agent has not started is dropped; one under way
finishes) until they are resumed. Rules may be edited meanwhile and checked
with "kubectl miglayout plan"; "kubectl miglayout resume" applies them.`
	if !paused {
		use, short, long = "resume NAME...", "Let paused MigLayouts start GPU changes again (spec.paused: false)",
			`Unset spec.paused on the named MigLayouts: their rules (or, in Auto mode,
the planner) take over from the layouts the GPUs have now.`
	}
	return &cobra.Command{
		Use: use, Short: short, Long: long,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"paused":%t}}`, paused))
			word := map[bool]string{true: "paused", false: "resumed"}[paused]
			for _, name := range args {
				var ml v1alpha1.MigLayout
				if err := c.Get(cmd.Context(), client.ObjectKey{Name: name}, &ml); apierrors.IsNotFound(err) {
					return fmt.Errorf("MigLayout %s not found", name)
				} else if err != nil {
					return fmt.Errorf("reading MigLayout %s: %w", name, err)
				}
				if ml.Spec.Paused == paused {
					state := map[bool]string{true: "is paused already", false: "is not paused"}[paused]
					fmt.Fprintf(cmd.OutOrStdout(), "miglayout %s %s\n", name, state)
					continue
				}
				if err := c.Patch(cmd.Context(), &ml, patch); err != nil {
					return fmt.Errorf("setting spec.paused of MigLayout %s: %w", name, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "miglayout %s %s\n", name, word)
			}
			return nil
		},
	}
}
