package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/mig/gpu/gputest"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// publication is what fakeInventory saw in one Publish call.
type publication struct {
	devices  []string
	draining []string
}

type fakeInventory struct {
	mu   sync.Mutex
	pubs []publication
	// dropTaints makes a publication with drained devices fail as on an API
	// server without DRA device taints.
	dropTaints bool
	// failDrain, when set, is the error of a publication with drained
	// devices (an API server refusing it).
	failDrain error
	// failRepublish, when set, is the error of a publication without
	// drained devices (the republication that ends a pass), but for the
	// withdrawal that follows a drain publication.
	failRepublish error
	// failWithdraw, when set, is the error of the publication that
	// follows a drain publication (the withdrawal of the drained devices).
	failWithdraw error
}

func (f *fakeInventory) DeviceName(g gpu.GPU, d *gpu.MIGDevice) string {
	if d == nil {
		return fmt.Sprintf("gpu-%d", g.Index)
	}
	return fmt.Sprintf("gpu-%d-mig-%s-%d-%d", g.Index, strings.ReplaceAll(d.Profile, ".", ""), d.ProfileID, d.Placement.Start)
}

func (f *fakeInventory) Publish(_ context.Context, gpus []GPUState, draining sets.Set[string]) error {
	var p publication
	for _, g := range gpus {
		if !g.GPU.MIGMode.Current {
			p.devices = append(p.devices, f.DeviceName(g.GPU, nil))
			continue
		}
		for i := range g.Devices {
			if g.Devices[i].CIID >= 0 {
				p.devices = append(p.devices, f.DeviceName(g.GPU, &g.Devices[i]))
			}
		}
	}
	if draining.Len() > 0 {
		p.draining = sets.List(draining)
	}
	f.mu.Lock()
	withdrawal := draining.Len() == 0 && len(f.pubs) > 0 && len(f.pubs[len(f.pubs)-1].draining) > 0
	f.pubs = append(f.pubs, p)
	f.mu.Unlock()
	if f.failDrain != nil && draining.Len() > 0 {
		return f.failDrain
	}
	if withdrawal && f.failWithdraw != nil {
		return f.failWithdraw
	}
	if f.failRepublish != nil && draining.Len() == 0 && !withdrawal {
		return f.failRepublish
	}
	if f.dropTaints && draining.Len() > 0 {
		return fmt.Errorf("waiting for the API server to serve pool n1: %w", ErrDrainTaintsDropped)
	}
	return nil
}

func (f *fakeInventory) last() publication {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pubs[len(f.pubs)-1]
}

// fakeAllocations returns cached on cached reads and live on live reads, so a
// test can make a device get allocated "during the settle period".
type fakeAllocations struct {
	cached, live sets.Set[string]
	// liveReads counts the live reads.
	liveReads int
	// hangLive, when set, makes live reads hang until their context ends
	// (an API server that does not answer).
	hangLive bool
	// failLive, when set, is the error of live reads.
	failLive error
}

