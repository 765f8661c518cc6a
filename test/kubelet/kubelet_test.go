package kubelet

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// visibleDevices reads NVIDIA_VISIBLE_DEVICES from the CDI devices, as a container
// runtime would apply them.
func TestVisibleDevices(t *testing.T) {
	dir := t.TempDir()
	spec := `{"cdiVersion": "0.5.0", "kind": "k8s.mig.miglayout.io/claim",
  "containerEdits": {"deviceNodes": [{"path": "/dev/nvidiactl"}]},
  "devices": [
    {"name": "uid1-gpu-0-mig-3g40gb-9-0", "containerEdits": {"env": ["NVIDIA_VISIBLE_DEVICES=MIG-aaa"], "deviceNodes": [{"path": "/dev/nvidia0"}]}},
    {"name": "uid1-gpu-1", "containerEdits": {"env": ["OTHER=1", "NVIDIA_VISIBLE_DEVICES=GPU-bbb"]}}
  ]}`
	if err := os.WriteFile(filepath.Join(dir, "k8s.mig.miglayout.io-claim_uid1.json"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	k := &Kubelet{cfg: Config{CDIDir: dir}}
	got, err := k.visibleDevices([]string{"k8s.mig.miglayout.io/claim=uid1-gpu-0-mig-3g40gb-9-0", "k8s.mig.miglayout.io/claim=uid1-gpu-1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"MIG-aaa", "GPU-bbb"}; !reflect.DeepEqual(got, want) {
		t.Errorf("visible devices %v, want %v", got, want)
	}
	if _, err := k.visibleDevices([]string{"k8s.mig.miglayout.io/claim=missing"}); err == nil {
		t.Error("an unknown CDI device gave no error")
	}

	// With device list mounts, the mounts name the devices (the toolkit reads them
	// first), whatever the variable says.
	mounted := `{"cdiVersion": "0.5.0", "kind": "k8s.mig.miglayout.io/claim",
  "devices": [
    {"name": "uid2-a", "containerEdits": {"env": ["NVIDIA_VISIBLE_DEVICES=MIG-ccc,MIG-ddd"],
      "mounts": [{"hostPath": "/dev/null", "containerPath": "/var/run/nvidia-container-devices/MIG-ccc"}]}},
    {"name": "uid2-b", "containerEdits": {"env": ["NVIDIA_VISIBLE_DEVICES=MIG-ccc,MIG-ddd"],
      "mounts": [{"hostPath": "/dev/null", "containerPath": "/var/run/nvidia-container-devices/MIG-ddd"},
                 {"hostPath": "/tmp/x", "containerPath": "/var/run/nvidia-container-devices/MIG-eee"}]}}
  ]}`
	if err := os.WriteFile(filepath.Join(dir, "k8s.mig.miglayout.io-claim_uid2.json"), []byte(mounted), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = k.visibleDevices([]string{"k8s.mig.miglayout.io/claim=uid2-a"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"MIG-ccc"}; !reflect.DeepEqual(got, want) {
		t.Errorf("visible devices with mounts %v, want %v", got, want)
	}
}

func TestSetCondition(t *testing.T) {
	s := &corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse}}}
	setCondition(s, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	setCondition(s, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue})
	if len(s.Conditions) != 3 || s.Conditions[1].Status != corev1.ConditionTrue || s.Conditions[2].Type != corev1.ContainersReady {
		t.Errorf("conditions %+v", s.Conditions)
	}
}
