package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
)

func TestTaintRulesServed(t *testing.T) {
	for name, tc := range map[string]struct {
		resources []*metav1.APIResourceList
		want      bool
	}{
		"resource.k8s.io/v1 not served": {},
		"served without DeviceTaintRules": {resources: []*metav1.APIResourceList{{
			GroupVersion: "resource.k8s.io/v1",
			APIResources: []metav1.APIResource{{Name: "resourceslices", Kind: "ResourceSlice"}},
		}}},
		"DeviceTaintRules served": {resources: []*metav1.APIResourceList{{
			GroupVersion: "resource.k8s.io/v1",
			APIResources: []metav1.APIResource{{Name: "resourceslices", Kind: "ResourceSlice"}, {Name: "devicetaintrules", Kind: "DeviceTaintRule"}},
		}}, want: true},
		"only an older version serves them": {resources: []*metav1.APIResourceList{{
			GroupVersion: "resource.k8s.io/v1alpha3",
			APIResources: []metav1.APIResource{{Name: "devicetaintrules", Kind: "DeviceTaintRule"}},
		}}},
	} {
		t.Run(name, func(t *testing.T) {
			d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.resources}}
			got, err := taintRulesServed(d)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("served = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAwaitTaintRules(t *testing.T) {
	t.Run("ends the manager once served", func(t *testing.T) {
		answers := []error{nil, errors.New("discovery unavailable"), nil}
		looks := 0
		served := func() (bool, error) {
			looks++
			if looks <= len(answers) {
				return false, answers[looks-1]
			}
			return true, nil
		}
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		err := awaitTaintRules(ctx, time.Millisecond, served)
		if !errors.Is(err, ErrDeviceTaintRulesServed) {
			t.Fatalf("err = %v, want ErrDeviceTaintRulesServed", err)
		}
		if looks != len(answers)+1 {
			t.Errorf("looked %d times, want %d (an error does not end the wait)", looks, len(answers)+1)
		}
	})
	t.Run("returns nil when the context ends", func(t *testing.T) {
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		looks := 0
		err := awaitTaintRules(ctx, time.Millisecond, func() (bool, error) {
			looks++
			if looks == 3 {
				cancel()
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("err = %v, want nil", err)
		}
	})
}
