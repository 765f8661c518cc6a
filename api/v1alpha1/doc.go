// Package v1alpha1 holds the miglayout API: MigLayout (what an operator
// declares for a set of nodes) and NodeMigLayout (what the controller asks of
// one node's agent, and what the agent reports back).
//
// +kubebuilder:object:generate=true
// +groupName=miglayout.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "miglayout.io", Version: "v1alpha1"}
	// SchemeBuilder registers the types with a runtime.Scheme. It is
	// apimachinery's, so that importing the API pulls in no controller
	// framework.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers MigLayout, NodeMigLayout and their lists under
// GroupVersion, with the meta types (ListOptions, ...) of that version.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &MigLayout{}, &MigLayoutList{}, &NodeMigLayout{}, &NodeMigLayoutList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
