package mig

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"
)

// Placement is a GPU instance's position on the memory-slice axis of a GPU, as
// NVML's nvmlGpuInstancePlacement_t gives it: Start is the index of the first
// memory slice, Size the number of memory slices it occupies.
type Placement struct {
	Start int `json:"start"`
	Size  int `json:"size"`
}

// End returns the index one past the last memory slice of the placement.
func (p Placement) End() int { return p.Start + p.Size }

// Overlaps reports whether p and q share at least one memory slice.
func (p Placement) Overlaps(q Placement) bool { return p.Start < q.End() && q.Start < p.End() }

// Profile is one GPU-instance profile of a GPU model: the row that
// `nvidia-smi mig -lgip` prints and NVML's nvmlGpuInstanceProfileInfo_t holds,
// plus the placements that `nvidia-smi mig -lgipp` lists.
type Profile struct {
	// Name is the profile name as nvidia-smi shows it without the "MIG "
	// prefix, e.g. "3g.40gb" or "1g.10gb+me".
	Name string `json:"name"`
	// ID is the GI profile ID that nvidia-smi shows and that NVML reports in
	// nvmlGpuInstanceProfileInfo_t.id (e.g. 19 for 1g.10gb, 0 for 7g.80gb on
	// A100/H100). It is not the NVML_GPU_INSTANCE_PROFILE_* enum index.
	ID int `json:"id"`
	// NVMLProfile is the NVML_GPU_INSTANCE_PROFILE_* enum index passed to
	// nvmlDeviceGetGpuInstanceProfileInfo to obtain this profile.
	NVMLProfile int `json:"nvmlProfile"`
	// ComputeSlices is the number of compute slices (the "Ng" of the name).
	ComputeSlices int `json:"computeSlices"`
	// MemorySlices is the number of memory slices each instance occupies, which
	// is also the size of each of its placements.
	MemorySlices int `json:"memorySlices"`
	// MemoryMiB is the memory of one instance in MiB (memorySizeMB in NVML).
	MemoryMiB int64 `json:"memoryMiB"`
	// MaxCount is the largest number of instances of this profile on one GPU.
	MaxCount int `json:"maxCount"`
	// Multiprocessors is the number of streaming multiprocessors (SMs).
	Multiprocessors int `json:"multiprocessors"`
	// CopyEngines, Decoders (NVDEC), Encoders (NVENC), JPEGEngines (NVJPG) and
	// OFAEngines (optical flow accelerators) are the engine counts of one
	// instance.
	CopyEngines int `json:"copyEngines"`
	Decoders    int `json:"decoders"`
	Encoders    int `json:"encoders"`
	JPEGEngines int `json:"jpegEngines"`
	OFAEngines  int `json:"ofaEngines"`
	// Placements are the valid placements, in ascending order of Start.
	Placements []Placement `json:"placements"`
	// Unverified lists the JSON names of the fields above whose values no
	// cited source gives (they are read from NVML on a real GPU).
	Unverified []string `json:"unverified,omitempty"`
}

// HasPlacement reports whether p is one of the profile's valid placements.
func (p *Profile) HasPlacement(pl Placement) bool { return slices.Contains(p.Placements, pl) }

// MemoryBytes returns the memory of one instance in bytes.
func (p *Profile) MemoryBytes() int64 { return p.MemoryMiB << 20 }

