package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestStaticEdgesExtendedResourceName: which resource names a DeviceClass
// may back, as the scheduler decides: a domain-qualified name outside the
// kubernetes.io domains, or an implicit deviceclass one; not a quota
// "requests." name, nor a kubernetes.io one.
func TestStaticEdgesExtendedResourceName(t *testing.T) {
	tests := map[string]bool{
		"example.com/gpu": true,
		"deviceclass.resource.kubernetes.io/mig-1g.10gb": true,
		"requests.example.com/gpu":                       false,
		"kubernetes.io/something":                        false,
		"cpu":                                            false,
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			if got := extendedResourceName(corev1.ResourceName(name)); got != want {
				t.Errorf("extendedResourceName(%q) = %t, want %t", name, got, want)
			}
		})
	}
}
