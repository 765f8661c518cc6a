package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// servePinned serves a pod that needs exactly one device through a claim
// that reads a per-GPU attribute (perGPUAttributes: a GPU's index, UUID,
// PCI bus ID, the node's driver version, a placement): every GPU of the
// feasible nodes is judged on its own devices, free ones and the best
// addition at a placement the claim accepts (where kube-scheduler would
// give every one of those to pods it takes first, a new device made beside
// every free one), and the best of them that
// kube-scheduler would give the pod (nodeAgrees, where the node's pods
// need the replay) is taken by serveSingle's rule (least room for large
// profiles lost, fewest free devices destroyed, an existing device before
// a new one, a GPU the plan changes anyway, most room left, snapshot
// order). Such a pod keeps no placement while it waits.
func (p *planner) servePinned(ctx context.Context, pod Pod, nodes []*nodeState) error {
	key := podKey(pod.Pod)
	c := pod.Claims[0]
	type choice struct {
		g         *gpuState
		add       *addition
		dev       mig.Device
		loss      []int
		destroyed int
		headroom  []int
	}
	var cands []choice
	better := func(x, best *choice) bool {
		switch {
		case slices.Compare(x.loss, best.loss) != 0:
			return slices.Compare(x.loss, best.loss) < 0
		case x.destroyed != best.destroyed:
			return x.destroyed < best.destroyed
		case (x.add == nil) != (best.add == nil):
			return x.add == nil
		case x.g.touched != best.g.touched:
			return x.g.touched
		case slices.Compare(x.headroom, best.headroom) != 0:
			return slices.Compare(x.headroom, best.headroom) > 0
		}
		return x.g.order < best.g.order
	}
	// GPUs of one class that the claim cannot tell apart (relevantInfo)
	// and that may change alike are judged once, by the first of them.
	p.podMark++
	mark := p.podMark
	for _, n := range nodes {
		n.mark = mark
	}
	flags := p.match.flags(c)
	type group struct {
		class, info string
		mayChange   bool
	}
	// gather adds the candidates of the feasible nodes' GPUs: with
	// keepFree, only new devices made beside every free device; else the
	// free devices the claim accepts and the best additions.
	gather := func(keepFree bool) error {
		seen := map[group]bool{}
		for _, g := range p.gpus {
			if g.node.mark != mark {
				continue
			}
			if !g.g.Changing {
				k := group{g.class, g.infoKey(flags), p.mayChange(g)}
				if seen[k] {
					continue
				}
				seen[k] = true
			}
			// A free device serves whatever its profile: the policy
			// (allowedProfiles) limits what is created only.
			for _, d := range g.free() {
				if keepFree || g.blocks(d) || !g.catalogued(d) {
					continue
				}
				fits, err := p.match.deviceFits(ctx, c, g.g.Info, d)
				if err != nil {
					return fmt.Errorf("planning pod %s: %w", key, err)
				}
				if fits {
					cands = append(cands, choice{g: g, dev: d, loss: p.freeLoss(g, d), headroom: g.model.Headroom(g.layout)})
				}
			}
			if !p.mayChange(g) {
				continue
			}
			for _, pr := range byMemory(g.model) {
				if !g.node.allows(pr.Name) {
					continue
				}
				a := p.additionWith(g, pr.Name, keepFree)
				if a == nil || keepFree && g.layout.Contains(a.device) {
					continue
				}
				if a = p.acceptedAddition(ctx, c, g, pr.Name, a); a == nil {
					continue
				}
				cands = append(cands, choice{g: g, add: a, dev: a.device, loss: a.loss, destroyed: a.destroyed, headroom: a.headroom})
			}
		}
		return nil
	}
	// The best candidate kube-scheduler would agree to, replaying the
	// node's planned pods with it (as serveSingle does): a device made
	// for this pod that a pod the scheduler takes first would get is no
	// way to serve it.
	pick := func() (*choice, error) {
		for len(cands) > 0 {
			i := 0
			for j := 1; j < len(cands); j++ {
				if better(&cands[j], &cands[i]) {
					i = j
				}
			}
			c := cands[i]
			cands = slices.Delete(cands, i, i+1)
			if (len(c.g.node.planned) > 0 || len(c.g.node.waiting) > 0) && p.needsReplay(c.g.node, key) {
				agrees, err := p.agreesWith(ctx, pod, c.g, c.add)
				if err != nil {
					return nil, fmt.Errorf("planning pod %s: %w", key, err)
				}
				if !agrees {
					continue
				}
			}
			return &c, nil
		}
		return nil, nil
	}
	if err := gather(false); err != nil {
		return err
	}
	best, err := pick()
	if err != nil {
		return err
	}
	if best == nil {
		// The best addition may take a free device the claim accepts
		// rather than make one, and the scheduler give that device to a
		// pod it takes first: a new device beside the free ones may
		// still serve the pod.
		if err := gather(true); err != nil {
			return err
		}
		if best, err = pick(); err != nil {
			return err
		}
	}
	if best == nil {
		// Room, or a GPU whose devices the claim never accepts?
		for _, n := range nodes {
			for _, g := range n.gpus {
				ps, err := p.match.gpuProfiles(ctx, c, g.g.Info)
				if err != nil {
					return fmt.Errorf("planning pod %s: %w", key, err)
				}
				if slices.ContainsFunc(ps, n.allows) {
					p.result.Unservable[key] = NoRoom
					return nil
				}
			}
		}
		p.result.Unservable[key] = fmt.Sprintf("no GPU of the Auto nodes the pod may use has a device claim %s accepts", c.Name)
		return nil
	}
	if best.add == nil {
		p.reserve(best.g, best.dev, key, false)
		return nil
	}
	p.applyAddition(best.g, best.add)
	p.reserve(best.g, best.add.device, key, true)
	if p.match.readsPlacement(c) {
		// Created for a claim that asks for this placement: later
		// additions must not move it as they may move other new devices.
		delete(best.g.soft, best.add.device)
		p.reclass(best.g) // its class key lists soft devices
	}
	return nil
}

