// Package v1alpha1 holds the miglayout API: MigLayout (what an operator
// declares for a set of nodes) and NodeMigLayout (what the controller asks of
// one node's agent, and what the agent reports back).
//
// +kubebuilder:object:generate=true
// +groupName=miglayout.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "miglayout.io", Version: "v1alpha1"}
	// SchemeBuilder registers the types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
