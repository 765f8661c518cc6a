package agent

import (
	"context"
	"errors"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestLiveSpecsReadErrorIsNoDeletion: a read of the NodeMigLayout that fails
// (the API server unavailable) is an error, wrapping the read's, not a
// NodeMigLayout that is gone: the pass stops the GPU's change as a failure
// rather than taking it for a spec withdrawn.
func TestLiveSpecsReadErrorIsNoDeletion(t *testing.T) {
	scheme := testScheme(t)
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	unavailable := errors.New("the API server is unavailable")
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).Build(), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return unavailable
		},
	})
	got, err := LiveSpecs(c, "n1")(t.Context())
	if !errors.Is(err, unavailable) {
		t.Errorf("specs of n1 = %v, %v; want the read's error", got, err)
	}
}