// Model is a MIG-capable GPU model.
type Model struct {
	// Name is the canonical model name used in simulator specs and on the
	// command line, e.g. "A100-SXM4-80GB".
	Name string `json:"name"`
	// ProductName is the name NVML reports (nvmlDeviceGetName), e.g.
	// "NVIDIA A100-SXM4-80GB"; Aliases are other accepted names.
	ProductName string   `json:"productName"`
	Aliases     []string `json:"aliases,omitempty"`
	// Architecture is "Ampere", "Hopper" or "Blackwell".
	Architecture string `json:"architecture"`
	// CUDAComputeCapability is e.g. "8.0".
	CUDAComputeCapability string `json:"cudaComputeCapability"`
	// MemoryMiB is the whole GPU's memory in MiB.
	MemoryMiB int64 `json:"memoryMiB"`
	// Multiprocessors is the whole GPU's SM count.
	Multiprocessors int `json:"multiprocessors"`
	// MemorySlices is the length of the placement axis (8 or 4);
	// ComputeSlices the compute-slice budget shared by all GPU instances
	// (7 or 4); MaxInstances the most GPU instances at once.
	MemorySlices  int `json:"memorySlices"`
	ComputeSlices int `json:"computeSlices"`
	MaxInstances  int `json:"maxInstances"`
	// MIGModeNeedsReset is true where enabling or disabling MIG mode resets
	// the GPU (Ampere): set while a process holds the GPU, the change stays
	// pending until a reset or until it is set again with the GPU idle
	// (nvml.h, nvmlDeviceSetMigMode: activation status NVML_ERROR_IN_USE,
	// "expected to idle the device and retry"); Hopper and newer apply it
	// without a reset (NVIDIA Multi-Instance GPU User Guide, "Enable MIG
	// Mode", "GPU Reset on Hopper+ GPUs"). It also tells where the mode
	// outlives a reboot: the guide states so for Ampere only, and Hopper
	// and newer come back from a reboot, a driver reload or a GPU reset
	// with MIG mode off (nvmlsim.Sim.ResetGPU).
	MIGModeNeedsReset bool `json:"migModeNeedsReset"`
	// Source names the document section the numbers come from.
	Source string `json:"source"`
	// Unverified lists model-level fields whose values no cited source gives.
	Unverified []string  `json:"unverified,omitempty"`
	Profiles   []Profile `json:"profiles"`
	// Variant is empty for a catalog model; a copy made by WithNVMLValues
	// names its values (see Key).
	Variant string `json:"-"`

	// JPEGEngines and OFAEngines are the whole GPU's NVJPG and OFA engines
	// (its full-size profile's row; see MediaEnginesFit), worked out by the
	// catalog loader and kept by the copies WithNVMLPlacements and
	// WithProfiles make, where the profiles left may list fewer; in JSON so
	// that a model stored and read back (the NVML simulator's state) keeps
	// them. Zero: the most any profile lists.
	JPEGEngines int `json:"jpegEngines,omitempty"`
	OFAEngines  int `json:"ofaEngines,omitempty"`

	byName map[string]*Profile
}

// Profile returns the profile with the given name, or an error wrapping
// ErrUnknownProfile that lists the model's profiles.
func (m *Model) Profile(name string) (*Profile, error) {
	if p, ok := m.byName[name]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("%w %q on %s (valid: %s)", ErrUnknownProfile, name, m.Name, strings.Join(m.ProfileNames(), ", "))
}

// ProfileByID returns the profile with the given GI profile ID, or nil.
func (m *Model) ProfileByID(id int) *Profile {
	for i := range m.Profiles {
		if m.Profiles[i].ID == id {
			return &m.Profiles[i]
		}
	}
	return nil
}

// ProfileNames returns the model's profile names in catalog order (largest
// compute slices last).
func (m *Model) ProfileNames() []string {
	out := make([]string, len(m.Profiles))
	for i := range m.Profiles {
		out[i] = m.Profiles[i].Name
	}
	return out
}

// catalogFile is the shape of one models/*.yaml file. PlacementSets holds the
// YAML anchors that the models' placement lists refer to.
type catalogFile struct {
	PlacementSets map[string][]Placement `json:"placementSets,omitempty"`
	Models        []Model                `json:"models"`
}

//go:embed models/*.yaml
var modelFiles embed.FS

var (
	catalogOnce sync.Once
	catalog     *Catalog
	catalogErr  error
)

// Catalog is the set of known GPU models. The default catalog is embedded in
// the binary; see DefaultCatalog.
type Catalog struct {
	models []*Model
	byName map[string]*Model
}

// DefaultCatalog returns the embedded catalog. It panics only if the embedded
// data is malformed, which the package's catalog tests rule out.
func DefaultCatalog() *Catalog {
	catalogOnce.Do(func() { catalog, catalogErr = LoadCatalog(modelFiles) })
	if catalogErr != nil {
		panic(fmt.Sprintf("loading embedded MIG catalog: %v", catalogErr))
	}
	return catalog
}

