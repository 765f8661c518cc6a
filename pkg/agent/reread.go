package agent

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// LiveSpecs is a Repartitioner.Reread that gets the node's NodeMigLayout
// through reader (the manager's API reader: around the cache, which may not
// have seen a change just written). A NodeMigLayout that is gone asks for
// nothing: every GPU in flight counts as changed.
func LiveSpecs(reader client.Reader, node string) func(context.Context) ([]v1alpha1.GPUSpec, error) {
	return func(ctx context.Context) ([]v1alpha1.GPUSpec, error) {
		var nml v1alpha1.NodeMigLayout
		err := reader.Get(ctx, types.NamespacedName{Name: node}, &nml)
		switch {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("getting NodeMigLayout %s: %w", node, err)
		}
		return nml.Spec.GPUs, nil
	}
}
