package plugin

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	goslices "slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdiparser "tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/google/renameio/v2"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// CDIClass is the class of the CDI devices the plugin writes; the vendor is
// "k8s.<driver name>" (e.g. "k8s.mig.miglayout.io", "k8s.gpu.nvidia.com"), so
// that the kind never clashes with the node's static NVIDIA CDI specs.
const CDIClass = "claim"

// VisibleDevicesEnv is the environment variable naming the device to the
// NVIDIA container stack.
const VisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"

// DeviceListMountRoot is where the NVIDIA container toolkit reads a
// container's device list from volume mounts: /dev/null mounted at
// <root>/<UUID> names one GPU or MIG device (the toolkit's
// accept-nvidia-visible-devices-as-volume-mounts, the list NVIDIA's device
// plugin hands out with its volume-mounts strategy). Every CDI device the
// plugin writes carries its device's mount beside NVIDIA_VISIBLE_DEVICES:
// a runtime that accepts the mounts reads them first, so a container gets
// the devices of every CDI device it was given (the mounts add up, where a
// later value of the variable replaces an earlier one), and a runtime set
// to ignore the variable in unprivileged containers
// (accept-nvidia-visible-devices-envvar-when-unprivileged = false) gives no
// GPU to a container that only sets the variable itself, as images built
// on nvidia/cuda do (NVIDIA_VISIBLE_DEVICES=all).
const DeviceListMountRoot = "/var/run/nvidia-container-devices"

// requiredControlNodes are the driver's control device nodes every GPU
// container needs (the CDI spec's claim-wide edits): a prepare fails where
// one is missing (ensureDeviceNodes).
var requiredControlNodes = []string{"/dev/nvidiactl", "/dev/nvidia-uvm"}

// optionalControlNodes are control device nodes a container gets where the
// host has them, as the NVIDIA container toolkit's CDI specs do:
// /dev/nvidia-uvm-tools (CUDA profiling tools; nvidia-modprobe makes it with
// /dev/nvidia-uvm, and so does a prepare where the driver lets user space
// make its device files, ensureUVMNodes; a host that keeps its device files
// may lack it).
var optionalControlNodes = []string{"/dev/nvidia-uvm-tools"}

func cdiVendor(driverName string) string { return "k8s." + driverName }

// cdiDeviceName is the CDI device name of one device of a claim: the claim UID
// keeps names unique over time (runtimes may cache specs, so a name is never
// reused for another claim).
func cdiDeviceName(claimUID types.UID, device string) string { return string(claimUID) + "-" + device }

// specName is the CDI spec file name of a claim.
func specName(driverName string, claimUID types.UID) string {
	return cdiapi.GenerateTransientSpecName(cdiVendor(driverName), CDIClass, string(claimUID)) + ".json"
}

// cdiDeviceID is the fully qualified CDI device name the kubelet passes on.
func cdiDeviceID(driverName string, claimUID types.UID, device string) string {
	return cdiparser.QualifiedName(cdiVendor(driverName), CDIClass, cdiDeviceName(claimUID, device))
}

