package plugin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// XidMarksFile is the name, inside Config.CheckpointDir, of the file that
// keeps the Xid marks (WatchXids) across restarts of the agent.
const XidMarksFile = "xids.json"

// XidMarksVersion is the version of XidMarksFile's format this package
// writes and reads.
const XidMarksVersion = "miglayout.io/plugin-xids/v1"

// xidMarksTemps matches the temporary files of XidMarksFile's writes
// (writeFileAtomically) a kill interrupted before their rename.
const xidMarksTemps = "." + XidMarksFile + "[0-9]*"

// xidMarks is XidMarksFile's shape.
type xidMarks struct {
	Version string `json:"version"`
	// BootID is the node's boot ID (Config.BootID) when the marks were
	// written: a reboot resets the GPUs, and the marks of another boot
	// are dropped.
	BootID string `json:"bootID"`
	// GPUs are the marks of whole GPUs, Devices those of MIG devices.
	GPUs    []savedXidMark `json:"gpus,omitempty"`
	Devices []savedXidMark `json:"devices,omitempty"`
	// Cleared is the ID of the last clear request applied (ClearXids),
	// kept across boots so that a request is applied once.
	Cleared string `json:"cleared,omitempty"`
}

// savedXidMark is one mark as XidMarksFile keeps it.
type savedXidMark struct {
	// GPUIndex is the NVML index of the GPU; GPUUUID its UUID.
	GPUIndex int    `json:"gpuIndex"`
	GPUUUID  string `json:"gpuUUID,omitempty"`
	// UUID is the MIG device's UUID; empty for a mark of the whole GPU.
	UUID string    `json:"uuid,omitempty"`
	Xid  uint64    `json:"xid"`
	At   time.Time `json:"at"`
}

// saveXidMarksLocked writes the marks and the last clear request applied
// to XidMarksFile (xidMu held). Without Config.BootID the file's marks are
// never restored (RestoreXids), but its request is: a request the Node
// still carries is not applied again after a restart.
func (p *Plugin) saveXidMarksLocked() (err error) {
	f := xidMarks{Version: XidMarksVersion, BootID: p.cfg.BootID, Cleared: p.xidCleared}
	defer func() {
		if err != nil {
			return // the file's times are not the marks': written again at the next repeat
		}
		for k, m := range p.xidGPUs {
			m.saved = m.at
			p.xidGPUs[k] = m
		}
		for k, m := range p.xidDevices {
			m.saved = m.at
			p.xidDevices[k] = m
		}
	}()
	for _, idx := range slices.Sorted(maps.Keys(p.xidGPUs)) {
		m := p.xidGPUs[idx]
		f.GPUs = append(f.GPUs, savedXidMark{GPUIndex: idx, GPUUUID: m.gpuUUID, Xid: m.code, At: m.at})
	}
	for _, uuid := range slices.Sorted(maps.Keys(p.xidDevices)) {
		m := p.xidDevices[uuid]
		f.Devices = append(f.Devices, savedXidMark{GPUIndex: m.gpuIndex, GPUUUID: m.gpuUUID, UUID: uuid, Xid: m.code, At: m.at})
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("writing Xid marks: %w", err)
	}
	if err := writeFileAtomically(p.xidMarksPath(), append(data, '\n')); err != nil && !errors.Is(err, errNotDurable) {
		return fmt.Errorf("writing Xid marks: %w", err)
	}
	return nil
}

func (p *Plugin) xidMarksPath() string {
	return filepath.Join(p.cfg.CheckpointDir, XidMarksFile)
}