func (f *fakeAllocations) AllocatedDevices(ctx context.Context, live bool) (sets.Set[string], error) {
	if live {
		f.liveReads++
		if f.hangLive {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		if f.failLive != nil {
			return nil, f.failLive
		}
	}
	if live && f.live != nil {
		return f.live, nil
	}
	if f.cached == nil {
		return sets.New[string](), nil
	}
	return f.cached, nil
}

// fakePrepared holds prepared devices by name, and by UUID in uuids
// (PreparedUUIDs).
type fakePrepared struct{ names, uuids sets.Set[string] }

func (f fakePrepared) PreparedDevices() sets.Set[string] { return f.names }

func (f fakePrepared) PreparedUUIDs() sets.Set[string] { return f.uuids }

type noLocks struct {
	begun []int
	// onBegin runs when a reconfiguration takes the lock.
	onBegin func()
}

func (n *noLocks) BeginReconfigure(_ context.Context, i int) (func(), error) {
	n.begun = append(n.begun, i)
	if n.onBegin != nil {
		n.onBegin()
	}
	return func() {}, nil
}

// rig is a Repartitioner over a simulated node.
type rig struct {
	sim   *nvmlsim.Sim
	mgr   gpu.Manager
	inv   *fakeInventory
	alloc *fakeAllocations
	prep  fakePrepared
	locks *noLocks
	r     *Repartitioner
	dir   string
}

func newRig(t testing.TB, spec string) *rig {
	t.Helper()
	return newRigWith(t, nvmlsim.Config{Spec: spec})
}

// newRigWith is newRig over a simulator of cfg (its Seed is the test's name).
func newRigWith(t testing.TB, cfg nvmlsim.Config) *rig {
	t.Helper()
	return newRigOver(t, cfg, func(l nvml.Interface) nvml.Interface { return l })
}

// newRigOver is newRigWith with the GPU manager over wrap(simulator)
// (gputest.OnlyInMIGMode).
func newRigOver(t testing.TB, cfg nvmlsim.Config, wrap func(nvml.Interface) nvml.Interface) *rig {
	t.Helper()
	cfg.Seed = t.Name()
	sim, mgr := gputest.SimulatedOver(t, cfg, wrap)
	dir := t.TempDir()
	j, err := OpenJournal(dir + "/journal.json")
	if err != nil {
		t.Fatal(err)
	}
	g := &rig{sim: sim, mgr: mgr, inv: &fakeInventory{}, alloc: &fakeAllocations{}, prep: fakePrepared{names: sets.New[string](), uuids: sets.New[string]()}, locks: &noLocks{}, dir: dir}
	g.r = &Repartitioner{GPUs: mgr, Inventory: g.inv, Allocations: g.alloc, Prepared: g.prep, Locks: g.locks, Journal: j,
		SettlePeriod: time.Second, Sleep: func(context.Context, time.Duration) error { return nil }}
	return g
}

// withoutGPU puts g's agent on NVML as it reads the node once GPU gone left
// it (gputest.WithoutGPU: the GPUs after it numbered anew), with a journal
// of its own, as an agent restarted then.
func (g *rig) withoutGPU(t *testing.T, gone int) {
	t.Helper()
	m, err := gpu.NewNVML(gputest.WithoutGPU{Interface: g.sim, Gone: gone}, mig.DefaultCatalog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	j, err := OpenJournal(t.TempDir() + "/journal.json")
	if err != nil {
		t.Fatal(err)
	}
	g.mgr = m
	g.r = &Repartitioner{GPUs: m, Inventory: g.inv, Allocations: g.alloc, Prepared: g.prep, Locks: g.locks, Journal: j,
		SettlePeriod: time.Second, Sleep: func(context.Context, time.Duration) error { return nil }}
}

// newA100RigWith is newRig over one A100-SXM4-80GB whose driver describes
// profiles as given (nvmlsim.CatalogWithProfiles: added, or replacing the
// catalog's of the same name).
func newA100RigWith(t testing.TB, profiles ...mig.Profile) *rig {
	t.Helper()
	hardware, err := nvmlsim.CatalogWithProfiles(nil, "A100-SXM4-80GB", profiles...)
	if err != nil {
		t.Fatal(err)
	}
	return newRigWith(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Catalog: hardware})
}

// nvmlhA100RigWith is newA100RigWith over a driver that answers no GI
// profile while MIG mode is off, as nvml.h documents
// (gputest.OnlyInMIGMode): the agent learns NVML's profile table only
// once MIG mode is on.
func nvmlhA100RigWith(t testing.TB, profiles ...mig.Profile) *rig {
	t.Helper()
	hardware, err := nvmlsim.CatalogWithProfiles(nil, "A100-SXM4-80GB", profiles...)
	if err != nil {
		t.Fatal(err)
	}
	return newRigOver(t, nvmlsim.Config{Spec: "1xA100-SXM4-80GB", Catalog: hardware}, gputest.OnlyInMIGMode)
}

// layouts returns each GPU's layout text from NVML ("-" for MIG off).
func (g *rig) layouts(t *testing.T) []string {
	t.Helper()
	obs, unreadable, err := g.r.observe(context.Background())
	if err != nil || len(unreadable) > 0 {
		t.Fatal(err, unreadable)
	}
	out := make([]string, len(obs))
	for i := range obs {
		if !obs[i].GPU.MIGMode.Current {
			out[i] = "-"
			continue
		}
		out[i] = layoutOf(&obs[i]).String()
	}
	return out
}

// syncReady runs a pass of specs and fails t unless it succeeds with GPU 0
// Ready.
func (g *rig) syncReady(t *testing.T, specs []v1alpha1.GPUSpec) {
	t.Helper()
	res, err := g.r.Sync(t.Context(), specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0]; got.Phase != v1alpha1.PhaseReady {
		t.Errorf("GPU 0: %+v, want Ready", got)
	}
}

// wantLayouts fails t unless the GPUs' layouts are want, by index.
func (g *rig) wantLayouts(t *testing.T, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, g.layouts(t)); diff != "" {
		t.Errorf("layouts (-want +got):\n%s", diff)
	}
}

