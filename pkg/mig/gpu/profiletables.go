package gpu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"

	"github.com/google/renameio/v2"
	"k8s.io/klog/v2"

	"github.com/miglayout/miglayout/pkg/mig"
)

// ProfileTablesVersion is the version of the file KeepProfileTables reads
// and writes; a file of another version is set aside (the tables are read
// from NVML again, each the first time its GPU is in MIG mode).
const ProfileTablesVersion = 1

// profileTablesFile is the file KeepProfileTables keeps: each GPU's profile
// table as last read from NVML, by GPU UUID.
type profileTablesFile struct {
	Version int                  `json:"version"`
	GPUs    []storedProfileTable `json:"gpus"`
}

// storedProfileTable is one GPU's profileTable with what it is valid for:
// the NVIDIA driver that gave it (nvmlSystemGetDriverVersion, e.g.
// "580.95.05") and the catalog model it was compared with (name and
// catalogFingerprint), since the table holds only where NVML's values differ
// from that model's.
type storedProfileTable struct {
	UUID          string                     `json:"uuid"`
	DriverVersion string                     `json:"driverVersion"`
	Model         string                     `json:"model"`
	Catalog       string                     `json:"catalog"`
	Values        []mig.NVMLProfileValues    `json:"values,omitempty"`
	Mismatches    []string                   `json:"mismatches,omitempty"`
	Placements    map[string][]mig.Placement `json:"placements,omitempty"`
	IDs           map[string]int             `json:"ids,omitempty"`
}

// catalogFingerprint identifies the catalog's description of model (the
// first 16 hex digits of the SHA-256 of its JSON form): a table compared
// with another description of the model is not used.
func catalogFingerprint(model *mig.Model) string {
	data, err := json.Marshal(model)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// KeepProfileTables keeps each GPU's profile table (what NVML says of the
// profiles otherwise than the catalog: GPU.ProfileValues,
// CatalogMismatches, NVMLPlacements, NVMLProfileIDs) in the file at path as
// well as in memory, and takes the tables the file holds for the loaded
// driver (nvmlSystemGetDriverVersion) and the catalog's present description
// of each GPU's model. A GPU in MIG-off mode is then reported with the table
// NVML gave in its last MIG mode, also after a restart, so that a layout the
// driver refuses is refused before MIG mode is turned on for it; a table
// taken from the file is read from NVML again the first time its GPU is in
// MIG mode, as one read in an earlier MIG mode is.
//
// The file is a cache: a missing file is an empty one, and one that cannot
// be read or parsed, or is of another version (ProfileTablesVersion), is
// logged and replaced at the next write. Each table read from NVML rewrites
// the file (renameio: a temporary file renamed over it); a write that fails
// is logged and leaves the table in memory. Call it once, before the first
// GPUs, from the one process that owns path (the agent holds its state
// directory's lock).
func (m *NVMLManager) KeepProfileTables(ctx context.Context, path string) {
	logger := klog.FromContext(ctx).WithValues("path", path)
	driver, err := m.driverVersion(ctx)
	if err != nil {
		logger.Error(err, "Not keeping NVML's profile tables across restarts: the driver version is not readable")
		return
	}
	m.profilesMu.Lock()
	defer m.profilesMu.Unlock()
	m.tablesPath, m.tablesDriver = path, driver
	stored, err := readProfileTables(path)
	if err != nil {
		logger.Error(err, "Ignoring the saved NVML profile tables; each is read from NVML again the first time its GPU is in MIG mode")
		return
	}
	for _, s := range stored {
		model, err := m.catalog.Model(s.Model)
		if s.DriverVersion != driver || err != nil || catalogFingerprint(model) != s.Catalog {
			logger.V(1).Info("Dropping a saved NVML profile table of another driver or catalog", "uuid", s.UUID, "driverVersion", s.DriverVersion, "model", s.Model)
			continue
		}
		if _, ok := m.profiles[s.UUID]; ok {
			continue // read from NVML in this process already
		}
		if m.profiles == nil {
			m.profiles = map[string]profileTable{}
		}
		m.profiles[s.UUID] = profileTable{model: s.Model, values: s.Values, mismatches: s.Mismatches, placements: s.Placements, ids: s.IDs}
		if m.staleProfiles == nil {
			m.staleProfiles = map[string]bool{}
		}
		m.staleProfiles[s.UUID] = true
	}
	logger.V(1).Info("Kept NVML profile tables", "gpus", len(m.profiles))
}

// driverVersion reads nvmlSystemGetDriverVersion.
func (m *NVMLManager) driverVersion(ctx context.Context) (string, error) {
	leave, err := m.enter(ctx)
	if err != nil {
		return "", err
	}
	defer leave()
	v, ret := m.lib.SystemGetDriverVersion()
	if err := nvmlErr("nvmlSystemGetDriverVersion", ret); err != nil {
		return "", fmt.Errorf("getting driver version: %w", err)
	}
	return v, nil
}

// readProfileTables reads the file at path; a file that does not exist
// holds no table.
func readProfileTables(path string) ([]storedProfileTable, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading NVML profile tables: %w", err)
	}
	var f profileTablesFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("parsing NVML profile tables: %w", err)
	}
	if f.Version != ProfileTablesVersion {
		return nil, fmt.Errorf("NVML profile tables of version %d, want %d", f.Version, ProfileTablesVersion)
	}
	return f.GPUs, nil
}

// saveProfileTablesLocked writes every table in memory to the file
// KeepProfileTables named (none: nothing). The caller holds profilesMu.
func (m *NVMLManager) saveProfileTablesLocked(ctx context.Context) {
	if m.tablesPath == "" {
		return
	}
	f := profileTablesFile{Version: ProfileTablesVersion}
	for _, uuid := range slices.Sorted(maps.Keys(m.profiles)) {
		t := m.profiles[uuid]
		model, err := m.catalog.Model(t.model)
		if err != nil {
			continue
		}
		f.GPUs = append(f.GPUs, storedProfileTable{UUID: uuid, DriverVersion: m.tablesDriver, Model: t.model, Catalog: catalogFingerprint(model),
			Values: t.values, Mismatches: t.mismatches, Placements: t.placements, IDs: t.ids})
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err == nil {
		err = renameio.WriteFile(m.tablesPath, data, 0o644)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Saving NVML's profile tables; after a restart a GPU in MIG-off mode is checked against the catalog until MIG mode is on", "path", m.tablesPath)
	}
}