// RestoreXids loads the Xid marks an earlier run of the agent kept in
// XidMarksFile, so that devices an Xid hit stay Unhealthy and tainted
// across a restart of the agent (an upgrade included), where the file was
// written in this boot of the node (Config.BootID): a reboot resets the
// GPUs, so the marks of another boot are dropped. Call it once after New,
// before Start and WatchXids.
//
// A mark of a whole GPU is restored at the index of the GPU with its UUID
// (GPUs), or at its index where NVML does not list that UUID (the GPU
// unreadable) and no other GPU is there; one made where NVML could not
// read the GPU's UUID, at its index where no other mark is. A mark's time
// is the one the file holds, which may be up to xidResaveAfter older than
// the Xid's last (ClearXids compares it). No mark is restored without
// Config.BootID or Config.Xids (the watch off), nor one of an Xid now in
// Config.IgnoredXids, nor one of a MIG device gone; those are dropped from
// the file too. The last clear request applied is read in every case
// (ClearXids applies a request once). A file that cannot be read is
// logged and left; the marks start empty then, and the next write
// replaces it.
func (p *Plugin) RestoreXids(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("file", p.xidMarksPath())
	data, err := os.ReadFile(p.xidMarksPath())
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var f xidMarks
	if err == nil {
		err = json.Unmarshal(data, &f)
	}
	if err == nil && f.Version != XidMarksVersion {
		err = fmt.Errorf("version %q, this agent reads %q", f.Version, XidMarksVersion)
	}
	if err != nil {
		// The last clear request applied, where the file says it (one
		// of another version), so that the Node's is not applied again.
		var cleared struct {
			Cleared string `json:"cleared"`
		}
		if json.Unmarshal(data, &cleared) == nil {
			p.xidMu.Lock()
			p.xidCleared = cleared.Cleared
			p.xidMu.Unlock()
		}
		logger.Error(err, "Reading the Xid marks of the agent's last run failed: devices an Xid hit before this restart are Healthy again (kubectl miglayout status marks none)")
		return
	}
	p.xidMu.Lock()
	defer p.xidMu.Unlock()
	p.xidCleared = f.Cleared
	why := ""
	switch {
	case len(f.GPUs)+len(f.Devices) == 0:
		return
	case p.cfg.Xids == nil:
		why = "the Xid watch is off (--device-health-xids=false)"
	case p.cfg.BootID == "":
		why = "the node's boot ID is unknown, so a reboot since cannot be ruled out"
	case f.BootID != p.cfg.BootID:
		why = "the node rebooted since they were written, which reset its GPUs"
	}
	total := len(f.GPUs) + len(f.Devices)
	// What is dropped is gone from the file too: a later restart, with
	// the watch on again, does not bring it back.
	defer func() {
		if len(p.xidGPUs)+len(p.xidDevices) == total {
			return
		}
		if err := p.saveXidMarksLocked(); err != nil {
			logger.Error(err, "Writing the Xid marks without those dropped failed: a later restart may restore them")
		}
	}()
	if why != "" {
		logger.Info("Xid marks of the agent's last run dropped: "+why, "gpuMarks", len(f.GPUs), "deviceMarks", len(f.Devices))
		return
	}
	f.GPUs = slices.DeleteFunc(f.GPUs, func(s savedXidMark) bool { return slices.Contains(p.ignoredXids, s.Xid) })
	f.Devices = slices.DeleteFunc(f.Devices, func(s savedXidMark) bool { return slices.Contains(p.ignoredXids, s.Xid) })
	at := map[string]int{}
	taken := map[int]string{}
	gpus, listErr := p.cfg.GPUs.GPUs(ctx)
	for _, g := range gpus {
		at[g.UUID] = g.Index
		taken[g.Index] = g.UUID
	}
	var restored []string
	// Marks naming their GPU's UUID first: a mark made where NVML could
	// not read the UUID (the GPU off the bus) stays at its index, where no
	// other mark is.
	gpuMarks := slices.Clone(f.GPUs)
	slices.SortStableFunc(gpuMarks, func(a, b savedXidMark) int { return cmp.Compare(boolInt(a.GPUUUID == ""), boolInt(b.GPUUUID == "")) })
	for _, s := range gpuMarks {
		idx, ok := at[s.GPUUUID]
		if !ok {
			idx = s.GPUIndex
			if other, there := taken[idx]; there && s.GPUUUID != "" && other != s.GPUUUID {
				logger.Info("Xid mark of a GPU NVML no longer lists dropped", "gpu", s.GPUIndex, "gpuUUID", s.GPUUUID, "xid", s.Xid, "nowAtIndex", other)
				continue
			}
		}
		if held, marked := p.xidGPUs[idx]; marked {
			logger.Info("Xid mark of a GPU whose UUID NVML could not read dropped: its index holds another mark", "gpu", idx, "xid", s.Xid, "kept", held.code)
			continue
		}
		p.xidGPUs[idx] = xidMark{code: s.Xid, gpuIndex: idx, gpuUUID: s.GPUUUID, at: s.At, saved: s.At}
		restored = append(restored, fmt.Sprintf("GPU %d: Xid %d", idx, s.Xid))
	}
	// MIG device UUIDs by GPU, each GPU read once; nil where the read
	// failed (its marks are kept).
	present := map[int]map[string]bool{}
	for _, s := range f.Devices {
		idx, ok := at[s.GPUUUID]
		if !ok {
			idx = s.GPUIndex
		}
		if _, read := present[idx]; ok && !read {
			present[idx] = nil
			if migs, err := p.cfg.GPUs.MIGDevices(ctx, idx); err == nil {
				present[idx] = map[string]bool{}
				for _, d := range migs {
					present[idx][d.UUID] = true
				}
			}
		}
		if ok && present[idx] != nil && !present[idx][s.UUID] {
			// Destroyed since: the UUID will not be seen again.
			continue
		}
		p.xidDevices[s.UUID] = xidMark{code: s.Xid, gpuIndex: idx, gpuUUID: s.GPUUUID, at: s.At, saved: s.At}
		restored = append(restored, fmt.Sprintf("%s: Xid %d", s.UUID, s.Xid))
	}
	if len(restored) > 0 {
		logger.Info("Restored the Xid marks of the agent's last run: the devices they name stay Unhealthy until kubectl miglayout clear-xids or a reboot", "marks", restored, "gpuListingErr", listErr)
	}
}

