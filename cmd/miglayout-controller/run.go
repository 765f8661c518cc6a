package main

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/controller"
	"github.com/miglayout/miglayout/pkg/managerrun"
)

// Leader election uses coordination.k8s.io Leases, and records its
// leadership changes as core/v1 Events beside the Lease (controller-runtime's
// leader election still uses the core events API).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// run starts the manager with the MigLayout reconciler and the Auto planner
// and blocks until ctx ends.
func run(ctx context.Context, o *options) error {
	if err := o.validate(); err != nil {
		return err
	}
	managerrun.SetMemoryLimit(ctx)
	scheme, err := newScheme()
	if err != nil {
		return fmt.Errorf("building the scheme: %w", err)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, o.managerOptions(scheme))
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := checkServed(mgr.GetRESTMapper()); err != nil {
		return err
	}
	var leases *controller.AgentLeases
	if o.agentLeaseNamespace != "" {
		leases = &controller.AgentLeases{Namespace: o.agentLeaseNamespace}
		if err := leases.Start(ctx, mgr.GetCache()); err != nil {
			return err
		}
	}
	if err := (&controller.Reconciler{AgentLeases: leases}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the MigLayout reconciler: %w", err)
	}
	auto, err := o.autoPlanner(leases)
	if err != nil {
		return err
	}
	if err := auto.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the Auto planner: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("informer-cache", cacheSynced(mgr.GetCache())); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	if err := managerrun.Start(ctx, mgr, managerrun.StopWithin); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

// served are the kinds the controller reads and writes that a cluster may
// lack, by API version, with what serves them.
var served = []struct {
	gk      schema.GroupKind
	version string
	what    string
}{
	{schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceClaim"}, "v1", "Kubernetes 1.34 or later, with DRA"},
	{schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceSlice"}, "v1", "Kubernetes 1.34 or later, with DRA"},
	{schema.GroupKind{Group: v1alpha1.GroupVersion.Group, Kind: "MigLayout"}, v1alpha1.GroupVersion.Version, "the chart's crds/ applied"},
	{schema.GroupKind{Group: v1alpha1.GroupVersion.Group, Kind: "NodeMigLayout"}, v1alpha1.GroupVersion.Version, "the chart's crds/ applied"},
}

// checkServed fails, naming what is missing, where the API server does not
// serve a kind the controller needs: without it the manager's caches never
// sync and the process exits minutes later with "timed out waiting for
// cache to be synced", which says nothing of the cause.
func checkServed(mapper meta.RESTMapper) error {
	for _, k := range served {
		if _, err := mapper.RESTMapping(k.gk, k.version); err != nil {
			return fmt.Errorf("the API server does not serve %s %s/%s (needs %s): %w", k.gk.Kind, k.gk.Group, k.version, k.what, err)
		}
	}
	return nil
}
