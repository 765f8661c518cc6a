package fullstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	migslices "github.com/miglayout/miglayout/pkg/slices"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// Issue 5's seed walkthrough: what a user does with the devices miglayout publishes, on
// seed-a100 (2x A100: 3g.40gb x2 each) and seed-h100 (1x H100: 3g.40gb, 2g.20gb, 2x
// 1g.10gb), selected by MigLayout e2e-seed. Pods are pinned to those nodes.

const seedLayout = "e2e-seed"

var seedNodes = map[string]string{groupLabel: "seed"}

func setSeed(t *testing.T, ctx context.Context) {
	t.Helper()
	ml := env.SetStaticMigLayout(t, ctx, seedLayout, seedNodes, a100Halves, h100Mixed)
	env.WaitReady(t, ctx, ml, 2)
	env.WaitPoolMatchesNVML(t, ctx, seedA)
	env.WaitPoolMatchesNVML(t, ctx, seedH)
}

// lookupDevice returns a device of the node's pool.
func lookupDevice(t *testing.T, ctx context.Context, node, name string) resourceapi.Device {
	t.Helper()
	devs, err := env.PoolDevices(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := devs[name]
	if !ok {
		t.Fatalf("device %s not published by %s", name, node)
	}
	return d.Device
}

func TestSeedWalkthrough(t *testing.T) {
	ctx := clustertest.Context(t, 6*time.Minute)
	setSeed(t, ctx)

	t.Run("claim by memory, pod with resourceClaimName", func(t *testing.T) {
		ctx := clustertest.Context(t, 2*time.Minute)
		ns := env.NewNamespace(t, ctx, "seed-memory")
		claim := env.CreateClaim(t, ctx, ns, "big", `device.attributes['mig.miglayout.io'].memory >= 16000`)
		env.CreatePod(t, ctx, clustertest.Pod(ns, "big", seedNodes, claim.Name, ""))
		pod := env.WaitPodRunning(t, ctx, ns, "big", 60*time.Second)
		pool, dev, ok := clustertest.Allocated(env.GetClaim(t, ctx, ns, "big"))
		if !ok || pool != pod.Spec.NodeName {
			t.Fatalf("claim allocated %s/%s, pod on %s", pool, dev, pod.Spec.NodeName)
		}
		d := lookupDevice(t, ctx, pool, dev)
		if mem := *d.Attributes[migslices.AttrMemory].IntValue; mem < 16000 {
			t.Errorf("device %s has memory %d < 16000", dev, mem)
		}
		// The stand-in kubelet prepared it through the agent: a CDI spec names the device's
		// UUID, and the container's process runs on it in the simulator.
		uuid := *d.Attributes[migslices.AttrUUID].StringValue
		assertCDISpecNames(t, pool, uuid)
		if len(clustertest.ProcessesOn(env.Snapshot(t, pool), uuid)) == 0 {
			t.Errorf("no process on %s (%s)", dev, uuid)
		}
		t.Logf("claim big: %s/%s (%s)", pool, dev, uuid)
	})

	t.Run("claim by product name", func(t *testing.T) {
		ctx := clustertest.Context(t, 2*time.Minute)
		ns := env.NewNamespace(t, ctx, "seed-product")
		claim := env.CreateClaim(t, ctx, ns, "a100", `device.attributes['mig.miglayout.io'].productName.startsWith('NVIDIA A100')`)
		env.CreatePod(t, ctx, clustertest.Pod(ns, "a100", seedNodes, claim.Name, ""))
		pod := env.WaitPodRunning(t, ctx, ns, "a100", 60*time.Second)
		pool, dev, _ := clustertest.Allocated(env.GetClaim(t, ctx, ns, "a100"))
		if pool != seedA || pod.Spec.NodeName != seedA {
			t.Errorf("A100 claim allocated %s/%s, pod on %s; want %s", pool, dev, pod.Spec.NodeName, seedA)
		}
	})

	t.Run("pods from a ResourceClaimTemplate get their own claims", func(t *testing.T) {
		ctx := clustertest.Context(t, 2*time.Minute)
		ns := env.NewNamespace(t, ctx, "seed-template")
		_, err := env.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "one-mig"},
			Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: clustertest.ClaimSpec(`device.attributes['mig.miglayout.io'].profile == '3g.40gb'`)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claimOf := map[string]string{}
		devices := map[string]bool{}
		for _, name := range []string{"worker-0", "worker-1"} {
			env.CreatePod(t, ctx, clustertest.Pod(ns, name, seedNodes, "", "one-mig"))
		}
		for _, name := range []string{"worker-0", "worker-1"} {
			pod := env.WaitPodRunning(t, ctx, ns, name, 60*time.Second)
			if len(pod.Status.ResourceClaimStatuses) != 1 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
				t.Fatalf("pod %s: claim statuses %+v", name, pod.Status.ResourceClaimStatuses)
			}
			cn := *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
			c := env.GetClaim(t, ctx, ns, cn)
			if !metav1.IsControlledBy(c, pod) {
				t.Errorf("claim %s is not owned by pod %s", cn, name)
			}
			_, dev, _ := clustertest.Allocated(c)
			if devices[c.Status.Allocation.Devices.Results[0].Pool+"/"+dev] {
				t.Errorf("two pods got %s", dev)
			}
			devices[c.Status.Allocation.Devices.Results[0].Pool+"/"+dev] = true
			claimOf[name] = cn
		}
		// Each claim goes with its pod.
		for name, cn := range claimOf {
			if err := env.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			env.WaitPodGone(t, ctx, ns, name)
			clustertest.Poll(t, ctx, 60*time.Second, "claim "+cn+" deleted with its pod", func(ctx context.Context) (bool, string) {
				_, err := env.Client.ResourceV1().ResourceClaims(ns).Get(ctx, cn, metav1.GetOptions{})
				return apierrors.IsNotFound(err), fmt.Sprint(err)
			})
		}
	})

	t.Run("ResourceQuota refuses the fifth claim", func(t *testing.T) {
		ctx := clustertest.Context(t, 2*time.Minute)
		ns := env.NewNamespace(t, ctx, "seed-quota")
		_, err := env.Client.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "claims"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
				"count/resourceclaims.resource.k8s.io": resource.MustParse("4")}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Quota admission refuses everything until the quota controller has computed usage.
		clustertest.Poll(t, ctx, 60*time.Second, "the quota's status", func(ctx context.Context) (bool, string) {
			q, err := env.Client.CoreV1().ResourceQuotas(ns).Get(ctx, "claims", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			_, ok := q.Status.Hard["count/resourceclaims.resource.k8s.io"]
			return ok, fmt.Sprintf("%+v", q.Status)
		})
		for i := range 4 {
			env.CreateClaim(t, ctx, ns, fmt.Sprintf("c%d", i), "")
		}
		// The quota controller recomputes usage from its informers and may, while
		// they lag, write back a lower count than admission had reached; wait until
		// it has counted all four, as a user reading `kubectl describe quota` would.
		clustertest.Poll(t, ctx, 60*time.Second, "the quota to count 4 claims", func(ctx context.Context) (bool, string) {
			q, err := env.Client.CoreV1().ResourceQuotas(ns).Get(ctx, "claims", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			used := q.Status.Used["count/resourceclaims.resource.k8s.io"]
			return used.Value() == 4, fmt.Sprintf("used %s", used.String())
		})
		_, err = env.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "c4"}, Spec: clustertest.ClaimSpec("")}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
			t.Fatalf("fifth claim: got %v, want Forbidden: exceeded quota", err)
		}
		t.Logf("fifth claim refused: %v", err)
	})

	t.Run("a claim no device satisfies stays pending with the scheduler's reason", func(t *testing.T) {
		ctx := clustertest.Context(t, 2*time.Minute)
		ns := env.NewNamespace(t, ctx, "seed-pending")
		claim := env.CreateClaim(t, ctx, ns, "huge", `device.attributes['mig.miglayout.io'].memory >= 1000000`)
		env.CreatePod(t, ctx, clustertest.Pod(ns, "huge", seedNodes, claim.Name, ""))
		var msg string
		clustertest.Poll(t, ctx, 60*time.Second, "pod huge unschedulable", func(ctx context.Context) (bool, string) {
			p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "huge", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					msg = c.Message
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", p.Status.Conditions)
		})
		t.Logf("scheduler: %s", msg)
		if !strings.Contains(msg, "claim") {
			t.Errorf("the unschedulable message does not mention the claim: %q", msg)
		}
		clustertest.Poll(t, ctx, 30*time.Second, "a FailedScheduling event", func(ctx context.Context) (bool, string) {
			evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=huge,reason=FailedScheduling"})
			if err != nil {
				return false, err.Error()
			}
			return len(evs.Items) > 0, ""
		})
		time.Sleep(2 * time.Second)
		if c := env.GetClaim(t, ctx, ns, "huge"); c.Status.Allocation != nil {
			t.Errorf("claim huge got allocated: %+v", c.Status.Allocation)
		}
		if p, _ := env.Client.CoreV1().Pods(ns).Get(ctx, "huge", metav1.GetOptions{}); p.Spec.NodeName != "" {
			t.Errorf("pod huge bound to %s", p.Spec.NodeName)
		}
	})

	t.Run("unprepare on pod deletion frees the device for the next claim", func(t *testing.T) {
		ctx := clustertest.Context(t, 2*time.Minute)
		ns := env.NewNamespace(t, ctx, "seed-reuse")
		// The H100's only 3g.40gb.
		const sel = `device.attributes['mig.miglayout.io'].productName == 'NVIDIA H100 80GB HBM3' && device.attributes['mig.miglayout.io'].profile == '3g.40gb'`
		first := env.CreateClaim(t, ctx, ns, "first", sel)
		env.CreatePod(t, ctx, clustertest.Pod(ns, "first", clustertest.OnNode(seedH), first.Name, ""))
		env.WaitPodRunning(t, ctx, ns, "first", 60*time.Second)
		_, dev, _ := clustertest.Allocated(env.GetClaim(t, ctx, ns, "first"))
		uuid := clustertest.NVMLDevices(env.Snapshot(t, seedH))[dev]
		if len(clustertest.ProcessesOn(env.Snapshot(t, seedH), uuid)) == 0 {
			t.Fatalf("no process of pod first on %s", dev)
		}
		second := env.CreateClaim(t, ctx, ns, "second", sel)
		env.CreatePod(t, ctx, clustertest.Pod(ns, "second", clustertest.OnNode(seedH), second.Name, ""))
		clustertest.Poll(t, ctx, 60*time.Second, "pod second unschedulable while first holds the device", func(ctx context.Context) (bool, string) {
			p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "second", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", p.Status.Conditions)
		})

		// Deleting the first pod: the kubelet stops its process, unprepares the claim
		// (CDI spec removed) and lets the deletion complete; the claim controller releases
		// the claim; the scheduler gives the device to the second claim.
		if err := env.Client.CoreV1().Pods(ns).Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitPodGone(t, ctx, ns, "first")
		env.WaitPodRunning(t, ctx, ns, "second", 60*time.Second)
		if _, d, _ := clustertest.Allocated(env.GetClaim(t, ctx, ns, "second")); d != dev {
			t.Errorf("second claim got %s, want the freed %s", d, dev)
		}
		if c := env.GetClaim(t, ctx, ns, "first"); c.Status.Allocation != nil {
			t.Errorf("first claim still allocated after its pod is gone")
		}
		st := env.Snapshot(t, seedH)
		if ps := clustertest.ProcessesOn(st, uuid); len(ps) != 1 {
			t.Errorf("processes on %s: %+v, want only the second pod's", uuid, ps)
		}
		assertNoCDISpec(t, seedH, string(first.UID))
	})
}

// assertCDISpecNames checks that a CDI spec on the node sets NVIDIA_VISIBLE_DEVICES=uuid.
func assertCDISpecNames(t *testing.T, node, uuid string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(env.Cluster.CDIDir(node), "*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(data), "NVIDIA_VISIBLE_DEVICES="+uuid) {
			return
		}
	}
	t.Errorf("no CDI spec in %s sets NVIDIA_VISIBLE_DEVICES=%s (files %v)", env.Cluster.CDIDir(node), uuid, files)
}

func assertNoCDISpec(t *testing.T, node, claimUID string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(env.Cluster.CDIDir(node), "*"+claimUID+"*"))
	if len(files) > 0 {
		t.Errorf("CDI spec of the unprepared claim %s still there: %v", claimUID, files)
	}
}