// clearMarks deletes, in key order, the marks take returns true for,
// telling take each mark as "<name(key)>: Xid <code>".
func clearMarks[K cmp.Ordered](marks map[K]xidMark, name func(K) string, take func(xidMark, string) bool) {
	for _, k := range slices.Sorted(maps.Keys(marks)) {
		if m := marks[k]; take(m, fmt.Sprintf("%s: Xid %d", name(k), m.code)) {
			delete(marks, k)
		}
	}
}

// markCounts counts the marks held by GPU index and Xid (a mark of the
// whole GPU counts 1, as does each marked MIG device), for the marks gauge.
func (p *Plugin) markCounts() map[markKey]int {
	p.xidMu.Lock()
	defer p.xidMu.Unlock()
	out := map[markKey]int{}
	for idx, m := range p.xidGPUs {
		out[markKey{idx, m.code}]++
	}
	for _, m := range p.xidDevices {
		out[markKey{m.gpuIndex, m.code}]++
	}
	return out
}

// PruneXids forgets the marks of MIG devices that no longer exist: of each
// GPU in present (GPU index to the UUIDs of its MIG devices, as NVML lists
// them now), the marks of devices whose UUID is not listed. A device made
// again has a new UUID, so such a mark would never apply again; the agent
// calls it after each pass, so that the marks gauge counts only devices
// that are there. GPUs not in present (unreadable) keep their marks.
func (p *Plugin) PruneXids(ctx context.Context, present map[int][]string) {
	p.xidMu.Lock()
	var pruned []string
	for uuid, m := range p.xidDevices {
		if uuids, ok := present[m.gpuIndex]; ok && !slices.Contains(uuids, uuid) {
			delete(p.xidDevices, uuid)
			pruned = append(pruned, uuid)
		}
	}
	var err error
	if len(pruned) > 0 {
		err = p.saveXidMarksLocked()
	}
	p.xidMu.Unlock()
	if len(pruned) == 0 {
		return
	}
	logger := klog.FromContext(ctx)
	logger.V(1).Info("Xid marks of MIG devices destroyed since forgotten", "devices", pruned)
	if err != nil {
		logger.Error(err, "Keeping the Xid marks for the agent's next run failed")
	}
}

// ClearXids forgets the Xid marks of the GPUs each part of a request names
// (all of them where it names none), once per request ID: an operator asks
// for it after resetting the GPUs (kubectl miglayout clear-xids). Where a
// part's requestedAt is set, a mark whose Xid came last in its second or
// after (by the node's clock; after a restart, as the file has it, which
// may be up to xidResaveAfter earlier) is kept, unless another part clears
// it: an Xid that came after the request, while the agent was busy or
// down, was not seen by whoever asked, and requestedAt, written to the
// second, does not tell an Xid of its second from before or after it. A
// part applied again (carried by a later request) so clears no mark made
// after it was first applied. A request already applied, by this
// run or an earlier one of the agent (XidMarksFile), does nothing and
// returns applied false. It returns the marks it cleared and those it kept
// ("GPU <index>: Xid <code>", "<MIG device UUID>: Xid <code>"), and wakes
// the health reports. An error writing XidMarksFile is returned with the
// marks cleared in memory all the same: the request is then applied again
// after a restart.
func (p *Plugin) ClearXids(ctx context.Context, request string, parts []v1alpha1.ClearXidsPart) (cleared, kept []string, applied bool, err error) {
	p.xidMu.Lock()
	if request == p.xidCleared {
		p.xidMu.Unlock()
		return nil, nil, false, nil
	}
	// hits: a part names the mark's GPU; clears: one of those was asked
	// in a later second than the mark's Xid came (the request's time is
	// written to the second).
	hits := func(m xidMark) (hit, clears bool) {
		for _, part := range parts {
			if len(part.GPUs) > 0 && !slices.Contains(part.GPUs, m.gpuIndex) {
				continue
			}
			hit = true
			if part.RequestedAt == nil || part.RequestedAt.IsZero() || m.at.Before(part.RequestedAt.Time.Truncate(time.Second)) {
				return true, true
			}
		}
		return hit, false
	}
	take := func(m xidMark, what string) bool {
		switch hit, clears := hits(m); {
		case !hit:
			return false
		case !clears:
			kept = append(kept, what)
			return false
		}
		cleared = append(cleared, what)
		return true
	}
	clearMarks(p.xidGPUs, func(idx int) string { return fmt.Sprintf("GPU %d", idx) }, take)
	clearMarks(p.xidDevices, func(uuid string) string { return uuid }, take)
	p.xidCleared = request
	err = p.saveXidMarksLocked()
	p.xidMu.Unlock()
	klog.FromContext(ctx).Info("Xid marks cleared on request", "request", request, "parts", parts, "cleared", cleared, "keptNewer", kept)
	if len(cleared) > 0 {
		p.notifyHealth()
	}
	return cleared, kept, true, err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
