package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
	"k8s.io/apimachinery/pkg/types"

	"github.com/miglayout/miglayout/pkg/fsyncdir"
)

// CheckpointFile is the name of the checkpoint inside Config.CheckpointDir.
const CheckpointFile = "checkpoint.json"

// CheckpointVersion is the version of the checkpoint format this package
// writes and reads; a checkpoint of another version is refused, not guessed
// at.
const CheckpointVersion = "miglayout.io/plugin-checkpoint/v1"

// PreparedClaim is a claim whose devices this plugin prepared, as the
// checkpoint records it.
type PreparedClaim struct {
	UID       types.UID        `json:"uid"`
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Devices   []PreparedDevice `json:"devices"`
}

// PreparedDevice is one device of a prepared claim: what the kubelet was
// told (requests, pool, device, CDI device ID) and what the CDI spec holds
// (the UUID and device nodes), so that the spec can be written again from
// the checkpoint alone.
type PreparedDevice struct {
	Requests    []string `json:"requests"`
	Pool        string   `json:"pool"`
	Device      string   `json:"device"`
	AdminAccess bool     `json:"adminAccess,omitempty"`
	// GPUIndex is the NVML index of the GPU the device is or lies on.
	GPUIndex int `json:"gpuIndex"`
	// UUID is the GPU or MIG device UUID (NVIDIA_VISIBLE_DEVICES).
	UUID string `json:"uuid"`
	// GPUUUID is the UUID of the GPU a MIG device lies on (empty for a
	// whole GPU, whose UUID is UUID, and in records written before the
	// field): a MIG device's own UUID is new whenever it is created
	// again, the board's never changes.
	GPUUUID string `json:"gpuUUID,omitempty"`
	// DeviceNodes are the device's own device nodes (/dev/nvidia<minor>
	// and, for a MIG device, its /dev/nvidia-caps nodes).
	DeviceNodes []string `json:"deviceNodes"`
	// CDIDeviceID is the fully qualified CDI device name.
	CDIDeviceID string `json:"cdiDeviceID"`
}

// checkpoint is the file's shape. Checksum is the CRC-32 (IEEE) of the
// compact JSON encoding of Claims as written (encoding/json sorts map keys,
// so the writer's encoding is canonical). The reader checks it against the
// claims' bytes in the file, compacted, not against its own re-encoding:
// a checkpoint a later version wrote, with fields this one does not know,
// still reads (the fields are dropped), so an agent rolled back keeps the
// node's prepared devices instead of refusing to start.
type checkpoint struct {
	Version  string                      `json:"version"`
	Checksum uint32                      `json:"checksum"`
	Claims   map[types.UID]PreparedClaim `json:"claims"`
}

// checkpointFile is checkpoint as read: the claims' bytes kept for the
// checksum.
type checkpointFile struct {
	Version  string          `json:"version"`
	Checksum uint32          `json:"checksum"`
	Claims   json.RawMessage `json:"claims"`
}

func checksum(claims map[types.UID]PreparedClaim) (uint32, error) {
	data, err := json.Marshal(claims)
	if err != nil {
		return 0, err
	}
	return crc32.ChecksumIEEE(data), nil
}

// unreadableCheckpointHelp is what an operator can do about a checkpoint
// at path that cannot be read: the plugin does not start without knowing
// which devices are prepared, since the agent would then destroy them.
// With no container on the node using its GPUs, no device is in use, and
// the file can go. A drain does not end meanwhile: the kubelet keeps a
// pod's object until its claims are unprepared, which needs the plugin.
func unreadableCheckpointHelp(path string) string {
	return fmt.Sprintf("the agent does not start without knowing which devices are prepared (it would destroy them); "+
		"if an agent of another version wrote it, run that version; otherwise cordon the node, delete its GPU pods and, once their containers "+
		"have stopped (crictl ps; the pods stay Terminating until the agent runs again, since the kubelet waits for it to unprepare their claims, "+
		"so kubectl drain does not finish), move %s aside and restart the agent", path)
}

// readCheckpoint loads path; a missing file is an empty checkpoint. A file
// of another version or with a wrong checksum is an error: the plugin must
// not forget prepared devices (they would become destroyable).
func readCheckpoint(path string) (map[types.UID]PreparedClaim, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[types.UID]PreparedClaim{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint: %w", err)
	}
	var cp checkpointFile
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, fmt.Errorf("parsing checkpoint %s: %w", path, err)
	}
	if cp.Version != CheckpointVersion {
		return nil, fmt.Errorf("reading checkpoint %s: version %q, this plugin reads %q", path, cp.Version, CheckpointVersion)
	}
	raw := cp.Claims
	if len(raw) == 0 {
		raw = json.RawMessage("null") // no claims key: as a writer encodes none
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, fmt.Errorf("parsing checkpoint %s: %w", path, err)
	}
	sum := crc32.ChecksumIEEE(compact.Bytes())
	// No claims (null or left out) may carry the checksum of the empty
	// map, "{}", which a writer leaving the key out computed.
	empty := compact.String() == "null" && cp.Checksum == crc32.ChecksumIEEE([]byte("{}"))
	if sum != cp.Checksum && !empty {
		return nil, fmt.Errorf("reading checkpoint %s: checksum %d does not match its contents (%d): the file is corrupt", path, cp.Checksum, sum)
	}
	var claims map[types.UID]PreparedClaim
	if err := json.Unmarshal(raw, &claims); err != nil {
		return nil, fmt.Errorf("parsing checkpoint %s: %w", path, err)
	}
	if claims == nil {
		claims = map[types.UID]PreparedClaim{}
	}
	return claims, nil
}

// writeCheckpoint replaces path atomically (temporary file, fsync, rename,
// fsync of the directory). An error wrapping errNotDurable means the file
// holds the new claims all the same.
func writeCheckpoint(path string, claims map[types.UID]PreparedClaim) error {
	sum, err := checksum(claims)
	if err != nil {
		return fmt.Errorf("writing checkpoint: %w", err)
	}
	data, err := json.MarshalIndent(checkpoint{Version: CheckpointVersion, Checksum: sum, Claims: claims}, "", "  ")
	if err != nil {
		return fmt.Errorf("writing checkpoint: %w", err)
	}
	if err := writeFileAtomically(path, append(data, '\n')); err != nil {
		return fmt.Errorf("writing checkpoint: %w", err)
	}
	return nil
}

// writeFileAtomically replaces path with data (mode 0600): renameio writes
// a temporary file beside it (checkpointTemps), syncs it and renames it
// over path; the directory is then synced (syncDir). An error wrapping
// errNotDurable means the rename was made.
func writeFileAtomically(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := renameio.WriteFile(path, data, 0o600, renameio.WithTempDir(dir)); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("%w: syncing directory %s: %w", errNotDurable, dir, err)
	}
	return nil
}

// checkpointTemps matches, in the checkpoint's directory, the temporary
// files of writes a kill interrupted before their rename: renameio names
// them "." + the file's name + a random number.
const checkpointTemps = "." + CheckpointFile + "[0-9]*"

// errNotDurable is a write whose rename succeeded (the file holds the new
// contents, and every reader sees them) but whose directory could not be
// synced, so a power loss may bring the old file back. Callers go on with
// the new contents, which is what the file holds: failing the operation
// would leave memory and the file disagreeing.
var errNotDurable = errors.New("written but not known to be durable")

// syncDir fsyncs a directory, so that a rename in it survives a power loss
// (fsyncdir.Sync). A variable so that tests can make it fail.
var syncDir = fsyncdir.Sync