// infoFlags are the per-GPU attributes a claim's spec names.
type infoFlags struct{ index, minor, uuid, pciBusID, driver, numaNode, pcieRoot bool }

// bits numbers the flags 0 to 127.
func (f infoFlags) bits() int {
	n := 0
	for i, b := range []bool{f.index, f.minor, f.uuid, f.pciBusID, f.driver, f.numaNode, f.pcieRoot} {
		if b {
			n |= 1 << i
		}
	}
	return n
}

// infoKey is relevantInfo of the GPU, memoised.
func (s *gpuState) infoKey(f infoFlags) string {
	b := f.bits()
	if k, ok := s.infoKeys[b]; ok {
		return k
	}
	if s.infoKeys == nil {
		s.infoKeys = map[int]string{}
	}
	s.infoKeys[b] = relevantInfo(s.g.Info, f)
	return s.infoKeys[b]
}

func flagsOf(spec string) infoFlags {
	return infoFlags{strings.Contains(spec, "index"), strings.Contains(spec, "minor"), strings.Contains(spec, "uuid"),
		strings.Contains(spec, "pcibusid"), strings.Contains(spec, "driverversion"),
		strings.Contains(spec, "numanode"), strings.Contains(spec, "pcieroot")}
}

// relevantInfo is what of GPU g a claim that reads the per-GPU attributes
// f can tell apart: the attributes every GPU of a model shares, and those
// per-GPU attributes it names. Two GPUs with the same relevantInfo accept
// the same devices.
func relevantInfo(g gpu.GPU, f infoFlags) string {
	parts := []string{g.Model.Key(), g.ProductName, g.Brand, g.Architecture, g.CUDAComputeCapability}
	if f.index {
		parts = append(parts, "i"+strconv.Itoa(g.Index))
	}
	if f.minor {
		parts = append(parts, "m"+strconv.Itoa(g.Minor))
	}
	if f.uuid {
		parts = append(parts, "u"+g.UUID)
	}
	if f.pciBusID {
		parts = append(parts, "p"+g.PCIBusID)
	}
	if f.driver {
		parts = append(parts, "d"+g.DriverVersion+"/"+g.CUDADriverVersion)
	}
	if f.numaNode {
		numa := "-"
		if g.NUMANode != nil {
			numa = strconv.Itoa(*g.NUMANode)
		}
		parts = append(parts, "n"+numa)
	}
	if f.pcieRoot {
		parts = append(parts, "r"+g.PCIeRoot)
	}
	return strings.Join(parts, "|")
}

// flags are the infoFlags of claim c, cached by shape.
func (m *matcher) flags(c *resourceapi.ResourceClaim) infoFlags {
	return memo(m.flagsBy, m.shape(c), func() infoFlags { return flagsOf(m.claimSpec(c)) })
}

// claimSpec is the lower-case JSON of claim c's requests and the
// DeviceClasses it names, cached by shape: what selects devices. Its
// constraints are left out: a matchAttribute compares the devices of one
// allocation with each other (parentUUID: all on one GPU), which tells no
// GPU from another (but on topology, see matcher.perGPU).
func (m *matcher) claimSpec(c *resourceapi.ResourceClaim) string {
	key := m.shape(c)
	if s, ok := m.specs[key]; ok {
		return s
	}
	var b strings.Builder
	devices := c.Spec.Devices
	devices.Constraints = nil
	spec, _ := json.Marshal(devices)
	b.WriteString(strings.ToLower(string(spec)))
	for _, name := range classNames(c) {
		if class, ok := m.classes[name]; ok {
			b.WriteString(strings.ToLower(classSpecJSON(class)))
		}
	}
	m.specs[key] = b.String()
	return m.specs[key]
}

// gpuKind is what a claim judged on a stand-in GPU (singleProfiles) can
// tell of GPU g: its model and the attributes every GPU of the model
// publishes alike on a node, but which may differ between nodes (the
// product name and brand NVML reports, the architecture and compute
// capability), not the GPU's identity.
func gpuKind(g gpu.GPU) string {
	return relevantInfo(g, infoFlags{})
}

// gpuKindInfo is a kind of GPU of the snapshot (gpuKind) with its stand-in.
type gpuKindInfo struct {
	key     string
	standIn gpu.GPU
}

// kindOf is the kind of GPU g, with its stand-in.
func kindOf(g gpu.GPU) gpuKindInfo {
	return gpuKindInfo{key: gpuKind(g), standIn: standIn(g)}
}

// standIn is the stand-in GPU claims are judged on for GPUs of g's kind:
// the model's planned GPU (slices.PlannedGPU) with g's model-wide
// attributes.
func standIn(g gpu.GPU) gpu.GPU {
	s := migslices.PlannedGPU(g.Model, 0)
	if g.ProductName != "" {
		s.ProductName = g.ProductName
	}
	if g.Brand != "" {
		s.Brand = g.Brand
	}
	if g.Architecture != "" {
		s.Architecture = g.Architecture
	}
	if g.CUDAComputeCapability != "" {
		s.CUDAComputeCapability = g.CUDAComputeCapability
	}
	return s
}
