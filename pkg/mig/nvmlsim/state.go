package nvmlsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/miglayout/miglayout/pkg/mig"
)

// State is the exported, JSON-serialisable view of the simulated hardware that
// Snapshot returns. Every list is in a deterministic order: GPUs by index, GPU
// instances by placement start, compute instances by ID, processes by PID,
// faults in injection order.
type State struct {
	// Spec is the canonical hardware spec, e.g. "2xH100-SXM5-80GB,1xA30-24GB".
	Spec      string    `json:"spec"`
	GPUs      []GPU     `json:"gpus"`
	Processes []Process `json:"processes"`
	// Clients hold GPUs, GPU instances or MIG devices without a compute
	// process (OpenClient), by ID.
	Clients []Client `json:"clients,omitempty"`
	// Faults are the injected faults not yet triggered; Nth counts down to
	// the call that fails (1 = the next call).
	Faults []Fault `json:"faults,omitempty"`
	// Xids are the Xid critical errors injected (InjectXid), oldest first,
	// the last maxXids of them.
	Xids []Xid `json:"xids,omitempty"`
}

// GPU is one simulated GPU.
type GPU struct {
	Index int `json:"index"`
	// UUID is "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
	UUID string `json:"uuid"`
	// Model is the catalog's canonical model name, ProductName what
	// nvmlDeviceGetName returns.
	Model       string `json:"model"`
	ProductName string `json:"productName"`
	// MemoryMiB is the whole GPU's memory in MiB.
	MemoryMiB int64 `json:"memoryMiB"`
	// PCIBusID is the legacy form "0000:07:00.0"; Minor the device minor.
	PCIBusID string `json:"pciBusID"`
	Minor    int    `json:"minor"`
	// MIGCurrent and MIGPending are the MIG modes nvmlDeviceGetMigMode
	// reports; they differ while an Ampere mode change waits for ResetGPU.
	MIGCurrent bool `json:"migCurrent"`
	MIGPending bool `json:"migPending"`
	// GPUInstances are ordered by placement start.
	GPUInstances []GPUInstance `json:"gpuInstances,omitempty"`
	// Lost marks a GPU fallen off the bus (LoseGPU; an Xid 79 on real
	// hardware): nvmlDeviceGetCount still counts it, but getting its
	// handle and every call on it or its instances return
	// ERROR_GPU_IS_LOST until RecoverGPU (a reboot or PCI rescan).
	Lost bool `json:"lost,omitempty"`
}

// Layout returns the GPU instances of g as a mig.Layout (profile@start).
func (g GPU) Layout() mig.Layout {
	l := mig.Layout{}
	for _, gi := range g.GPUInstances {
		l = append(l, mig.Device{Profile: gi.Profile, Start: gi.Placement.Start})
	}
	return l.Canonical()
}

// GPUInstance is one GPU instance (GI).
type GPUInstance struct {
	// ID is the GI ID NVML reports (from the placement, see giID).
	ID int `json:"id"`
	// ProfileID is the GI profile ID (nvmlGpuInstanceProfileInfo_t.id),
	// Profile its catalog name.
	ProfileID int           `json:"profileID"`
	Profile   string        `json:"profile"`
	Placement mig.Placement `json:"placement"`
	// UID is a serial number unique over the life of the state; handles carry
	// it so that a handle to a destroyed GI never reaches a new GI that got
	// the same ID.
	UID uint64 `json:"uid"`
	// ComputeInstances are ordered by ID (the simulator allows one).
	ComputeInstances []ComputeInstance `json:"computeInstances,omitempty"`
}

// ComputeInstance is one compute instance (CI); with its GI it forms a MIG
// device.
type ComputeInstance struct {
	// ID is the CI ID NVML reports (smallest free ID >= 0 in the GI).
	ID int `json:"id"`
	// ProfileID is the CI profile index (NVML_COMPUTE_INSTANCE_PROFILE_*):
	// the full-size profile of its GI for the CIs miglayout creates.
	ProfileID int `json:"profileID"`
	// Start and Size are the compute slices of the GI the CI holds; 0, 0
	// (state written before they were recorded) is all of them.
	Start int `json:"start,omitempty"`
	Size  int `json:"size,omitempty"`
	// UUID is the MIG device UUID "MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
	UUID string `json:"uuid"`
	UID  uint64 `json:"uid"`
}

