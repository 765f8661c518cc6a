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
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// TestHelperPublishesAfterStartContextEnds: the helper Start returns keeps
// publishing after the context it was started with ends (the agent's
// SIGTERM), until Stop: the pass the stop cut short republishes the pool
// from NVML through it, which a helper stopped with the context would
// queue and never write.
func TestHelperPublishesAfterStartContextEnds(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	// Unix socket paths are short: not under the test's long temp dir.
	dir, err := os.MkdirTemp("", "mlplugin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	for _, d := range []string{"registry", "plugin"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h, err := p.Start(ctx, kube, kubeletplugin.RegistrarDirectoryPath(filepath.Join(dir, "registry")),
		kubeletplugin.PluginDataDirectoryPath(filepath.Join(dir, "plugin")))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	published := func(n int) {
		t.Helper()
		var devs []resourceapi.Device
		for i := range n {
			devs = append(devs, resourceapi.Device{Name: "gpu-" + string(rune('0'+i))})
		}
		if err := h.PublishResources(context.Background(), resourceslice.DriverResources{
			Pools: map[string]resourceslice.Pool{node: {Slices: []resourceslice.Slice{{Devices: devs}}}}}); err != nil {
			t.Fatal(err)
		}
		got := 0
		err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
			if err != nil || len(list.Items) != 1 {
				return false, nil
			}
			got = len(list.Items[0].Spec.Devices)
			return got == n, nil
		})
		if err != nil {
			t.Fatalf("the node's ResourceSlice holds %d devices, want %d", got, n)
		}
	}
	published(1)
	cancel()
	// A helper stopped with ctx shuts its ResourceSlice controller's
	// queue down in the background: give it the time to, so that the
	// update below cannot slip in before.
	time.Sleep(500 * time.Millisecond)
	published(2)
}