// buildSpec is the CDI spec of a prepared claim, from its checkpoint record
// and the control device nodes the host has (control, Plugin.controlNodes):
// those for all of the claim's containers, and per device and request its
// own device nodes, its device list mount and NVIDIA_VISIBLE_DEVICES. A
// device node's host path is hostPathOf(its path), where that is not ""
// (a node in the device directory of a driver installed in a container).
//
// NVIDIA_VISIBLE_DEVICES of a CDI device lists the UUIDs of every device of
// the claim allocated for the same request (in allocation order), so a
// container given a request of count > 1 names all of its devices: CDI
// applies device edits in order and a later value of a variable replaces an
// earlier one, and every CDI device of a request carries the same value. A
// device several requests share (admin access) has one CDI device per
// request (requestCDIName), each with its request's list, so a container
// naming one request is told exactly that request's devices, and also one
// of its own name alone (as older versions answered; the kubelet may hold
// it for a running pod). A container
// given several requests (a whole claim of several requests, or several
// claims) gets all their device nodes and device list mounts
// (DeviceListMountRoot), but the variable of the last request applied: a
// runtime that reads the variable alone tells it that request's devices
// only.
func buildSpec(driverName string, control []string, c PreparedClaim, hostPathOf func(string) string) (*cdispec.Spec, error) {
	spec := &cdispec.Spec{
		Kind: cdiVendor(driverName) + "/" + CDIClass,
		ContainerEdits: cdispec.ContainerEdits{
			DeviceNodes: deviceNodes(control, hostPathOf),
		},
	}
	visible := visibleDevices(c.Devices)
	for _, d := range c.Devices {
		name := cdiDeviceName(c.UID, d.Device)
		reqs := parentRequests(d)
		for _, r := range reqs {
			spec.Devices = append(spec.Devices, cdispec.Device{
				Name: requestCDIName(name, d, r),
				ContainerEdits: cdispec.ContainerEdits{
					Env:         []string{VisibleDevicesEnv + "=" + visible[r]},
					DeviceNodes: deviceNodes(d.DeviceNodes, hostPathOf),
					Mounts:      []*cdispec.Mount{deviceListMount(d.UUID)},
				},
			})
		}
		if len(reqs) > 1 {
			// The name a prepare answered before shared devices got one
			// CDI device per request: the kubelet keeps the IDs of its
			// answer for a running pod, and does not ask again (an
			// agent upgraded meanwhile rewrites the spec), so a
			// container restarting must still resolve it. Its variable
			// names the devices allocated for every request d was.
			spec.Devices = append(spec.Devices, cdispec.Device{
				Name: name,
				ContainerEdits: cdispec.ContainerEdits{
					Env:         []string{VisibleDevicesEnv + "=" + visibleForAll(c.Devices, reqs)},
					DeviceNodes: deviceNodes(d.DeviceNodes, hostPathOf),
					Mounts:      []*cdispec.Mount{deviceListMount(d.UUID)},
				},
			})
		}
	}
	v, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		return nil, fmt.Errorf("building CDI spec of claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	spec.Version = v
	return spec, nil
}

// parentRequests returns the distinct requests d was allocated for, in the
// order of d.Requests: the parent of a subrequest ("gpu/large" is request
// "gpu", resourceclaim.BaseRequestRef), since pod containers reference
// requests, never subrequests.
func parentRequests(d PreparedDevice) []string {
	var out []string
	for _, r := range d.Requests {
		if p := resourceclaim.BaseRequestRef(r); !goslices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// requestCDIName is the CDI device name (or fully qualified CDI device ID) of
// device d for parent request r, given name, d's own: name itself for a
// device of one request, name + "_" + r for a device several requests share
// ("_" is in no DNS label, so the name never equals another device's).
func requestCDIName(name string, d PreparedDevice, r string) string {
	if len(parentRequests(d)) < 2 {
		return name
	}
	return name + "_" + r
}

// visibleDevices is NVIDIA_VISIBLE_DEVICES of each parent request: the
// comma-separated UUIDs, in allocation order, of the claim's devices
// allocated for it. A container gets the devices of the requests it names
// only, so the variable never names a device of a request the container
// does not name.
func visibleDevices(devices []PreparedDevice) map[string]string {
	uuids := map[string][]string{}
	for _, d := range devices {
		for _, r := range parentRequests(d) {
			uuids[r] = append(uuids[r], d.UUID)
		}
	}
	out := make(map[string]string, len(uuids))
	for r, u := range uuids {
		out[r] = strings.Join(u, ",")
	}
	return out
}

// visibleForAll is the comma-separated UUIDs, in allocation order, of the
// devices allocated for every one of reqs (parent requests).
func visibleForAll(devices []PreparedDevice, reqs []string) string {
	var uuids []string
	for _, d := range devices {
		if own := parentRequests(d); !goslices.ContainsFunc(reqs, func(r string) bool { return !goslices.Contains(own, r) }) {
			uuids = append(uuids, d.UUID)
		}
	}
	return strings.Join(uuids, ",")
}

// deviceListMount is the mount naming the device of NVML UUID uuid
// ("MIG-<uuid>" or "GPU-<uuid>") to the NVIDIA container toolkit: /dev/null,
// read-only, at DeviceListMountRoot/<uuid>.
func deviceListMount(uuid string) *cdispec.Mount {
	return &cdispec.Mount{
		HostPath:      "/dev/null",
		ContainerPath: DeviceListMountRoot + "/" + uuid,
		Options:       []string{"ro", "nosuid", "nodev", "bind"},
	}
}

// deviceNodes are the CDI device nodes of paths (in the container and, where
// hostPathOf gives none, on the host); hostPathOf may be nil.
func deviceNodes(paths []string, hostPathOf func(string) string) []*cdispec.DeviceNode {
	out := make([]*cdispec.DeviceNode, len(paths))
	for i, p := range paths {
		out[i] = &cdispec.DeviceNode{Path: p}
		if hostPathOf != nil {
			out[i].HostPath = hostPathOf(p)
		}
	}
	return out
}

// ownDeviceNodes returns the device nodes of one device: /dev/nvidia<minor>
// of the GPU and, for a MIG device, the /dev/nvidia-caps nodes that grant
// access to its GPU instance and compute instance, whose minors the driver
// publishes in
// <hostRoot>/proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<GI>/access and
// .../gi<GI>/ci<CI>/access.
func ownDeviceNodes(hostRoot string, src slices.Source) ([]string, error) {
	nodes := []string{gpuDeviceNode(src.GPU.Minor)}
	if src.MIG == nil {
		return nodes, nil
	}
	gi := capabilityPath(hostRoot, src.GPU.Minor, src.MIG.GIID, -1)
	ci := capabilityPath(hostRoot, src.GPU.Minor, src.MIG.GIID, src.MIG.CIID)
	for _, p := range []string{gi, ci} {
		minor, err := readCapabilityMinor(p)
		if err != nil {
			return nil, fmt.Errorf("reading MIG capability of %s (GI %d, CI %d): %w", src.Name, src.MIG.GIID, src.MIG.CIID, err)
		}
		nodes = append(nodes, capabilityNode(minor))
	}
	return nodes, nil
}

// gpuDeviceNode is the device node of the GPU with the given device minor.
func gpuDeviceNode(minor int) string { return fmt.Sprintf("/dev/nvidia%d", minor) }

// capabilityPath is the access file of GI giID (ciID < 0) or of its CI ciID on
// the GPU with the given minor.
func capabilityPath(hostRoot string, gpuMinor, giID, ciID int) string {
	p := filepath.Join(hostRoot, "proc/driver/nvidia/capabilities", fmt.Sprintf("gpu%d", gpuMinor), "mig", fmt.Sprintf("gi%d", giID))
	if ciID >= 0 {
		p = filepath.Join(p, fmt.Sprintf("ci%d", ciID))
	}
	return filepath.Join(p, "access")
}

// readCapabilityMinor reads the "DeviceFileMinor: N" line of a capability
// file.
func readCapabilityMinor(path string) (int, error) {
	c, err := readCapability(path)
	return c.minor, err
}

// capability is what a capability access file of the NVIDIA driver says of
// the /dev/nvidia-caps node that grants it.
type capability struct {
	minor int
	// mode is DeviceFileMode (given in decimal: 292 is 0444); 0444 when the
	// file has none.
	mode os.FileMode
	// keep is DeviceFileModify: 0, the driver's NVreg_ModifyDeviceFiles=0:
	// the host makes and owns its NVIDIA device files, so the node is
	// neither made nor changed (as nvidia-modprobe leaves it).
	keep bool
}

// readCapability reads a capability access file: "DeviceFileMinor: N"
// (required), "DeviceFileMode: M" and "DeviceFileModify: 0|1" (optional)
// lines.
func readCapability(path string) (capability, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return capability{}, err
	}
	c := capability{minor: -1, mode: 0o444}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "DeviceFileMinor":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return capability{}, fmt.Errorf("parsing %s: DeviceFileMinor %q is not a number", path, val)
			}
			c.minor = n
		case "DeviceFileMode":
			n, err := strconv.ParseUint(val, 10, 32)
			if err != nil || n > 0o777 {
				return capability{}, fmt.Errorf("parsing %s: DeviceFileMode %q is not a permission mode", path, val)
			}
			c.mode = os.FileMode(n)
		case "DeviceFileModify":
			c.keep = val == "0"
		}
	}
	if c.minor < 0 {
		return capability{}, fmt.Errorf("parsing %s: no DeviceFileMinor line", path)
	}
	return c, nil
}

