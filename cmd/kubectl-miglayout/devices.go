package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// deviceWorld is what claims can name: DeviceClasses, and the attributes and
// capacities devices publish, by domain (the driver name for unqualified
// names).
type deviceWorld struct {
	classes map[string]bool
	attrs   map[string]map[string]bool
	caps    map[string]map[string]bool
	// source says where these come from, for messages.
	source string
	// notes are said once, before the findings.
	notes []string
}

// Offline defaults: the DRA driver names miglayout publishes under (its own,
// or NVIDIA's where it replaces NVIDIA's DRA driver on MIG nodes) and the
// DeviceClasses installed with them.
var (
	defaultDrivers = []string{migslices.DefaultDriverName, "gpu.nvidia.com"}
	defaultClasses = []string{"mig.miglayout.io", "gpu.miglayout.io", "mig.nvidia.com", "gpu.nvidia.com"}
)

// migDevices are one device of each kind package slices publishes (a whole
// GPU and a MIG device), with every attribute set, for driver: what a claim
// can read from miglayout's devices.
func migDevices() []resourceapi.Device {
	var models []*mig.Model
	models = append(models, mig.DefaultCatalog().Models()...)
	m := models[0]
	g := migslices.PlannedGPU(m, 0)
	g.DriverVersion, g.CUDADriverVersion, g.PCIBusID = "580.95.05", "13.0", "0000:07:00.0"
	// The topology attributes an agent reads from sysfs.
	g.PCIeRoot, g.NUMANode = "pci0000:00", ptr.To(0)
	out := []resourceapi.Device{migslices.GPUDevice(g)}
	p := m.Profiles[0]
	if d, err := migslices.PlannedMIGDevice(g, mig.Device{Profile: p.Name, Start: p.Placements[0].Start}); err == nil {
		out = append(out, d)
	}
	return out
}

func (w *deviceWorld) add(driver string, d resourceapi.Device) {
	put := func(m map[string]map[string]bool, q string) {
		domain, name := driver, q
		if i := strings.LastIndex(q, "/"); i >= 0 {
			domain, name = q[:i], q[i+1:]
		}
		if m[domain] == nil {
			m[domain] = map[string]bool{}
		}
		m[domain][name] = true
	}
	for q := range d.Attributes {
		put(w.attrs, string(q))
	}
	for q := range d.Capacity {
		put(w.caps, string(q))
	}
}

func newWorld() *deviceWorld {
	return &deviceWorld{classes: map[string]bool{}, attrs: map[string]map[string]bool{}, caps: map[string]map[string]bool{}}
}

// offlineWorld is miglayout's own device model (package slices) under the
// given driver names, and the given DeviceClass names.
func offlineWorld(drivers, classes []string) *deviceWorld {
	w := newWorld()
	for _, c := range classes {
		w.classes[c] = true
	}
	for _, drv := range drivers {
		for _, d := range migDevices() {
			w.add(drv, d)
		}
	}
	w.source = fmt.Sprintf("miglayout's devices under %s", strings.Join(drivers, ", "))
	return w
}

// clusterWorld reads the DeviceClasses and published ResourceSlices of the
// cluster. A miglayout driver name (drivers) that publishes devices or that
// a DeviceClass selects also gets miglayout's own device model (whole GPUs
// and MIG devices), so that a claim is judged against what a layout can
// publish, not only against what is published now.
func clusterWorld(ctx context.Context, c client.Client, drivers []string) (*deviceWorld, error) {
	var classes resourceapi.DeviceClassList
	if err := c.List(ctx, &classes); err != nil {
		return nil, fmt.Errorf("listing DeviceClasses: %w", err)
	}
	var rs resourceapi.ResourceSliceList
	if err := c.List(ctx, &rs); err != nil {
		return nil, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	w := newWorld()
	var classCEL strings.Builder
	for _, dc := range classes.Items {
		w.classes[dc.Name] = true
		for _, s := range dc.Spec.Selectors {
			if s.CEL != nil {
				classCEL.WriteString(s.CEL.Expression + "\n")
			}
		}
	}
	published, publishedMIG := map[string]bool{}, map[string]bool{}
	for _, s := range rs.Items {
		for _, d := range s.Spec.Devices {
			w.add(s.Spec.Driver, d)
			published[s.Spec.Driver] = true
			if _, isMIG, ok := migslices.DeviceGPUIndex(d.Name); ok && isMIG {
				publishedMIG[s.Spec.Driver] = true
			}
		}
	}
	w.source = "the devices published in the cluster"
	// A miglayout driver that publishes devices or that a DeviceClass
	// selects gets miglayout's device model too: the devices a layout can
	// create, whole GPUs and MIG devices, whatever is published now
	// (agents starting, GPUs whole before a layout is applied, every GPU
	// in MIG mode, Auto mode before a pod asks).
	classText := classCEL.String()
	for _, drv := range drivers {
		if !published[drv] && !strings.Contains(classText, "'"+drv+"'") && !strings.Contains(classText, `"`+drv+`"`) {
			continue
		}
		for _, d := range migDevices() {
			w.add(drv, d)
		}
		if !publishedMIG[drv] {
			w.notes = append(w.notes, fmt.Sprintf("no MIG device of driver %s is published yet: the attributes of the devices a layout can create are taken from miglayout's device model", drv))
		}
	}
	return w, nil
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

// nearest returns the candidate closest to s (case-insensitive equality, or
// an edit distance of at most 3), or "".
func nearest(s string, candidates []string) string {
	best, bestD := "", 4
	for _, c := range candidates {
		if strings.EqualFold(c, s) {
			return c
		}
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
