package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/hashicorp/go-multierror"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// newPauseCommand is `pause` (paused true) or `resume` (false): it sets
// spec.paused of the named MigLayouts, of all of them (--all) or of those
// whose labels match a selector (-l), with a merge patch.
func newPauseCommand(e *env, paused bool) *cobra.Command {
	use, short, long := "pause (NAME... | --all | -l SELECTOR)", "Stop MigLayouts from starting GPU changes (spec.paused: true)",
		`Set spec.paused on the named MigLayouts (--all: every MigLayout, as for an
incident or a maintenance window; -l: those whose labels match): the
controller starts no change on their nodes' GPUs (a change an agent has not
started is dropped; one under way finishes) until they are resumed. Rules
may be edited meanwhile and checked with
"kubectl get miglayout NAME -o yaml | kubectl miglayout plan -f -";
"kubectl miglayout resume" applies them.`
	if !paused {
		use, short, long = "resume (NAME... | --all | -l SELECTOR)", "Let paused MigLayouts start GPU changes again (removes spec.paused)",
			`Unset spec.paused on the named MigLayouts (--all: every MigLayout; -l:
those whose labels match): their rules (or, in Auto mode, the planner) take
over from the layouts the GPUs have now.`
	}
	var all bool
	var selector string
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long,
		RunE: func(cmd *cobra.Command, args []string) error {
			bySelector := cmd.Flags().Changed("selector")
			if n := len(args); (n > 0 && (all || bySelector)) || (all && bySelector) || (n == 0 && !all && !bySelector) {
				return errors.New("give MigLayout names, --all or -l SELECTOR (one of the three)")
			}
			var sel labels.Selector
			if bySelector {
				var err error
				if sel, err = labels.Parse(selector); err != nil {
					return fmt.Errorf("parsing -l %q: %w", selector, err)
				}
				if sel.Empty() {
					return fmt.Errorf("-l %q selects every MigLayout: use --all for that", selector)
				}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			mls, readErr := pauseTargets(cmd.Context(), c, args, all, sel)
			if len(mls) == 0 {
				if readErr != nil {
					return readErr
				}
				fmt.Fprintln(cmd.OutOrStdout(), map[bool]string{true: "no MigLayout found", false: "no MigLayout matches"}[all])
				return nil
			}
			// The MigLayouts read are acted on whatever became of the
			// others: a name mistyped in an incident does not leave the
			// rest unpaused.
			err = setPaused(cmd.Context(), c, cmd.OutOrStdout(), mls, paused)
			if readErr != nil {
				return multierror.Append(readErr, err).ErrorOrNil()
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every MigLayout")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "the MigLayouts whose labels match this selector (e.g. -l team=ml)")
	return cmd
}

// pausePatch is the merge patch that pauses (spec.paused: true) or resumes
// a MigLayout: a resume removes the field (null), so that the object reads
// as one never paused (a GitOps tool's copy, which does not set it, shows
// no difference).
func pausePatch(paused bool) client.Patch {
	if paused {
		return client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":true}}`))
	}
	return client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":null}}`))
}

// setPaused patches spec.paused of each of mls, printing one line per
// MigLayout (paused, resumed, or already so). A patch that fails does not
// stop the others (a fleet-wide pause in an incident pauses all it can):
// the errors, each naming its MigLayout, are returned together.
func setPaused(ctx context.Context, c client.Client, out io.Writer, mls []v1alpha1.MigLayout, paused bool) error {
	word := map[bool]string{true: "paused", false: "resumed"}[paused]
	var errs *multierror.Error
	for _, ml := range mls {
		if ml.Spec.Paused == paused {
			state := map[bool]string{true: "is paused already", false: "is not paused"}[paused]
			fmt.Fprintf(out, "miglayout %s %s\n", ml.Name, state)
			continue
		}
		if err := c.Patch(ctx, &ml, pausePatch(paused)); err != nil {
			errs = multierror.Append(errs, fmt.Errorf("setting spec.paused of MigLayout %s: %w", ml.Name, err))
			continue
		}
		if ml.Spec.Paused != paused {
			// The API server answered with the object as stored: a
			// MigLayout CRD older than spec.paused prunes the field
			// (Helm does not upgrade CRDs), and nothing is paused.
			errs = multierror.Append(errs, fmt.Errorf("setting spec.paused of MigLayout %s: the API server did not keep it, so the installed MigLayout CRD predates spec.paused; apply the chart's crds/ (kubectl apply --server-side --force-conflicts -f deploy/helm/miglayout/crds/)", ml.Name))
			continue
		}
		fmt.Fprintf(out, "miglayout %s %s\n", ml.Name, word)
	}
	return errs.ErrorOrNil()
}

// pauseTargets reads the MigLayouts a pause or resume acts on: those named
// (in the order given, each once; those that do not exist or cannot be
// read are returned in the error, each named, beside the others), or every
// one (all), or those whose labels match sel, in the API server's order
// (by name).
func pauseTargets(ctx context.Context, c client.Client, names []string, all bool, sel labels.Selector) ([]v1alpha1.MigLayout, error) {
	if all || sel != nil {
		var list v1alpha1.MigLayoutList
		var opts []client.ListOption
		if sel != nil {
			opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
		}
		if err := c.List(ctx, &list, opts...); err != nil {
			return nil, fmt.Errorf("listing MigLayouts: %w", err)
		}
		return list.Items, nil
	}
	out := make([]v1alpha1.MigLayout, 0, len(names))
	var errs *multierror.Error
	for i, name := range names {
		if slices.Contains(names[:i], name) {
			continue
		}
		var ml v1alpha1.MigLayout
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &ml); apierrors.IsNotFound(err) {
			errs = multierror.Append(errs, fmt.Errorf("MigLayout %s not found", name))
			continue
		} else if err != nil {
			errs = multierror.Append(errs, fmt.Errorf("reading MigLayout %s: %w", name, err))
			continue
		}
		out = append(out, ml)
	}
	return out, errs.ErrorOrNil()
}