// Process is a simulated compute process.
type Process struct {
	PID      uint32 `json:"pid"`
	GPUIndex int    `json:"gpuIndex"`
	// GIID and CIID locate the MIG device the process runs on; both are -1
	// for a process on the whole GPU.
	GIID int `json:"giID"`
	CIID int `json:"ciID"`
	// DeviceUUID is the GPU or MIG device UUID given to StartProcess.
	DeviceUUID    string `json:"deviceUUID"`
	UsedMemoryMiB int64  `json:"usedMemoryMiB"`
}

// stateVersion is the version of the state file format.
const stateVersion = 1

// fileState is what the state file (or the in-memory state) holds: the
// exported State plus the models of its GPUs, so that the file is
// self-contained, and the counters.
type fileState struct {
	Version int    `json:"version"`
	Seed    string `json:"seed,omitempty"`
	State
	// Models holds the catalog entry of every model in Spec, by canonical
	// name; the simulator only reads them (clone shares them). Only the
	// exported fields survive JSON (a state file's models), so the
	// simulator never calls Model.Profile on them (see profileByID).
	Models     map[string]*mig.Model `json:"models"`
	NextPID    uint32                `json:"nextPID"`
	NextSerial uint64                `json:"nextSerial"`
}

// firstPID is the PID of the first simulated process.
const firstPID = 1000

func newFileState(seed string, models []*mig.Model) *fileState {
	spec := canonicalSpec(models)
	st := &fileState{
		Version:    stateVersion,
		Seed:       seed,
		State:      State{Spec: spec, GPUs: []GPU{}, Processes: []Process{}},
		Models:     map[string]*mig.Model{},
		NextPID:    firstPID,
		NextSerial: 1,
	}
	for i, m := range models {
		st.Models[m.Name] = m
		st.GPUs = append(st.GPUs, GPU{
			Index:       i,
			UUID:        gpuUUID(seed, spec, i),
			Model:       m.Name,
			ProductName: m.ProductName,
			MemoryMiB:   m.MemoryMiB,
			PCIBusID:    pciBusID(i),
			Minor:       i,
		})
	}
	return st
}

func decodeState(data []byte) (*fileState, error) {
	var st fileState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("decoding state: %w", err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("decoding state: version %d, want %d", st.Version, stateVersion)
	}
	for _, g := range st.GPUs {
		if st.Models[g.Model] == nil {
			return nil, fmt.Errorf("decoding state: GPU %d has model %q without a models entry", g.Index, g.Model)
		}
	}
	if st.Processes == nil {
		st.Processes = []Process{}
	}
	return &st, nil
}

func encodeState(st *fileState) ([]byte, error) {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding state: %w", err)
	}
	return append(data, '\n'), nil
}

// nextSerial returns a new serial number (UIDs, MIG UUIDs).
func (st *fileState) nextSerial() uint64 {
	n := st.NextSerial
	st.NextSerial++
	return n
}

// gpu returns GPU index and its model, or ERROR_INVALID_ARGUMENT (no such
// GPU), or ERROR_GPU_IS_LOST (GPU.Lost).
func (st *fileState) gpu(index int) (*GPU, *mig.Model, nvml.Return) {
	if index < 0 || index >= len(st.GPUs) {
		return nil, nil, nvml.ERROR_INVALID_ARGUMENT
	}
	g := &st.GPUs[index]
	if g.Lost {
		return nil, nil, nvml.ERROR_GPU_IS_LOST
	}
	return g, st.Models[g.Model], nvml.SUCCESS
}

// gi returns the GI of g with the given ID, or nil.
func (g *GPU) gi(id int) *GPUInstance {
	for i := range g.GPUInstances {
		if g.GPUInstances[i].ID == id {
			return &g.GPUInstances[i]
		}
	}
	return nil
}

// ci returns the CI of gi with the given ID, or nil.
func (gi *GPUInstance) ci(id int) *ComputeInstance {
	for i := range gi.ComputeInstances {
		if gi.ComputeInstances[i].ID == id {
			return &gi.ComputeInstances[i]
		}
	}
	return nil
}

// processesOn returns the processes on GPU index whose GI (giID >= 0) and CI
// (ciID >= 0) match; -1 matches any.
func (st *fileState) processesOn(index, giID, ciID int) []Process {
	var out []Process
	for _, p := range st.Processes {
		if p.GPUIndex == index && (giID < 0 || p.GIID == giID) && (ciID < 0 || p.CIID == ciID) {
			out = append(out, p)
		}
	}
	return out
}

