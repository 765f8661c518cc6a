package main

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

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
