package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// DefaultTaintRulesPoll is how often a controller started on an API server
// that does not serve DeviceTaintRules looks again (AutoPlanner.TaintRulesPoll).
const DefaultTaintRulesPoll = time.Minute

// ErrDeviceTaintRulesServed ends the manager of a controller that started
// while the API server did not serve DeviceTaintRules (resource.k8s.io/v1,
// Kubernetes 1.37+) once it does: a watch is registered only at start, so
// the controller exits to be restarted, and then reads the rules, rather
// than plan on devices a rule takes out of scheduling.
var ErrDeviceTaintRulesServed = errors.New("the API server now serves DeviceTaintRules: restarting to watch them")

// taintRulesServed reports whether the API server lists DeviceTaintRules
// in resource.k8s.io/v1 discovery. A group version not served at all is
// false, not an error.
func taintRulesServed(d discovery.DiscoveryInterface) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(resourceapi.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the discovery of %s: %w", resourceapi.SchemeGroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Kind == "DeviceTaintRule" {
			return true, nil
		}
	}
	return false, nil
}

// awaitTaintRules asks served at once and then every interval until it
// reports true, then
// returns ErrDeviceTaintRulesServed; an error of served is logged and the
// next look is taken as usual. It returns nil when ctx ends.
func awaitTaintRules(ctx context.Context, every time.Duration, served func() (bool, error)) error {
	logger := klog.FromContext(ctx)
	// The first look at once: a replica that became leader after the
	// rules began to be served plans with them from its first pass.
	err := wait.PollUntilContextCancel(ctx, every, true, func(context.Context) (bool, error) {
		ok, err := served()
		if err != nil {
			logger.Error(err, "Looking for DeviceTaintRules")
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	logger.Info("The API server now serves DeviceTaintRules; restarting to watch them")
	return ErrDeviceTaintRulesServed
}

// taintRulesWatcher is the manager runnable (leader only) of a controller
// started without DeviceTaintRules.
func (a *AutoPlanner) taintRulesWatcher(d discovery.DiscoveryInterface) manager.Runnable {
	every := a.TaintRulesPoll
	if every <= 0 {
		every = DefaultTaintRulesPoll
	}
	return manager.RunnableFunc(func(ctx context.Context) error {
		return awaitTaintRules(ctx, every, func() (bool, error) { return taintRulesServed(d) })
	})
}