func usedMiB(ps []Process) int64 {
	var n int64
	for _, p := range ps {
		n += p.UsedMemoryMiB
	}
	return n
}

// profileByID returns m's profile with GI profile ID id, or nil.
func profileByID(m *mig.Model, id int) *mig.Profile {
	for i := range m.Profiles {
		if m.Profiles[i].ID == id {
			return &m.Profiles[i]
		}
	}
	return nil
}

// profileByNVML returns m's profile with NVML_GPU_INSTANCE_PROFILE_* index
// idx, or nil.
func profileByNVML(m *mig.Model, idx int) *mig.Profile {
	for i := range m.Profiles {
		if m.Profiles[i].NVMLProfile == idx {
			return &m.Profiles[i]
		}
	}
	return nil
}

// update runs fn on the current state and stores the state back when fn
// reports a change. With a state file it holds an exclusive flock on
// path+".lock" from the read to the write, so processes sharing the file
// serialise; the write is a temp file renamed over the state file. Both
// modes give fn a copy of its own (fileState.clone), so changes made before
// fn fails are never stored, and a value fn hands out never aliases the
// stored state.
//
// A state file is read on every call, since another process may have
// written it; it is decoded only when its bytes differ from those last read
// or written here (decoding was most of a call's time: an inventory read of
// 8 GPUs of 7 MIG devices each makes about 840 calls).
func (s *Sim) update(fn func(st *fileState) (changed bool, err error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.path == "" {
		st := s.mem.clone()
		changed, err := fn(st)
		if err != nil || !changed {
			return err
		}
		s.mem = st.clone()
		return nil
	}
	unlock, err := lockFile(s.path + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	data, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("reading state file: %w", err)
	}
	if s.read == nil || !bytes.Equal(data, s.readData) {
		st, err := decodeState(data)
		if err != nil {
			return fmt.Errorf("reading state file %s: %w", s.path, err)
		}
		s.read, s.readData = st, data
	}
	st := s.read.clone()
	changed, err := fn(st)
	if err != nil || !changed {
		return err
	}
	if data, err = writeStateFile(s.path, st); err != nil {
		s.read, s.readData = nil, nil
		return err
	}
	s.read, s.readData = st.clone(), data
	return nil
}

// clone returns a deep copy of st but for its models, which are shared:
// the simulator only reads them (TestCloneSharesNothing).
func (st *fileState) clone() *fileState {
	c := *st
	c.GPUs = slices.Clone(st.GPUs)
	for i := range c.GPUs {
		g := &c.GPUs[i]
		g.GPUInstances = slices.Clone(g.GPUInstances)
		for j := range g.GPUInstances {
			gi := &g.GPUInstances[j]
			gi.ComputeInstances = slices.Clone(gi.ComputeInstances)
		}
	}
	c.Processes = slices.Clone(st.Processes)
	c.Clients = slices.Clone(st.Clients)
	c.Faults = slices.Clone(st.Faults)
	c.Xids = slices.Clone(st.Xids)
	return &c
}

// lockFile takes an exclusive flock on path (created if missing) and returns
// the function that releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing the descriptor releases the lock
}

func readStateFile(path string) (*fileState, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading state file: %w", err)
	}
	st, err := decodeState(data)
	if err != nil {
		return nil, fmt.Errorf("reading state file %s: %w", path, err)
	}
	return st, nil
}

// writeStateFile writes st to a temp file next to path and renames it over
// path, so a reader sees the old or the new state, never a mix, and returns
// the bytes written. It does not fsync: simulated hardware need not survive
// a power cut.
func writeStateFile(path string, st *fileState) ([]byte, error) {
	data, err := encodeState(st)
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("writing state file: %w", err)
	}
	name := tmp.Name()
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(name, 0o644)
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return nil, fmt.Errorf("writing state file %s: %w", path, err)
	}
	return data, nil
}

// stateFileExists reports whether path exists.
func stateFileExists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking state file: %w", err)
	}
	return true, nil
}

// sortGIs orders g's GPU instances by placement start.
func (g *GPU) sortGIs() {
	slices.SortFunc(g.GPUInstances, func(a, b GPUInstance) int { return a.Placement.Start - b.Placement.Start })
}