// LoadCatalog reads every models/*.yaml file of fsys and checks each model for
// internal consistency (see Model.check).
func LoadCatalog(fsys fs.FS) (*Catalog, error) {
	names, err := fs.Glob(fsys, "models/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("listing model files: %w", err)
	}
	c := &Catalog{byName: map[string]*Model{}}
	for _, n := range names {
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", n, err)
		}
		var f catalogFile
		if err := yaml.UnmarshalStrict(data, &f); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", n, err)
		}
		for i := range f.Models {
			m := &f.Models[i]
			if err := m.init(); err != nil {
				return nil, fmt.Errorf("checking %s model %s: %w", n, m.Name, err)
			}
			for _, p := range m.Profiles {
				// Each instance takes a placement of its own: in the
				// data files a count beyond them is a typo in one of
				// the two, which the layout rule would read as the
				// smaller. (A variant made from NVML's placements may
				// have fewer than the catalog's count: WithNVMLPlacements.)
				if p.MaxCount > len(p.Placements) {
					return nil, fmt.Errorf("checking %s model %s: profile %s: maxCount %d beyond its %d placements", n, m.Name, p.Name, p.MaxCount, len(p.Placements))
				}
			}
			for _, key := range append([]string{m.Name, m.ProductName}, m.Aliases...) {
				k := normalizeModelName(key)
				if other, dup := c.byName[k]; dup && other != m {
					return nil, fmt.Errorf("checking %s: model name %q defined twice", n, key)
				}
				c.byName[k] = m
			}
			c.models = append(c.models, m)
		}
	}
	sort.Slice(c.models, func(i, j int) bool { return c.models[i].Name < c.models[j].Name })
	return c, nil
}

func (m *Model) init() error {
	m.byName = make(map[string]*Profile, len(m.Profiles))
	ids := map[int]string{}
	for i := range m.Profiles {
		p := &m.Profiles[i]
		if _, dup := m.byName[p.Name]; dup {
			return fmt.Errorf("profile %s defined twice", p.Name)
		}
		if other, dup := ids[p.ID]; dup {
			return fmt.Errorf("profiles %s and %s share GI profile ID %d", other, p.Name, p.ID)
		}
		ids[p.ID] = p.Name
		m.byName[p.Name] = p
		m.JPEGEngines = max(m.JPEGEngines, p.JPEGEngines)
		m.OFAEngines = max(m.OFAEngines, p.OFAEngines)
		if err := m.checkProfile(p); err != nil {
			return fmt.Errorf("profile %s: %w", p.Name, err)
		}
	}
	return nil
}

func (m *Model) checkProfile(p *Profile) error {
	n, err := ParseProfileName(p.Name)
	if err != nil {
		return err
	}
	if n.ComputeSlices != p.ComputeSlices {
		return fmt.Errorf("name says %d compute slices, computeSlices is %d", n.ComputeSlices, p.ComputeSlices)
	}
	if p.ComputeSlices < 1 || p.ComputeSlices > m.ComputeSlices {
		return fmt.Errorf("computeSlices %d outside 1..%d", p.ComputeSlices, m.ComputeSlices)
	}
	if p.MaxCount < 1 || p.MaxCount > m.MaxInstances {
		return fmt.Errorf("maxCount %d outside 1..%d", p.MaxCount, m.MaxInstances)
	}
	if len(p.Placements) == 0 {
		return fmt.Errorf("no placements")
	}
	for i, pl := range p.Placements {
		if pl.Size != p.MemorySlices {
			return fmt.Errorf("placement %d:%d has size %d, want memorySlices %d", pl.Start, pl.Size, pl.Size, p.MemorySlices)
		}
		if pl.Start < 0 || pl.End() > m.MemorySlices {
			return fmt.Errorf("placement %d:%d outside memory slices 0..%d", pl.Start, pl.Size, m.MemorySlices-1)
		}
		if i > 0 && pl.Start <= p.Placements[i-1].Start {
			return fmt.Errorf("placements not in ascending order at %d", pl.Start)
		}
	}
	if p.MemoryMiB <= 0 || p.MemoryMiB > m.MemoryMiB {
		return fmt.Errorf("memoryMiB %d outside 1..%d", p.MemoryMiB, m.MemoryMiB)
	}
	return nil
}

// Models returns every model, sorted by name.
func (c *Catalog) Models() []*Model { return c.models }

// Model looks a model up by canonical name, NVML product name or alias,
// ignoring case and the "NVIDIA " prefix. The error wraps ErrUnknownModel
// and lists the known models.
func (c *Catalog) Model(name string) (*Model, error) {
	if m, ok := c.byName[normalizeModelName(name)]; ok {
		return m, nil
	}
	known := make([]string, len(c.models))
	for i, m := range c.models {
		known[i] = m.Name
	}
	return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownModel, name, strings.Join(known, ", "))
}

func normalizeModelName(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	return strings.TrimPrefix(s, "nvidia ")
}
