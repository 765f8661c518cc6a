package helm

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// TestAgentSeesTheNodesGPUProcesses: the agent refuses to destroy a MIG
// device, or to turn MIG mode on for a GPU, while a process runs on it
// (Repartitioner.inUse: nvmlDeviceGetComputeRunningProcesses on the GPU and
// on each MIG device). The NVIDIA kernel driver reports a GPU client's PID
// only to a caller whose PID namespace holds that process
// (open-gpu-kernel-modules gpuGetProcWithObject -> _gpuConvertPid ->
// os_find_ns_pid: pid_vnr() == 0 gives NV_ERR_OBJECT_NOT_FOUND and the
// client is skipped). In its own PID namespace the agent sees no process
// of any workload pod nor of the host: every GPU looks idle, and the
// checks never block. NVIDIA's MIG manager runs with hostPID for the same
// reason. With real NVML the agent pod must share the host's PID namespace;
// the simulator needs no such thing.
func TestAgentSeesTheNodesGPUProcesses(t *testing.T) {
	ds := convert[appsv1.DaemonSet](t, find(t, render(t, nil), "DaemonSet", "miglayout-agent"))
	if !ds.Spec.Template.Spec.HostPID {
		t.Error("the agent pod (real NVML) does not set hostPID: NVML lists no process outside the agent's own PID namespace, so the in-use checks on GPUs and MIG devices see none")
	}
	sim := convert[appsv1.DaemonSet](t, find(t, render(t, map[string]any{"agent": map[string]any{
		"privileged": false, "simulate": "2xA100-SXM4-80GB"}}), "DaemonSet", "miglayout-agent"))
	if sim.Spec.Template.Spec.HostPID {
		t.Error("the simulated agent shares the host's PID namespace: the NVML simulator needs no host process")
	}
}

// TestAgentSeesDriverRootMountedLater: a driver root another pod mounts
// (the GPU Operator's /run/nvidia/driver) reaches the agent's container
// even when mounted after the agent started (HostToContainer propagation);
// the host's own root is mounted so too, so that an unmount on the host
// (another pod's volume) is one in the agent's container as well.
func TestAgentSeesDriverRootMountedLater(t *testing.T) {
	propagation := func(values map[string]any) *corev1.MountPropagationMode {
		ds := convert[appsv1.DaemonSet](t, find(t, render(t, values), "DaemonSet", "miglayout-agent"))
		for _, m := range ds.Spec.Template.Spec.Containers[0].VolumeMounts {
			if m.Name == "driver-root" {
				return m.MountPropagation
			}
		}
		t.Fatal("the agent mounts no driver root")
		return nil
	}
	if p := propagation(map[string]any{"agent": map[string]any{"nvidiaDriverRoot": "/run/nvidia/driver"}}); p == nil || *p != corev1.MountPropagationHostToContainer {
		t.Errorf("driver root /run/nvidia/driver mounted with propagation %v, want HostToContainer", p)
	}
	if p := propagation(nil); p == nil || *p != corev1.MountPropagationHostToContainer {
		t.Errorf("the host's root (/) mounted with propagation %v, want HostToContainer (the host's unmounts of other pods' volumes must reach the agent)", p)
	}
}

// TestAgentNamesContainerisedDriverRoot: the agent is told the driver
// root's host path, so that device nodes a containerised driver makes in
// its own /dev are named by their host path in CDI specs.
func TestAgentNamesContainerisedDriverRoot(t *testing.T) {
	ds := convert[appsv1.DaemonSet](t, find(t, render(t, map[string]any{"agent": map[string]any{"nvidiaDriverRoot": "/run/nvidia/driver"}}),
		"DaemonSet", "miglayout-agent"))
	if args := ds.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--host-nvidia-driver-root=/run/nvidia/driver") {
		t.Errorf("agent args %q, want --host-nvidia-driver-root=/run/nvidia/driver", args)
	}
}

// TestAgentToleratesEveryTaint: the agent is the DRA kubelet plugin of the
// devices pods on its node hold; kubelet needs it to unprepare their claims
// when they end. No taint may keep it off (NoSchedule) or evict it
// (NoExecute) from a node its nodeSelector picks: by default it tolerates
// every taint.
func TestAgentToleratesEveryTaint(t *testing.T) {
	ds := convert[appsv1.DaemonSet](t, find(t, render(t, nil), "DaemonSet", "miglayout-agent"))
	for _, taint := range []corev1.Taint{
		{Key: "node.kubernetes.io/maintenance", Effect: corev1.TaintEffectNoExecute},
		{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
		{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule},
	} {
		tolerated := slices.ContainsFunc(ds.Spec.Template.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), &taint, false) })
		if !tolerated {
			t.Errorf("the agent does not tolerate taint %s=%s:%s", taint.Key, taint.Value, taint.Effect)
		}
	}
}

// TestAgentShutsDownBeforeKill: the agent's manager gives a pass in flight
// 30 s (controller-runtime's graceful shutdown) and then closes the kubelet
// plugin and NVML; the pod's grace period is longer, so that this ends
// before the kubelet's SIGKILL.
func TestAgentShutsDownBeforeKill(t *testing.T) {
	ds := convert[appsv1.DaemonSet](t, find(t, render(t, nil), "DaemonSet", "miglayout-agent"))
	if g := ds.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g <= 30 {
		t.Errorf("the agent pod's termination grace period is %v s, want more than its 30 s shutdown", g)
	}
}

// TestAgentUpdateStrategy: the DaemonSet carries the strategy asked for;
// with OnDelete it has no rollingUpdate, which the API server refuses beside
// it (the default values carry one, and Helm merges user values into them).
func TestAgentUpdateStrategy(t *testing.T) {
	tests := map[string]struct {
		values map[string]any
		want   appsv1.DaemonSetUpdateStrategy
	}{
		"default": {
			want: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
		},
		"OnDelete": {
			values: map[string]any{"agent": map[string]any{"updateStrategy": map[string]any{"type": "OnDelete"}}},
			want:   appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
		},
		"RollingUpdate by percentage": {
			values: map[string]any{"agent": map[string]any{"updateStrategy": map[string]any{"rollingUpdate": map[string]any{"maxUnavailable": "20%"}}}},
			want: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromString("20%"))}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := convert[appsv1.DaemonSet](t, find(t, render(t, tc.values), "DaemonSet", "miglayout-agent"))
			if diff := cmp.Diff(tc.want, ds.Spec.UpdateStrategy); diff != "" {
				t.Errorf("updateStrategy (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAgentHostPathsRenderAsGiven: host paths reach the DaemonSet as given,
// also where YAML would read part of them otherwise (" #" starts a
// comment).
func TestAgentHostPathsRenderAsGiven(t *testing.T) {
	const state, driverRoot = "/var/lib/miglayout #2", "/run/nvidia driver"
	ds := convert[appsv1.DaemonSet](t, find(t, render(t, map[string]any{"agent": map[string]any{
		"nvidiaDriverRoot": driverRoot, "hostPaths": map[string]any{"state": state}}}), "DaemonSet", "miglayout-agent"))
	paths := map[string]bool{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			paths[v.HostPath.Path] = true
		}
	}
	for _, want := range []string{state, driverRoot} {
		if !paths[want] {
			t.Errorf("no hostPath volume %q among %v", want, paths)
		}
	}
	if args := ds.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--state-dir="+state) {
		t.Errorf("agent args %q lack --state-dir=%s", args, state)
	}
}
