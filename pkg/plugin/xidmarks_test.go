package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
)

// xidMarksPlugin is a plugin of e with boot ID bootID and a Xid watch
// (its Config edited by edit, where given), whose Xid marks RestoreXids
// has read.
func (e *env) xidMarksPlugin(bootID string, edit ...func(*Config)) *Plugin {
	e.t.Helper()
	cfg := Config{NodeName: node, GPUs: e.gpus, Locks: e.locks, CDIDir: e.cdiDir, CheckpointDir: e.cpDir,
		HostRoot: e.hostRoot, Xids: e.gpus, BootID: bootID, Registerer: prometheus.NewRegistry()}
	for _, f := range edit {
		f(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	p.RestoreXids(e.ctx)
	return p
}

// writeXidMarks writes f as the marks file an earlier run of the agent
// left.
func (e *env) writeXidMarks(f xidMarks) {
	e.t.Helper()
	data, err := json.Marshal(f)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.MkdirAll(e.cpDir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.cpDir, XidMarksFile), data, 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// migOn returns the MIG device of GPU 0 at placement start.
func (e *env) migOn(start int) gpu.MIGDevice {
	e.t.Helper()
	migs, err := e.gpus.MIGDevices(e.ctx, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, d := range migs {
		if d.Placement.Start == start {
			return d
		}
	}
	e.t.Fatalf("no MIG device at start %d of GPU 0", start)
	return gpu.MIGDevice{}
}

// markGauge reads miglayout_plugin_xid_marks: "<gpu>/<xid>" to value.
func markGauge(t *testing.T, p *Plugin) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 16)
	p.metrics.marks.Collect(ch)
	close(ch)
	out := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		out[labels["gpu"]+"/"+labels["xid"]] = d.GetGauge().GetValue()
	}
	return out
}

// devXid is Xid code on the GPU instance of MIG device d.
func devXid(d gpu.MIGDevice, code uint64) gpu.Xid {
	return gpu.Xid{GPUIndex: d.GPUIndex, GPUUUID: d.ParentUUID, Code: code, GIID: d.GIID, CIID: -1, Devices: []gpu.MIGDevice{d}}
}

// gpuXid is Xid code on GPU idx as a whole.
func (e *env) gpuXid(idx int, code uint64) gpu.Xid {
	return gpu.Xid{GPUIndex: idx, GPUUUID: e.gpuUUID(idx), Code: code, GIID: -1, CIID: -1}
}

// gpuUUID is the UUID of GPU idx.
func (e *env) gpuUUID(idx int) string {
	e.t.Helper()
	gpus, err := e.gpus.GPUs(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return gpus[idx].UUID
}

// editMarks rewrites XidMarksFile with edit.
func (e *env) editMarks(edit func(string) string) {
	e.t.Helper()
	path := filepath.Join(e.cpDir, XidMarksFile)
	data, err := os.ReadFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(edit(string(data))), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// marks returns the Xid marks XidOf reports for GPU 1 as a whole and the
// MIG devices of GPU 0 at the given starts, by "gpu-1" or the device's
// start.
func (e *env) marks(p *Plugin, devices map[string]gpu.MIGDevice) map[string]uint64 {
	out := map[string]uint64{}
	if code, ok := p.XidOf(1, "", ""); ok {
		out["gpu-1"] = code
	}
	for name, d := range devices {
		if code, ok := p.XidOf(0, "", d.UUID); ok {
			out[name] = code
		}
	}
	return out
}

// TestXidMarksKeptAcrossRestart: the Xid marks a plugin made are restored
// by the next plugin of the same boot (an agent restarted), not by one of
// another boot (the node rebooted, which reset the GPUs), nor without a
// boot ID, nor with the watch turned off; the mark of a MIG device
// destroyed since, or of an Xid ignored since, is dropped, and a file that
// cannot be read restores nothing and is written again at the next mark.
func TestXidMarksKeptAcrossRestart(t *testing.T) {
	tests := map[string]struct {
		firstBoot, nextBoot string
		// between runs between the two plugins.
		between func(e *env)
		// next edits the next plugin's Config.
		next func(*Config)
		want map[string]uint64
	}{
		"same boot": {firstBoot: "boot-1", nextBoot: "boot-1",
			want: map[string]uint64{"3g": 94, "gpu-1": 48}},
		"node rebooted": {firstBoot: "boot-1", nextBoot: "boot-2",
			want: map[string]uint64{}},
		"no boot ID": {firstBoot: "", nextBoot: "",
			want: map[string]uint64{}},
		"watch turned off": {firstBoot: "boot-1", nextBoot: "boot-1",
			next: func(c *Config) { c.Xids = nil },
			want: map[string]uint64{}},
		"Xid 94 ignored since": {firstBoot: "boot-1", nextBoot: "boot-1",
			next: func(c *Config) { c.IgnoredXids = []uint64{94} },
			want: map[string]uint64{"gpu-1": 48}},
		"3g.40gb destroyed and made again": {firstBoot: "boot-1", nextBoot: "boot-1",
			between: func(e *env) {
				d := mig.MustParseLayout("3g.40gb@4")[0]
				if err := e.gpus.DestroyMIGDevice(e.ctx, 0, d); err != nil {
					e.t.Fatal(err)
				}
				e.createMIG(d)
			},
			want: map[string]uint64{"gpu-1": 48}},
		"another GPU at GPU 1's index": {firstBoot: "boot-1", nextBoot: "boot-1",
			between: func(e *env) {
				e.editMarks(func(s string) string { return strings.ReplaceAll(s, e.gpuUUID(1), "GPU-other") })
			},
			want: map[string]uint64{"3g": 94}},
		"file corrupt": {firstBoot: "boot-1", nextBoot: "boot-1",
			between: func(e *env) {
				if err := os.WriteFile(filepath.Join(e.cpDir, XidMarksFile), []byte(`{"version": "miglayout.io/plugin-xids/v1", "gpus": [`), 0o600); err != nil {
					e.t.Fatal(err)
				}
			},
			want: map[string]uint64{}},
		"file of another version": {firstBoot: "boot-1", nextBoot: "boot-1",
			between: func(e *env) {
				e.editMarks(func(s string) string { return strings.Replace(s, XidMarksVersion, "miglayout.io/plugin-xids/v9", 1) })
			},
			want: map[string]uint64{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			large, small := e.migOn(4), e.migOn(3)
			first := e.xidMarksPlugin(tc.firstBoot)
			first.recordXid(e.ctx, devXid(large, 94))
			first.recordXid(e.ctx, e.gpuXid(1, 48))
			if diff := cmp.Diff(map[string]uint64{"3g": 94, "gpu-1": 48}, e.marks(first, map[string]gpu.MIGDevice{"3g": large, "1g": small})); diff != "" {
				t.Fatalf("first plugin's marks (-want +got):\n%s", diff)
			}
			if _, err := os.Stat(filepath.Join(e.cpDir, XidMarksFile)); err != nil {
				t.Fatalf("marks file after the first plugin's marks: %v", err)
			}
			if tc.between != nil {
				tc.between(e)
			}
			var edit []func(*Config)
			if tc.next != nil {
				edit = append(edit, tc.next)
			}
			next := e.xidMarksPlugin(tc.nextBoot, edit...)
			if diff := cmp.Diff(tc.want, e.marks(next, map[string]gpu.MIGDevice{"3g": large, "1g": small})); diff != "" {
				t.Errorf("restored marks (-want +got):\n%s", diff)
			}
			wantGauge := map[string]float64{}
			if tc.want["3g"] != 0 {
				wantGauge["0/94"] = 1
			}
			if tc.want["gpu-1"] != 0 {
				wantGauge["1/48"] = 1
			}
			if diff := cmp.Diff(wantGauge, markGauge(t, next)); diff != "" {
				t.Errorf("marks gauge after the restore (-want +got):\n%s", diff)
			}
			if _, ok := next.xidDevices[large.UUID]; ok && tc.want["3g"] == 0 {
				t.Errorf("the mark of %s, destroyed or not restored, is still held", large.UUID)
			}
			if tc.next != nil {
				// What the next plugin dropped stays dropped: a plugin
				// with the watch on and no Xid ignored restores it not.
				again := e.xidMarksPlugin(tc.nextBoot, func(c *Config) { c.IgnoredXids = []uint64{} })
				if diff := cmp.Diff(tc.want, e.marks(again, map[string]gpu.MIGDevice{"3g": large, "1g": small})); diff != "" {
					t.Errorf("marks restored after those dropped (-want +got):\n%s", diff)
				}
			}
			if tc.nextBoot == "" || next.cfg.Xids == nil {
				return
			}
			// The next mark writes the file again, readable by a third
			// plugin of the same boot.
			next.recordXid(e.ctx, devXid(small, 63))
			third := e.xidMarksPlugin(tc.nextBoot, edit...)
			want := map[string]uint64{"1g": 63}
			for k, v := range tc.want {
				want[k] = v
			}
			if diff := cmp.Diff(want, e.marks(third, map[string]gpu.MIGDevice{"3g": large, "1g": small})); diff != "" {
				t.Errorf("marks after the next mark (-want +got):\n%s", diff)
			}
		})
	}
}

// TestXidMarksFile: the file names its version and boot ID and holds each
// mark once, the whole GPU's without a device UUID; the same Xid again
// leaves it as it is.
func TestXidMarksFile(t *testing.T) {
	e := newEnv(t)
	large := e.migOn(4)
	p := e.xidMarksPlugin("boot-1")
	p.recordXid(e.ctx, devXid(large, 94))
	p.recordXid(e.ctx, e.gpuXid(1, 48))
	path := filepath.Join(e.cpDir, XidMarksFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The same Xids again, within xidResaveAfter: the file is not
	// written again.
	time.Sleep(10 * time.Millisecond)
	p.recordXid(e.ctx, devXid(large, 94))
	p.recordXid(e.ctx, e.gpuXid(1, 48))
	if again, err := os.ReadFile(path); err != nil || string(again) != string(data) {
		t.Errorf("marks file after the same Xids again (%v):\n%s\nwant it as it was:\n%s", err, again, data)
	}
	var f xidMarks
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	// The marks' times are when they were made: checked, then left out.
	for _, marks := range [][]savedXidMark{f.GPUs, f.Devices} {
		for i := range marks {
			if marks[i].At.IsZero() {
				t.Errorf("mark %+v has no time", marks[i])
			}
			marks[i].At = time.Time{}
		}
	}
	want := xidMarks{Version: XidMarksVersion, BootID: "boot-1",
		GPUs:    []savedXidMark{{GPUIndex: 1, GPUUUID: e.gpuUUID(1), Xid: 48}},
		Devices: []savedXidMark{{GPUIndex: 0, GPUUUID: large.ParentUUID, UUID: large.UUID, Xid: 94}}}
	if diff := cmp.Diff(want, f); diff != "" {
		t.Errorf("marks file (-want +got):\n%s", diff)
	}
}

// TestClearXids: a request clears the marks of the GPUs it names (all
// where it names none), but those made in its time's second or after, and
// wakes the health reports; a request ID is applied once, by this plugin or by the
// next, after a restart, a reboot or without a boot ID.
func TestClearXids(t *testing.T) {
	e := newEnv(t)
	large, small := e.migOn(4), e.migOn(3)
	devices := map[string]gpu.MIGDevice{"3g": large, "1g": small}
	p := e.xidMarksPlugin("boot-1")
	p.recordXid(e.ctx, devXid(large, 94))
	p.recordXid(e.ctx, e.gpuXid(1, 48))

	type result struct {
		Cleared, Kept []string
		Applied       bool
		Marks         map[string]uint64
		Gauge         map[string]float64
	}
	clear := func(p *Plugin, id string, at time.Time, gpus ...int) result {
		t.Helper()
		woken := p.healthChanged()
		cleared, kept, applied, err := p.ClearXids(e.ctx, id, clearParts(at, gpus...))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-woken:
			if len(cleared) == 0 {
				t.Errorf("request %s cleared nothing and woke the health reports", id)
			}
		default:
			if len(cleared) > 0 {
				t.Errorf("request %s cleared %v without waking the health reports", id, cleared)
			}
		}
		return result{cleared, kept, applied, e.marks(p, devices), markGauge(t, p)}
	}
	// The second the 3g.40gb's mark was made in.
	markSecond := p.xidDevices[large.UUID].at.Truncate(time.Second)
	large94 := map[string]uint64{"3g": 94}
	large94Gauge := map[string]float64{"0/94": 1}
	none, noGauge := map[string]uint64{}, map[string]float64{}
	steps := []struct {
		name string
		// restart starts a new plugin with boot ID boot first.
		restart bool
		boot    string
		id      string
		at      time.Time
		gpus    []int
		want    result
	}{
		{name: "GPU 1", id: "a", gpus: []int{1},
			want: result{Cleared: []string{"GPU 1: Xid 48"}, Applied: true, Marks: large94, Gauge: large94Gauge}},
		{name: "GPU 1 again, same ID", id: "a",
			want: result{Marks: large94, Gauge: large94Gauge}},
		{name: "same ID after a restart", restart: true, boot: "boot-1", id: "a",
			want: result{Marks: large94, Gauge: large94Gauge}},
		{name: "a request older than the mark", id: "old", at: time.Now().Add(-time.Hour),
			want: result{Kept: []string{large.UUID + ": Xid 94"}, Applied: true, Marks: large94, Gauge: large94Gauge}},
		{name: "GPU 2, which has none", id: "b", gpus: []int{2},
			want: result{Applied: true, Marks: large94, Gauge: large94Gauge}},
		{name: "every GPU, asked in the mark's second", id: "s", at: markSecond,
			want: result{Kept: []string{large.UUID + ": Xid 94"}, Applied: true, Marks: large94, Gauge: large94Gauge}},
		{name: "every GPU, asked in the second after the mark's", id: "c", at: markSecond.Add(time.Second),
			want: result{Cleared: []string{large.UUID + ": Xid 94"}, Applied: true, Marks: none, Gauge: noGauge}},
		{name: "same ID after a reboot", restart: true, boot: "boot-2", id: "c",
			want: result{Marks: none, Gauge: noGauge}},
		{name: "same ID without a boot ID", restart: true, boot: "", id: "c",
			want: result{Marks: none, Gauge: noGauge}},
	}
	for _, s := range steps {
		if s.restart {
			p = e.xidMarksPlugin(s.boot)
		}
		if diff := cmp.Diff(s.want, clear(p, s.id, s.at, s.gpus...)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.name, diff)
		}
	}
}

// TestPruneXids: the marks of MIG devices a GPU no longer lists go, from
// memory, the gauge and the file; those of GPUs not read, and of whole
// GPUs, stay.
func TestPruneXids(t *testing.T) {
	e := newEnv(t)
	large, small := e.migOn(4), e.migOn(3)
	devices := map[string]gpu.MIGDevice{"3g": large, "1g": small}
	p := e.xidMarksPlugin("boot-1")
	p.recordXid(e.ctx, devXid(large, 94))
	p.recordXid(e.ctx, devXid(small, 63))
	p.recordXid(e.ctx, e.gpuXid(1, 48))

	// GPU 1 not read: nothing of it goes; GPU 0 lists the 1g.10gb only.
	p.PruneXids(e.ctx, map[int][]string{0: {small.UUID, "MIG-other"}})
	want := map[string]uint64{"1g": 63, "gpu-1": 48}
	if diff := cmp.Diff(want, e.marks(p, devices)); diff != "" {
		t.Errorf("marks after the prune (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"0/63": 1, "1/48": 1}, markGauge(t, p)); diff != "" {
		t.Errorf("gauge after the prune (-want +got):\n%s", diff)
	}
	if _, ok := p.xidDevices[large.UUID]; ok {
		t.Errorf("the mark of %s, gone, is still held", large.UUID)
	}
	// The file says so: a plugin restored from it has the same marks.
	if diff := cmp.Diff(want, e.marks(e.xidMarksPlugin("boot-1"), devices)); diff != "" {
		t.Errorf("marks restored after the prune (-want +got):\n%s", diff)
	}
	// GPU 1 read with MIG off (no MIG device): its own mark stays.
	p.PruneXids(e.ctx, map[int][]string{0: {}, 1: {}})
	if diff := cmp.Diff(map[string]uint64{"gpu-1": 48}, e.marks(p, devices)); diff != "" {
		t.Errorf("marks after GPU 0 lists none (-want +got):\n%s", diff)
	}
}

// TestClearXidsKeepsAnXidRepeatedAfterTheRequest: an Xid that came before
// a clear request and again after it is kept: the GPU still faults.
func TestClearXidsKeepsAnXidRepeatedAfterTheRequest(t *testing.T) {
	e := newEnv(t)
	large := e.migOn(4)
	p := e.xidMarksPlugin("boot-1")
	x := devXid(large, 94)
	p.recordXid(e.ctx, x)
	// First seen an hour ago; the request came a minute ago; now again.
	m := p.xidDevices[large.UUID]
	m.at = time.Now().Add(-time.Hour)
	p.xidDevices[large.UUID] = m
	p.recordXid(e.ctx, x)
	cleared, kept, applied, err := p.ClearXids(e.ctx, "r1", clearParts(time.Now().Add(-time.Minute)))
	if err != nil || !applied {
		t.Fatalf("ClearXids: applied %t, %v", applied, err)
	}
	if diff := cmp.Diff([]string{large.UUID + ": Xid 94"}, kept); diff != "" || len(cleared) > 0 {
		t.Errorf("cleared %v, kept (-want +got):\n%s", cleared, diff)
	}
	if _, ok := p.XidOf(0, "", large.UUID); !ok {
		t.Error("the Xid repeated after the request was cleared")
	}
}

// TestXidMarksEdgesAcrossRestart: what a restart of the agent keeps of the
// marks beyond the ordinary: the last time of an Xid repeated well after
// the file was written, the mark of a GPU whose UUID NVML could not read,
// and the last clear request where the file is of another version.
func TestXidMarksEdgesAcrossRestart(t *testing.T) {
	t.Run("repeated Xid's last time", func(t *testing.T) {
		e := newEnv(t)
		large := e.migOn(4)
		p := e.xidMarksPlugin("boot-1")
		x := devXid(large, 94)
		p.recordXid(e.ctx, x)
		// The file says it came an hour ago; it comes again now.
		p.xidMu.Lock()
		m := p.xidDevices[large.UUID]
		m.at = time.Now().Add(-time.Hour)
		p.xidDevices[large.UUID] = m
		if err := p.saveXidMarksLocked(); err != nil {
			t.Fatal(err)
		}
		p.xidMu.Unlock()
		p.recordXid(e.ctx, x)
		next := e.xidMarksPlugin("boot-1")
		cleared, kept, _, err := next.ClearXids(e.ctx, "r1", clearParts(time.Now().Add(-time.Minute)))
		if err != nil || len(cleared) > 0 || len(kept) != 1 {
			t.Errorf("after a restart, a request made before the Xid came again: cleared %v, kept %v (%v), want it kept", cleared, kept, err)
		}
	})
	t.Run("GPU whose UUID NVML could not read", func(t *testing.T) {
		e := newEnv(t)
		e.xidMarksPlugin("boot-1").recordXid(e.ctx, gpu.Xid{GPUIndex: 1, Code: 79, GIID: -1, CIID: -1})
		if code, ok := e.xidMarksPlugin("boot-1").XidOf(1, "", ""); !ok || code != 79 {
			t.Errorf("GPU 1's mark after a restart: %d, %t; want Xid 79", code, ok)
		}
	})
	t.Run("mark whose write failed", func(t *testing.T) {
		e := newEnv(t)
		path := filepath.Join(e.cpDir, XidMarksFile)
		// A directory in the file's place: the write fails.
		if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
			t.Fatal(err)
		}
		p := e.xidMarksPlugin("boot-1")
		x := e.gpuXid(1, 48)
		p.recordXid(e.ctx, x)
		if err := os.RemoveAll(path); err != nil {
			t.Fatal(err)
		}
		// The same Xid again, at once: written now.
		p.recordXid(e.ctx, x)
		if code, ok := e.xidMarksPlugin("boot-1").XidOf(1, "", ""); !ok || code != 48 {
			t.Errorf("GPU 1's mark after a restart: %d, %t; want Xid 48", code, ok)
		}
	})
	t.Run("Xid again without the GPU's UUID", func(t *testing.T) {
		e := newEnv(t)
		p := e.xidMarksPlugin("boot-1")
		p.recordXid(e.ctx, e.gpuXid(1, 48))
		p.recordXid(e.ctx, gpu.Xid{GPUIndex: 1, Code: 48, GIID: -1, CIID: -1})
		if got := p.xidGPUs[1].gpuUUID; got != e.gpuUUID(1) {
			t.Errorf("GPU 1's mark names GPU %q, want %s", got, e.gpuUUID(1))
		}
	})
	t.Run("mark without UUID where another mark is", func(t *testing.T) {
		e := newEnv(t)
		// GPU 1's own mark, saved at index 0 (numbered anew since), and
		// one without UUID at index 1.
		f := xidMarks{Version: XidMarksVersion, BootID: "boot-1", GPUs: []savedXidMark{
			{GPUIndex: 1, Xid: 79, At: time.Now()},
			{GPUIndex: 0, GPUUUID: e.gpuUUID(1), Xid: 48, At: time.Now()},
		}}
		e.writeXidMarks(f)
		p := e.xidMarksPlugin("boot-1")
		if code, ok := p.XidOf(1, "", ""); !ok || code != 48 {
			t.Errorf("GPU 1's mark: %d, %t; want its own Xid 48", code, ok)
		}
		if _, ok := p.XidOf(0, "", ""); ok {
			t.Error("GPU 0 marked")
		}
	})
	t.Run("mark of a GPU numbered anew, restored without a listing", func(t *testing.T) {
		e := newEnv(t)
		// GPU 1's mark, saved at index 0 (numbered anew since); NVML's
		// listing fails as the agent starts, so it is restored at 0.
		f := xidMarks{Version: XidMarksVersion, BootID: "boot-1", GPUs: []savedXidMark{
			{GPUIndex: 0, GPUUUID: e.gpuUUID(1), Xid: 48, At: time.Now()},
		}}
		e.writeXidMarks(f)
		p := e.xidMarksPlugin("boot-1", func(c *Config) { c.GPUs = unlistable{c.GPUs} })
		// The kubelet and the published taints name the same board: GPU
		// 1's, wherever NVML now numbers it.
		for idx, board := range map[int]string{0: e.gpuUUID(0), 1: e.gpuUUID(1)} {
			_, health := p.xidHealth(PreparedDevice{Device: "gpu", GPUIndex: idx, UUID: board})
			_, taint := p.XidOf(idx, board, "")
			if health != taint || taint != (idx == 1) {
				t.Errorf("GPU %d (%s): unhealthy to the kubelet %t, tainted %t; want both %t", idx, board, health, taint, idx == 1)
			}
		}
	})
	t.Run("clear request of a file of another version", func(t *testing.T) {
		e := newEnv(t)
		if _, _, _, err := e.xidMarksPlugin("boot-1").ClearXids(e.ctx, "r1", clearParts(time.Time{})); err != nil {
			t.Fatal(err)
		}
		e.editMarks(func(s string) string { return strings.Replace(s, XidMarksVersion, "miglayout.io/plugin-xids/v9", 1) })
		if _, _, applied, _ := e.xidMarksPlugin("boot-1").ClearXids(e.ctx, "r1", clearParts(time.Time{})); applied {
			t.Error("request r1, applied before, applied again after a restart reading a file of another version")
		}
	})
}

// TestXidRepeatedTellsOnce: the same Xid again on devices marked for it is
// counted, and wakes neither the health reports nor the agent (OnXid); a
// new Xid on them does.
func TestXidRepeatedTellsOnce(t *testing.T) {
	e := newEnv(t)
	large := e.migOn(4)
	var told []uint64
	p := e.xidMarksPlugin("boot-1", func(c *Config) {
		c.OnXid = func(_ context.Context, x gpu.Xid, _ []string) { told = append(told, x.Code) }
	})
	woken := 0
	record := func(code uint64) {
		ch := p.healthChanged()
		p.recordXid(e.ctx, devXid(large, code))
		select {
		case <-ch:
			woken++
		default:
		}
	}
	for _, code := range []uint64{94, 94, 94, 48, 48} {
		record(code)
	}
	if diff := cmp.Diff([]uint64{94, 48}, told); diff != "" || woken != 2 {
		t.Errorf("health reports woken %d times, want 2; OnXid (-want +got):\n%s", woken, diff)
	}
	if got := testutil.ToFloat64(p.metrics.xids.WithLabelValues("94", "unhealthy")); got != 3 {
		t.Errorf("Xid 94 counted %v times, want 3", got)
	}
}

// TestXidMarksTheDevicesReadWithTheEvent: an Xid of a GPU instance marks
// the devices its source read with the event, not those NVML lists when it
// is recorded: the GPU instance destroyed and made again at its placement
// (the same GPU instance ID) meanwhile, the new device is not marked. An
// Xid whose devices could not be read marks the whole GPU.
func TestXidMarksTheDevicesReadWithTheEvent(t *testing.T) {
	e := newEnv(t)
	old, small := e.migOn(4), e.migOn(3)
	if err := e.gpus.DestroyMIGDevice(e.ctx, 0, old.Device()); err != nil {
		t.Fatal(err)
	}
	made, err := e.gpus.CreateMIGDevice(e.ctx, 0, old.Device())
	if err != nil {
		t.Fatal(err)
	}
	if made.GIID != old.GIID {
		t.Fatalf("made again as GI %d, want GI %d", made.GIID, old.GIID)
	}
	p := e.xidMarksPlugin("boot-1")
	p.recordXid(e.ctx, devXid(old, 94))
	devs := map[string]gpu.MIGDevice{"old 3g": old, "new 3g": made, "1g": small}
	if diff := cmp.Diff(map[string]uint64{"old 3g": 94}, e.marks(p, devs)); diff != "" {
		t.Errorf("marks (-want +got):\n%s", diff)
	}
	unread := devXid(made, 95)
	unread.Devices, unread.DevicesErr = nil, errors.New("listing MIG devices of GPU 0: nvmlDeviceGetMigMode: ERROR_UNKNOWN")
	p.recordXid(e.ctx, unread)
	if diff := cmp.Diff(map[string]uint64{"old 3g": 94, "new 3g": 95, "1g": 95}, e.marks(p, devs)); diff != "" {
		t.Errorf("marks after an Xid whose devices could not be read (-want +got):\n%s", diff)
	}
}

// clearParts is a request of one part: the GPUs (every GPU where none)
// and, where not zero, its time.
func clearParts(at time.Time, gpus ...int) []v1alpha1.ClearXidsPart {
	p := v1alpha1.ClearXidsPart{GPUs: gpus}
	if !at.IsZero() {
		p.RequestedAt = &metav1.Time{Time: at}
	}
	return []v1alpha1.ClearXidsPart{p}
}

// TestClearXidsOfSeveralParts: a request carrying earlier ones clears a
// mark where one of the parts naming its GPU asked after the mark's Xid,
// and keeps it where every such part asked before it; a GPU no part names
// keeps its marks.
func TestClearXidsOfSeveralParts(t *testing.T) {
	// now: asked after the marks below are made.
	now := time.Now().Add(time.Minute)
	hourAgo, minuteAgo := time.Now().Add(-time.Hour), time.Now().Add(-time.Minute)
	part := func(at time.Time, gpus ...int) v1alpha1.ClearXidsPart { return clearParts(at, gpus...)[0] }
	tests := map[string]struct {
		parts                 []v1alpha1.ClearXidsPart
		wantCleared, wantKept []string
		wantMarks             map[string]uint64
	}{
		"an earlier part clears a GPU the request does not name": {
			parts:       []v1alpha1.ClearXidsPart{part(now, 2), part(now, 1)},
			wantCleared: []string{"GPU 1: Xid 48"}, wantMarks: map[string]uint64{"3g": 94},
		},
		"a later part clears what an earlier part would keep": {
			parts:       []v1alpha1.ClearXidsPart{part(hourAgo), part(now, 0)},
			wantCleared: []string{"MIG-large: Xid 94"}, wantKept: []string{"GPU 1: Xid 48"},
			wantMarks: map[string]uint64{"gpu-1": 48},
		},
		"every part naming the GPU asked before its Xid": {
			parts:    []v1alpha1.ClearXidsPart{part(minuteAgo, 0), part(hourAgo), part(now, 2)},
			wantKept: []string{"GPU 1: Xid 48", "MIG-large: Xid 94"}, wantMarks: map[string]uint64{"3g": 94, "gpu-1": 48},
		},
		"a part without a time clears however new": {
			parts:       []v1alpha1.ClearXidsPart{part(hourAgo, 0, 1), part(time.Time{}, 1)},
			wantCleared: []string{"GPU 1: Xid 48"}, wantKept: []string{"MIG-large: Xid 94"}, wantMarks: map[string]uint64{"3g": 94},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			large := e.migOn(4)
			p := e.xidMarksPlugin("boot-1")
			p.recordXid(e.ctx, devXid(large, 94))
			p.recordXid(e.ctx, e.gpuXid(1, 48))
			cleared, kept, applied, err := p.ClearXids(e.ctx, "r1", tc.parts)
			if err != nil || !applied {
				t.Fatalf("ClearXids: applied %t, %v", applied, err)
			}
			named := func(s []string) []string {
				out := []string{}
				for _, x := range s {
					out = append(out, strings.ReplaceAll(x, large.UUID, "MIG-large"))
				}
				slices.Sort(out)
				return out
			}
			if diff := cmp.Diff(named(tc.wantCleared), named(cleared)); diff != "" {
				t.Errorf("cleared (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(named(tc.wantKept), named(kept)); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMarks, e.marks(p, map[string]gpu.MIGDevice{"3g": large})); diff != "" {
				t.Errorf("marks left (-want +got):\n%s", diff)
			}
		})
	}
}
