package clustertest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// Rule is a layout rule: profile counts for every GPU of a product.
func Rule(name, product string, profiles map[string]int32) v1alpha1.LayoutRule {
	return v1alpha1.LayoutRule{Name: name, ProductName: product, Profiles: profiles}
}

// SetMigLayout creates the MigLayout or replaces its spec, and returns it with the new
// generation.
func (e *Env) SetMigLayout(t testing.TB, ctx context.Context, name string, spec v1alpha1.MigLayoutSpec) *v1alpha1.MigLayout {
	t.Helper()
	ml := &v1alpha1.MigLayout{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := e.CRC.Get(ctx, crclient.ObjectKey{Name: name}, ml)
		if apierrors.IsNotFound(err) {
			ml = &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
			return e.CRC.Create(ctx, ml)
		}
		if err != nil {
			return err
		}
		ml.Spec = spec
		return e.CRC.Update(ctx, ml)
	})
	if err != nil {
		t.Fatalf("setting MigLayout %s: %v", name, err)
	}
	t.Logf("MigLayout %s generation %d: mode %s %s", name, ml.Generation, spec.Mode, DescribeRules(spec.Rules))
	return ml
}

// SetStaticMigLayout is SetMigLayout with a Static spec: the rules, on the nodes with the
// selector's labels.
func (e *Env) SetStaticMigLayout(t testing.TB, ctx context.Context, name string, selector map[string]string, rules ...v1alpha1.LayoutRule) *v1alpha1.MigLayout {
	t.Helper()
	return e.SetMigLayout(t, ctx, name, v1alpha1.MigLayoutSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: selector},
		Mode:         v1alpha1.ModeStatic,
		Rules:        rules,
	})
}

// DescribeRules is a one-line form of rules for logs: "name[product]{profile:count,...} ...".
func DescribeRules(rules []v1alpha1.LayoutRule) string {
	var parts []string
	for _, r := range rules {
		keys := slices.Sorted(maps.Keys(r.Profiles))
		var ps []string
		for _, k := range keys {
			ps = append(ps, fmt.Sprintf("%s:%d", k, r.Profiles[k]))
		}
		parts = append(parts, fmt.Sprintf("%s[%s]{%s}", r.Name, r.ProductName, strings.Join(ps, ",")))
	}
	return strings.Join(parts, " ")
}

// DeleteMigLayout deletes the MigLayout (gone already is fine); an error fails the test
// but does not stop it, so it also serves in t.Cleanup.
func (e *Env) DeleteMigLayout(t testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := e.CRC.Delete(ctx, &v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting MigLayout %s: %v", name, err)
	}
}

// Condition is the condition of the type, or nil.
func Condition(conds []metav1.Condition, typ string) *metav1.Condition {
	return meta.FindStatusCondition(conds, typ)
}

// HasCondition reports whether the condition of the type has the status and, unless
// reason is "", the reason.
func HasCondition(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) bool {
	c := Condition(conds, typ)
	return c != nil && c.Status == status && (reason == "" || c.Reason == reason)
}

// ConditionsString is a one-line form of conditions for messages.
func ConditionsString(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

// WaitMigLayout waits until the MigLayout's status for the given generation (or a later
// one) satisfies ok, and returns it.
func (e *Env) WaitMigLayout(t testing.TB, ctx context.Context, name string, generation int64, timeout time.Duration, what string, ok func(*v1alpha1.MigLayout) bool) *v1alpha1.MigLayout {
	t.Helper()
	var ml v1alpha1.MigLayout
	Poll(t, ctx, timeout, fmt.Sprintf("MigLayout %s (generation %d): %s", name, generation, what), func(ctx context.Context) (bool, string) {
		if err := e.CRC.Get(ctx, crclient.ObjectKey{Name: name}, &ml); err != nil {
			return false, err.Error()
		}
		detail := fmt.Sprintf("observedGeneration %d, %s, nodes %+v", ml.Status.ObservedGeneration, ConditionsString(ml.Status.Conditions), ml.Status.Nodes)
		if a := ml.Status.Auto; a != nil {
			detail += fmt.Sprintf(", auto %+v", *a)
		}
		return ml.Status.ObservedGeneration >= generation && ok(&ml), detail
	})
	return &ml
}

// WaitReady waits (90s at most) until the status of the MigLayout's generation says
// Ready (AllNodesReady) with the given number of nodes selected and ready, and returns it.
func (e *Env) WaitReady(t testing.TB, ctx context.Context, ml *v1alpha1.MigLayout, nodes int) *v1alpha1.MigLayout {
	t.Helper()
	return e.WaitMigLayout(t, ctx, ml.Name, ml.Generation, 90*time.Second, "Ready", func(ml *v1alpha1.MigLayout) bool {
		return HasCondition(ml.Status.Conditions, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAllNodesReady) &&
			ml.Status.ReadyNodes == int32(nodes) && ml.Status.SelectedNodes == int32(nodes)
	})
}

// GetNodeMigLayout reads a node's NodeMigLayout.
func (e *Env) GetNodeMigLayout(t testing.TB, ctx context.Context, node string) *v1alpha1.NodeMigLayout {
	t.Helper()
	var nml v1alpha1.NodeMigLayout
	if err := e.CRC.Get(ctx, crclient.ObjectKey{Name: node}, &nml); err != nil {
		t.Fatalf("reading NodeMigLayout %s: %v", node, err)
	}
	return &nml
}
