package main

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2/ktesting"

	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
	"github.com/miglayout/miglayout/pkg/plugin"
)

// preparedWholeGPU is a kubelet plugin of node n1 (two simulated A100s,
// MIG off, listed through listing) that has prepared claim team-a/train
// for the whole GPU gpu-1.
func preparedWholeGPU(t *testing.T, ctx context.Context, listing *gpuListing) (*plugin.Plugin, *resourceapi.ResourceClaim) {
	t.Helper()
	_, m := gputest.Simulated(t, nvmlsim.Config{Spec: "2xA100-SXM4-80GB", Seed: "n1"})
	listing.Manager = m
	dir := t.TempDir()
	p, err := plugin.New(plugin.Config{NodeName: "n1", GPUs: listing, CDIDir: filepath.Join(dir, "cdi"),
		CheckpointDir: filepath.Join(dir, "plugin"), HostRoot: filepath.Join(dir, "host")})
	if err != nil {
		t.Fatal(err)
	}
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "1f0e9a3c-0000-4000-8000-000000000001"}}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: "mig.miglayout.io", Pool: "n1", Device: "gpu-1"}}}}
	res, err := p.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{c})
	if err != nil || res[c.UID].Err != nil {
		t.Fatalf("preparing %s: %v, %v", c.Name, err, res[c.UID].Err)
	}
	return p, c
}

// TestPreparedSetOfThePlugin: the agent sees the plugin's prepared devices
// and claims, and releases an orphaned claim's preparation through it,
// naming its devices, or keeps it where the claim is still there or cannot
// be checked.
func TestPreparedSetOfThePlugin(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p, c := preparedWholeGPU(t, ctx, &gpuListing{})
	s := preparedSet{p}
	if diff := cmp.Diff(sets.New("gpu-1"), s.PreparedDevices()); diff != "" {
		t.Errorf("prepared devices (-want +got):\n%s", diff)
	}
	wantRefs := []kubeletplugin.NamespacedObject{{UID: c.UID, NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "train"}}}
	if diff := cmp.Diff(wantRefs, s.PreparedClaimRefs()); diff != "" {
		t.Errorf("prepared claims (-want +got):\n%s", diff)
	}

	type release struct {
		Devices  []string
		Released bool
		Err      string
	}
	unreadable := errors.New("API server unreachable")
	for _, step := range []struct {
		name      string
		stillGone func(context.Context) (bool, error)
		want      release
	}{
		{"claim still there", func(context.Context) (bool, error) { return false, nil }, release{[]string{"gpu-1"}, false, ""}},
		{"claim not checkable", func(context.Context) (bool, error) { return false, unreadable }, release{[]string{"gpu-1"}, false, unreadable.Error()}},
		{"claim gone", func(context.Context) (bool, error) { return true, nil }, release{[]string{"gpu-1"}, true, ""}},
		{"released already", func(context.Context) (bool, error) { return true, nil }, release{nil, false, ""}},
	} {
		devices, released, err := s.ReleaseOrphan(ctx, c.UID, step.stillGone)
		got := release{devices, released, ""}
		if err != nil {
			got.Err = unreadable.Error()
			if !errors.Is(err, unreadable) {
				got.Err = err.Error()
			}
		}
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("%s: ReleaseOrphan (-want +got):\n%s", step.name, diff)
		}
	}
	if got := s.PreparedDevices(); got.Len() != 0 {
		t.Errorf("prepared devices after the release: %v", sets.List(got))
	}
}

// TestPreparedSetRefreshFailure: a prepared claim whose devices cannot be
// checked again (its GPU not readable) is reported by the plugin's refresh.
func TestPreparedSetRefreshFailure(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	listing := &gpuListing{}
	p, c := preparedWholeGPU(t, ctx, listing)
	s := preparedSet{p}
	if failed := s.RefreshRecreated(ctx); len(failed) != 0 {
		t.Fatalf("refresh with GPUs readable: %v", failed)
	}
	listing.err = errors.New("driver version not readable")
	failed := s.RefreshRecreated(ctx)
	if _, ok := failed[c.UID]; !ok || len(failed) != 1 {
		t.Errorf("refresh with no GPU readable: %v, want claim %s failed", failed, c.UID)
	}
}
