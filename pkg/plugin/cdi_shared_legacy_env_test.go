package plugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOlderCDINameOfSharedDeviceNamesItsRequestsCommonDevices: the CDI
// device of the older naming (the shared device's own name) tells a
// container the devices allocated for every request the device was, not
// those of its first request alone: here "work" also holds MIG-b, which
// "watch" does not.
func TestOlderCDINameOfSharedDeviceNamesItsRequestsCommonDevices(t *testing.T) {
	pc := PreparedClaim{UID: uid1, Namespace: "team-a", Name: "monitor", Devices: []PreparedDevice{
		{Requests: []string{"work", "watch"}, Pool: node, Device: "gpu-0-mig-1g10gb-19-3", AdminAccess: true, UUID: "MIG-a",
			DeviceNodes: []string{"/dev/nvidia0"}},
		{Requests: []string{"work"}, Pool: node, Device: "gpu-0-mig-1g10gb-19-2", UUID: "MIG-b",
			DeviceNodes: []string{"/dev/nvidia0"}},
	}}
	spec, err := buildSpec("mig.miglayout.io", nil, pc, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string][]string{}
	for _, d := range spec.Devices {
		env[d.Name] = d.ContainerEdits.Env
	}
	shared := cdiDeviceName(uid1, "gpu-0-mig-1g10gb-19-3")
	want := map[string][]string{
		shared:            {VisibleDevicesEnv + "=MIG-a"},
		shared + "_work":  {VisibleDevicesEnv + "=MIG-a,MIG-b"},
		shared + "_watch": {VisibleDevicesEnv + "=MIG-a"},
		cdiDeviceName(uid1, "gpu-0-mig-1g10gb-19-2"): {VisibleDevicesEnv + "=MIG-a,MIG-b"},
	}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("NVIDIA_VISIBLE_DEVICES by CDI device (-want +got):\n%s", diff)
	}
}