// MIGCapabilityMinors returns the /dev/nvidia-caps minors the NVIDIA driver
// gives the access capabilities of GPU instance giID and of its compute
// instance ciID on the GPU with the given minor, following the layout of
// /proc/driver/nvidia-caps/mig-minors: minors 1 and 2 are "config" and
// "monitor", then per GPU 15 GPU instances of 9 minors each (the GI's access
// file, then CIs 0..7).
func MIGCapabilityMinors(gpuMinor, giID, ciID int) (gi, ci int) {
	gi = 3 + gpuMinor*15*9 + giID*9
	return gi, gi + 1 + ciID
}

// WriteFakeCapabilities writes, under hostRoot, the capability access files
// the NVIDIA driver would have for MIG device d on a GPU with the given
// minor, with the minors of MIGCapabilityMinors: for tests and simulated
// nodes, whose /proc has none.
func WriteFakeCapabilities(hostRoot string, gpuMinor int, d gpu.MIGDevice) error {
	giMinor, ciMinor := MIGCapabilityMinors(gpuMinor, d.GIID, d.CIID)
	for _, f := range []struct {
		path  string
		minor int
	}{
		{capabilityPath(hostRoot, gpuMinor, d.GIID, -1), giMinor},
		{capabilityPath(hostRoot, gpuMinor, d.GIID, d.CIID), ciMinor},
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			return fmt.Errorf("writing fake capability: %w", err)
		}
		content := []byte(fmt.Sprintf("DeviceFileMinor: %d\nDeviceFileMode: 292\nDeviceFileModify: 1\n", f.minor))
		if old, err := os.ReadFile(f.path); err == nil && bytes.Equal(old, content) {
			continue
		}
		// Replaced whole (renamed over): a prepare reading it meanwhile
		// sees the old file or the new one, never a truncated one.
		if err := renameio.WriteFile(f.path, content, 0o644); err != nil {
			return fmt.Errorf("writing fake capability: %w", err)
		}
	}
	return nil
}