// apply brings GPU 0 to the layout through the manager directly (setup).
func (g *rig) setup(t testing.TB, idx int, layout string) {
	t.Helper()
	ctx := context.Background()
	if _, err := g.mgr.SetMIGMode(ctx, idx, true); err != nil {
		t.Fatal(err)
	}
	for _, d := range mig.MustParseLayout(layout) {
		if _, err := g.mgr.CreateMIGDevice(ctx, idx, d); err != nil {
			t.Fatal(err)
		}
	}
}

func (g *rig) migUUID(t *testing.T, idx int, d string) string {
	t.Helper()
	devs, err := g.mgr.MIGDevices(context.Background(), idx)
	if err != nil {
		t.Fatal(err)
	}
	for _, md := range devs {
		if md.Device().String() == d {
			return md.UUID
		}
	}
	t.Fatalf("no device %s on GPU %d", d, idx)
	return ""
}

// orphan3g creates, straight through NVML, a 3g GPU instance at start on GPU
// idx with no compute instance: what an agent killed between the two
// leaves behind. It returns the GPU instance.
func (g *rig) orphan3g(t *testing.T, idx, start int) nvml.GpuInstance {
	t.Helper()
	dev, info := g.profile3g(t, idx)
	gi, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: uint32(start), Size: 4})
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	return gi
}

// profile3g is GPU idx's NVML handle and 3g GPU instance profile, read from
// the simulator behind the agent's back.
func (g *rig) profile3g(t *testing.T, idx int) (nvml.Device, nvml.GpuInstanceProfileInfo) {
	t.Helper()
	dev, ret := g.sim.DeviceGetHandleByIndex(idx)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	info, ret := dev.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	return dev, info
}

// gis3g lists the 3g GPU instances of GPU idx, read from the simulator
// behind the agent's back.
func (g *rig) gis3g(t *testing.T, idx int) []nvml.GpuInstance {
	t.Helper()
	dev, info := g.profile3g(t, idx)
	gis, ret := dev.GetGpuInstances(&info)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	return gis
}

// nodeReconcilerOn is a NodeReconciler over g for node n1, whose
// NodeMigLayout (generation 1) asks for specs, with its client and event
// recorder.
func nodeReconcilerOn(t *testing.T, g *rig, specs ...v1alpha1.GPUSpec) (*NodeReconciler, client.WithWatch, *events.FakeRecorder) {
	t.Helper()
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 1},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: specs}}
	c := nmlClient(t, nml, interceptor.Funcs{})
	rec := events.NewFakeRecorder(20)
	return &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: rec}, c, rec
}

// eventReasons takes the events rec holds and returns their reasons, in
// order.
func eventReasons(rec *events.FakeRecorder) []string {
	var out []string
	for len(rec.Events) > 0 {
		out = append(out, strings.Fields(<-rec.Events)[1])
	}
	return out
}

// phaseRecordingClient is a fake client holding NodeMigLayout n1
// (generation 1) that asks for specs, and the GPU phases of every status
// update it was sent, in order (reset them between passes with
// *phases = nil).
func phaseRecordingClient(t *testing.T, specs ...v1alpha1.GPUSpec) (client.WithWatch, *[]v1alpha1.GPUPhase) {
	t.Helper()
	nml := &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 1},
		Spec: v1alpha1.NodeMigLayoutSpec{GPUs: specs}}
	var phases []v1alpha1.GPUPhase
	c := nmlClient(t, nml, interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		for _, st := range obj.(*v1alpha1.NodeMigLayout).Status.GPUs {
			phases = append(phases, st.Phase)
		}
		return c.SubResource(sub).Update(ctx, obj, opts...)
	}})
	return c, &phases
}

// nmlClient is a fake client holding nml (status a subresource), its calls
// passed through funcs.
func nmlClient(t *testing.T, nml *v1alpha1.NodeMigLayout, funcs interceptor.Funcs) client.WithWatch {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(nmlScheme(t)).WithObjects(nml).WithStatusSubresource(nml).WithInterceptorFuncs(funcs).Build()
}

// nmlScheme is a scheme of the core types and miglayout's.
func nmlScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// pendEnable starts a process on GPU 0 and enables MIG under it, so that
// the enable is pending (as on an Ampere GPU), and returns the process's
// PID.
func (g *rig) pendEnable(t *testing.T) uint32 {
	t.Helper()
	pid, err := g.sim.StartProcess(g.sim.Snapshot().GPUs[0].UUID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if mode, err := g.mgr.SetMIGMode(t.Context(), 0, true); err != nil || mode.Current || !mode.Pending {
		t.Fatalf("enabling MIG under a process: mode %+v, err %v; want an enable pending", mode, err)
	}
	return pid
}
