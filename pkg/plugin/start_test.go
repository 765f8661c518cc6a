package plugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// TestHelperPublishesAfterStartContextEnds: the helper Start returns keeps
// publishing after the context it was started with ends (the agent's
// SIGTERM), for helperLinger: the pass the stop cut short republishes the
// pool from NVML through it, which a helper stopped with the context would
// queue and never write. After helperLinger it publishes no more.
func TestHelperPublishesAfterStartContextEnds(t *testing.T) {
	defer func(d time.Duration) { helperLinger = d }(helperLinger)
	helperLinger = 2 * time.Second
	e := newEnv(t)
	p := e.plugin("")
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h, _ := startHelper(t, ctx, p, kube)
	publish := func(n int) {
		t.Helper()
		var devs []resourceapi.Device
		for i := range n {
			devs = append(devs, resourceapi.Device{Name: "gpu-" + string(rune('0'+i))})
		}
		if err := h.PublishResources(context.Background(), resourceslice.DriverResources{
			Pools: map[string]resourceslice.Pool{node: {Slices: []resourceslice.Slice{{Devices: devs}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	// held reports whether the node's ResourceSlice comes to hold n
	// devices before the time given passes.
	held := func(n int, within time.Duration) (int, bool) {
		got := 0
		err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
			list, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
			if err != nil || len(list.Items) != 1 {
				return false, nil
			}
			got = len(list.Items[0].Spec.Devices)
			return got == n, nil
		})
		return got, err == nil
	}
	publish(1)
	if got, ok := held(1, 10*time.Second); !ok {
		t.Fatalf("the node's ResourceSlice holds %d devices, want 1", got)
	}
	cancel()
	// A helper stopped with ctx shuts its ResourceSlice controller's
	// queue down in the background: give it the time to, so that the
	// update below cannot slip in before.
	time.Sleep(500 * time.Millisecond)
	publish(2)
	if got, ok := held(2, helperLinger); !ok {
		t.Fatalf("after the start context ended: the node's ResourceSlice holds %d devices, want 2", got)
	}
	time.Sleep(helperLinger)
	publish(3)
	if got, ok := held(3, time.Second); ok {
		t.Errorf("helperLinger after the start context ended: the node's ResourceSlice holds %d devices, want the helper stopped", got)
	}
}

// startHelper starts p's kubeletplugin helper with a registrar directory
// and a plugin data directory of its own, which it returns the first of;
// the helper is stopped when the test ends.
func startHelper(t *testing.T, ctx context.Context, p *Plugin, kube kubernetes.Interface) (*kubeletplugin.Helper, string) {
	t.Helper()
	// Unix socket paths are short: not under the test's long temp dir.
	dir, err := os.MkdirTemp("", "mlplugin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	registry, data := filepath.Join(dir, "registry"), filepath.Join(dir, "plugin")
	for _, d := range []string{registry, data} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	h, err := p.Start(ctx, kube, kubeletplugin.RegistrarDirectoryPath(registry), kubeletplugin.PluginDataDirectoryPath(data))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	return h, registry
}
