package nvmlsim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/miglayout/miglayout/pkg/mig"
)

// MaxGPUs is the largest number of GPUs one simulator holds.
const MaxGPUs = 64

// specPartRE matches one part of a spec: an optional count "<N>x" and a model
// name, e.g. "4xA100-SXM4-80GB" or "A30".
var specPartRE = regexp.MustCompile(`^(?:([0-9]+)\s*[xX]\s*)?(\S.*)$`)

// ParseSpec parses a hardware spec: comma-separated parts "<count>x<model>",
// e.g. "4xA100-SXM4-80GB" or "2xH100-SXM5-80GB,1xA30-24GB". The count may be
// left out for one GPU ("A30"). Model names are canonical names, NVML product
// names or aliases as c (nil: mig.DefaultCatalog()) knows them. It returns one
// model per GPU in NVML index order, at most MaxGPUs. Errors name the bad part
// and its 1-based position, e.g.
// `parsing spec "2xH100,0xA30": part 2 "0xA30": count 0 is not in 1..64`;
// an unknown model wraps mig.ErrUnknownModel.
func ParseSpec(spec string, c *mig.Catalog) ([]*mig.Model, error) {
	if c == nil {
		var err error
		if c, err = defaultCatalog(); err != nil {
			return nil, fmt.Errorf("parsing spec %q: %w", spec, err)
		}
	}
	if strings.TrimSpace(spec) == "" {
		return nil, fmt.Errorf("parsing spec %q: spec is empty (want e.g. \"4xA100-SXM4-80GB\")", spec)
	}
	var out []*mig.Model
	for i, raw := range strings.Split(spec, ",") {
		part := strings.TrimSpace(raw)
		fail := func(format string, args ...any) ([]*mig.Model, error) {
			return nil, fmt.Errorf("parsing spec %q: part %d %q: %s", spec, i+1, part, fmt.Sprintf(format, args...))
		}
		if part == "" {
			return fail("empty part")
		}
		m := specPartRE.FindStringSubmatch(part)
		if m == nil {
			return fail("not of the form <count>x<model>")
		}
		n := 1
		if m[1] != "" {
			var err error
			n, err = strconv.Atoi(m[1])
			if err != nil || n < 1 || n > MaxGPUs {
				return fail("count %s is not in 1..%d", m[1], MaxGPUs)
			}
		}
		model, err := c.Model(strings.TrimSpace(m[2]))
		if err != nil {
			return nil, fmt.Errorf("parsing spec %q: part %d %q: %w", spec, i+1, part, err)
		}
		if len(out)+n > MaxGPUs {
			return fail("spec holds more than %d GPUs", MaxGPUs)
		}
		for range n {
			out = append(out, model)
		}
	}
	return out, nil
}

// canonicalSpec returns the spec of models in canonical form: runs of equal
// models as "<count>x<canonical name>", joined by commas.
func canonicalSpec(models []*mig.Model) string {
	var parts []string
	for i := 0; i < len(models); {
		j := i
		for j < len(models) && models[j].Name == models[i].Name {
			j++
		}
		parts = append(parts, fmt.Sprintf("%dx%s", j-i, models[i].Name))
		i = j
	}
	return strings.Join(parts, ",")
}

// defaultCatalog returns mig.DefaultCatalog, turning its panic on malformed
// embedded data into an error.
func defaultCatalog() (c *mig.Catalog, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("loading default MIG catalog: %v", r)
		}
	}()
	return mig.DefaultCatalog(), nil
}

// deriveUUID returns a deterministic UUID-shaped string
// ("xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", lower-case hex) from parts.
func deriveUUID(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// gpuUUID is the UUID of GPU index: "GPU-" and a UUID derived from the seed,
// the canonical spec and the index.
func gpuUUID(seed, spec string, index int) string {
	return "GPU-" + deriveUUID(seed, spec, "gpu", strconv.Itoa(index))
}

// migUUID is the UUID of the MIG device made by the compute instance with
// serial number serial on GPU index: "MIG-" and a derived UUID, new for every
// compute instance created.
func migUUID(seed, spec string, index int, serial uint64) string {
	return "MIG-" + deriveUUID(seed, spec, "mig", strconv.Itoa(index), strconv.FormatUint(serial, 10))
}

// dgxBuses are the PCI bus numbers of the eight GPUs of a DGX A100.
var dgxBuses = []uint32{0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD}

// pciBus returns the PCI bus number of GPU index: the DGX A100 buses for the
// first eight, then 0xC1, 0xC2, ... (distinct for every index < MaxGPUs).
func pciBus(index int) uint32 {
	if index < len(dgxBuses) {
		return dgxBuses[index]
	}
	return 0xC1 + uint32(index-len(dgxBuses))
}

// pciBusID returns the bus ID of GPU index in the legacy
// domain:bus:device.function form, e.g. "0000:07:00.0".
func pciBusID(index int) string { return fmt.Sprintf("0000:%02X:00.0", pciBus(index)) }

// CatalogWithProfiles returns a copy of c (nil: mig.DefaultCatalog()) in
// which the model named model also offers extra, or offers them otherwise
// where named as its own (mig.Model.WithProfiles): the hardware catalog of
// a driver that offers profiles miglayout's catalog lacks, or describes
// one otherwise, to give Config.Catalog.
func CatalogWithProfiles(c *mig.Catalog, model string, extra ...mig.Profile) (*mig.Catalog, error) {
	if c == nil {
		var err error
		if c, err = defaultCatalog(); err != nil {
			return nil, err
		}
	}
	m, err := c.Model(model)
	if err != nil {
		return nil, err
	}
	if m, err = m.WithProfiles(extra...); err != nil {
		return nil, err
	}
	return c.With(m)
}
