package controller

import (
	"github.com/miglayout/miglayout/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Fluent builders of the API objects the pure functions take.

type gpuBuilder struct{ g v1alpha1.GPUStatus }

func a100(index int32) *gpuBuilder {
	return &gpuBuilder{v1alpha1.GPUStatus{
		Index: index, Product: "NVIDIA A100-SXM4-80GB", Model: "A100-SXM4-80GB",
		MIGEnabled: true, MIGPending: true, Phase: v1alpha1.PhaseReady,
	}}
}

func h100(index int32) *gpuBuilder {
	return &gpuBuilder{v1alpha1.GPUStatus{
		Index: index, Product: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB",
		MIGEnabled: true, MIGPending: true, Phase: v1alpha1.PhaseReady,
	}}
}

func unknownGPU(index int32) *gpuBuilder {
	return &gpuBuilder{v1alpha1.GPUStatus{Index: index, Product: "Tesla T4", Phase: v1alpha1.PhaseReady}}
}

// nvml reports profile values that NVML gives otherwise than the catalog.
func (b *gpuBuilder) nvml(ps ...v1alpha1.NVMLProfile) *gpuBuilder { b.g.NVMLProfiles = ps; return b }

func (b *gpuBuilder) layout(l string) *gpuBuilder { b.g.Layout = l; return b }
func (b *gpuBuilder) inUse(l string) *gpuBuilder  { b.g.InUse = l; return b }
func (b *gpuBuilder) migOff() *gpuBuilder {
	b.g.MIGEnabled, b.g.MIGPending, b.g.Layout = false, false, ""
	return b
}

// pendingMode sets the MIG mode the GPU takes at its next reset.
func (b *gpuBuilder) pendingMode(on bool) *gpuBuilder { b.g.MIGPending = on; return b }
func (b *gpuBuilder) phase(p v1alpha1.GPUPhase, reason, message string) *gpuBuilder {
	b.g.Phase, b.g.Reason, b.g.Message = p, reason, message
	return b
}
func (b *gpuBuilder) build() v1alpha1.GPUStatus { return b.g }

func inventory(gpus ...*gpuBuilder) []v1alpha1.GPUStatus {
	out := make([]v1alpha1.GPUStatus, len(gpus))
	for i, g := range gpus {
		out[i] = g.build()
	}
	return out
}

type ruleBuilder struct{ r v1alpha1.LayoutRule }

func rule(name string) *ruleBuilder { return &ruleBuilder{v1alpha1.LayoutRule{Name: name}} }

func (b *ruleBuilder) counts(profile string, n int32) *ruleBuilder {
	if b.r.Profiles == nil {
		b.r.Profiles = map[string]int32{}
	}
	b.r.Profiles[profile] = n
	return b
}
func (b *ruleBuilder) layout(l string) *ruleBuilder    { b.r.Layout = ptr.To(l); return b }
func (b *ruleBuilder) migOff() *ruleBuilder            { b.r.MIGEnabled = ptr.To(false); return b }
func (b *ruleBuilder) product(p string) *ruleBuilder   { b.r.ProductName = p; return b }
func (b *ruleBuilder) indices(i ...int32) *ruleBuilder { b.r.GPUIndices = i; return b }
func (b *ruleBuilder) build() v1alpha1.LayoutRule      { return b.r }
func rules(rs ...*ruleBuilder) []v1alpha1.LayoutRule {
	out := make([]v1alpha1.LayoutRule, len(rs))
	for i, r := range rs {
		out[i] = r.build()
	}
	return out
}

func specGPU(index int32, layout, reason string) v1alpha1.GPUSpec {
	return v1alpha1.GPUSpec{Index: index, MIGEnabled: true, Layout: layout, Reason: reason}
}

func specMIGOff(index int32, reason string) v1alpha1.GPUSpec {
	return v1alpha1.GPUSpec{Index: index, MIGEnabled: false, Reason: reason}
}

type nmlBuilder struct{ n v1alpha1.NodeMigLayout }

func nodeMigLayout(node string) *nmlBuilder {
	return &nmlBuilder{v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: node}}}
}
func (b *nmlBuilder) spec(gpus ...v1alpha1.GPUSpec) *nmlBuilder { b.n.Spec.GPUs = gpus; return b }
func (b *nmlBuilder) status(gpus ...*gpuBuilder) *nmlBuilder {
	b.n.Status.GPUs = inventory(gpus...)
	return b
}
func (b *nmlBuilder) build() *v1alpha1.NodeMigLayout { return &b.n }

type migLayoutBuilder struct{ m v1alpha1.MigLayout }

func migLayout(name string) *migLayoutBuilder {
	return &migLayoutBuilder{v1alpha1.MigLayout{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}
func (b *migLayoutBuilder) selects(key, value string) *migLayoutBuilder {
	b.m.Spec.NodeSelector = metav1.LabelSelector{MatchLabels: map[string]string{key: value}}
	return b
}
func (b *migLayoutBuilder) selector(s metav1.LabelSelector) *migLayoutBuilder {
	b.m.Spec.NodeSelector = s
	return b
}
func (b *migLayoutBuilder) deleting() *migLayoutBuilder {
	b.m.DeletionTimestamp = ptr.To(metav1.Now())
	return b
}
func (b *migLayoutBuilder) build() v1alpha1.MigLayout { return b.m }
