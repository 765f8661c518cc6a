package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

func newImportCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Turn other tools' MIG configurations into MigLayouts",
	}
	cmd.AddCommand(newImportMigPartedCommand(e))
	return cmd
}

// migPartedFile is nvidia-mig-parted's configuration file (version v1).
type migPartedFile struct {
	Version    string                      `json:"version"`
	MigConfigs map[string][]migPartedEntry `json:"mig-configs"`
}

// migPartedEntry is one entry of a mig-config: which GPUs (device-filter by
// PCI device ID, devices "all" or a list of indices), MIG mode and devices.
// MigEnabled is nil where the entry lacks mig-enabled, and MigDevices where
// it lacks mig-devices or sets it null (mig-devices: {} is an empty map):
// mig-parted refuses an entry without mig-enabled, one with MIG on and no
// mig-devices, and one with MIG off and devices (checkEntry).
type migPartedEntry struct {
	DeviceFilter any            `json:"device-filter,omitempty"`
	Devices      any            `json:"devices"`
	MigEnabled   *bool          `json:"mig-enabled"`
	MigDevices   map[string]int `json:"mig-devices,omitempty"`
}

// checkEntry refuses what mig-parted's own parser refuses in an entry
// (api/spec/v1 of NVIDIA/mig-parted): mig-enabled missing, MIG on without
// mig-devices, MIG off with devices. Read otherwise, such an entry would
// turn MIG off on every GPU it names (mig-enabled forgotten beside the
// devices wanted), or destroy every free device (mig-devices forgotten).
func checkEntry(en migPartedEntry) error {
	switch {
	case en.MigEnabled == nil:
		return errors.New("mig-enabled is missing (mig-parted requires it: true or false)")
	case *en.MigEnabled && en.MigDevices == nil:
		return errors.New("mig-enabled is true and mig-devices is missing, which mig-parted refuses (write mig-devices: {} for MIG mode on with no device)")
	case !*en.MigEnabled && len(en.MigDevices) > 0:
		return errors.New("mig-enabled is false and mig-devices names devices, which mig-parted refuses")
	}
	return nil
}

// pciModels maps the PCI device IDs that mig-parted's device-filter uses
// ("0x20B210DE": device 0x20B2 of vendor 0x10DE) to the catalog's models,
// as the device filters of mig-parted's own config-default.yaml name them
// (its all-balanced entry: 0x233B H200 NVL; 0x2342 GH200 and 0x233D
// H100 96GB, one MIG geometry; 0x20F3 and 0x20F5 A800 with the A100-80GB,
// 0x2324 and 0x2322 H800 with the H100-80GB, 0x233A H800 NVL with the H100
// NVL; 0x2329 H20, 0x2348 GH200 144G HBM3e, 0x2941 GB200). IDs of GPUs the
// catalog does not have (PG506) are left out.
var pciModels = map[string]string{
	"20B0": "A100-SXM4-40GB",
	"20B1": "A100-PCIE-40GB",
	"20F1": "A100-PCIE-40GB",
	"20B2": "A100-SXM4-80GB",
	"20B5": "A100-PCIE-80GB",
	"20B7": "A30-24GB",
	"2330": "H100-SXM5-80GB",
	"2331": "H100-PCIE-80GB",
	"2321": "H100-NVL-94GB",
	"2335": "H200-SXM5-141GB",
	"233B": "H200-NVL-141GB",
	"2342": "GH200-96GB",
	"233D": "GH200-96GB",
	"2901": "B200-180GB",
	"20F3": "A800-SXM4-80GB",
	"20F5": "A800-PCIE-80GB",
	"2324": "H800-SXM5-80GB",
	"2322": "H800-PCIE-80GB",
	"233A": "H800-NVL-94GB",
	"2329": "H20-96GB",
	"2348": "GH200-144GB",
	"2941": "GB200-186GB",
}

// pciIDRE is a device-filter ID as mig-parted reads one (strconv.ParseInt
// with base 0, the device in the upper 16 bits, the vendor in the lower):
// in hexadecimal, the form its configurations use.
var pciIDRE = regexp.MustCompile(`^0[xX]([0-9A-Fa-f]{1,8})$`)

// nvidiaVendorID is NVIDIA's PCI vendor ID.
const nvidiaVendorID = 0x10DE

func newImportMigPartedCommand(e *env) *cobra.Command {
	var file, config, name, selector string
	var models []string
	cmd := &cobra.Command{
		Use:   "mig-parted -f CONFIG.yaml --config NAME [--name NAME] [--selector KEY=VALUE,...]",
		Short: "Turn an entry of nvidia-mig-parted's mig-configs into a Static MigLayout",
		Long: `Turn one named entry of an nvidia-mig-parted configuration file (the
mig-configs that NVIDIA's mig-manager applies to nodes labelled
nvidia.com/mig.config=NAME) into a Static MigLayout, printed as YAML.

Each entry becomes a rule: devices: all or a list of GPU indices becomes
gpuIndices; device-filter (PCI device IDs) becomes productName, one rule per
GPU model the miglayout catalog knows (IDs of other GPUs are left out, with a
note); mig-enabled and mig-devices become migEnabled and profiles. The counts
are checked against each model. An entry mig-parted itself refuses (no
mig-enabled; MIG on without mig-devices; MIG off with devices) is refused,
as is a device-filter ID with a PCI subsystem; an ID whose lower 16 bits
are not NVIDIA's vendor ID (0x20B2: device 0 of vendor 0x20B2 to
mig-parted) matches no GPU and is left out. --models keeps the rules of
the models the selected nodes have (mig-parted's all-balanced makes more
rules than a MigLayout holds). By default the MigLayout selects the nodes
that mig-manager would configure with this entry (nvidia.com/mig.config=NAME).

mig-parted applies entries in order, later ones overriding earlier ones for the
GPUs they share; a MigLayout applies the first rule that matches a GPU. The
rules are therefore written in reverse entry order.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("give the mig-parted file with -f (and the entry with --config where it has several)")
			}
			data, err := os.ReadFile(file)
			if file == "-" {
				docs, rerr := e.readManifests([]string{"-"})
				if rerr != nil {
					return rerr
				}
				if len(docs) != 1 {
					return errors.New("standard input holds no mig-parted configuration")
				}
				data, err = yaml.Marshal(docs[0].Object)
			}
			if err != nil {
				return fmt.Errorf("reading %s: %w", file, err)
			}
			var f migPartedFile
			if err := yaml.UnmarshalStrict(data, &f); err != nil {
				return fmt.Errorf("%s is not a mig-parted configuration: %w", file, err)
			}
			if f.Version != "v1" {
				return fmt.Errorf("%s: mig-parted configuration version %q; this importer reads v1", file, f.Version)
			}
			if config == "" {
				if len(f.MigConfigs) != 1 {
					return fmt.Errorf("%s has %d mig-configs: name one with --config (%s)", file, len(f.MigConfigs), strings.Join(slices.Sorted(maps.Keys(f.MigConfigs)), ", "))
				}
				for k := range f.MigConfigs {
					config = k
				}
			}
			entries, ok := f.MigConfigs[config]
			if !ok {
				return fmt.Errorf("%s has no mig-config %q (it has: %s)", file, config, strings.Join(slices.Sorted(maps.Keys(f.MigConfigs)), ", "))
			}
			if name == "" {
				name = config
			}
			ml, notes, err := importMigParted(config, entries, name, selector, models)
			if err != nil {
				return fmt.Errorf("%s, mig-config %q: %w", file, config, err)
			}
			for _, n := range notes {
				fmt.Fprintln(cmd.ErrOrStderr(), "note:", n)
			}
			u, err := migLayoutUnstructured(ml)
			if err != nil {
				return err
			}
			out, err := yaml.Marshal(u.Object)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "# mig-config %q of %s, imported by kubectl miglayout import mig-parted.\n", config, file)
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "nvidia-mig-parted configuration file (- for standard input)")
	cmd.Flags().StringVar(&config, "config", "", "name of the mig-configs entry to import (may be left out where the file has one)")
	cmd.Flags().StringVar(&name, "name", "", "name of the MigLayout (default: the entry's name)")
	cmd.Flags().StringVar(&selector, "selector", "", "node label selector of the MigLayout, KEY=VALUE[,KEY=VALUE] (default nvidia.com/mig.config=<entry>)")
	cmd.Flags().StringSliceVar(&models, "models", nil, "catalog models the selected nodes have (e.g. A100-SXM4-80GB,H100-SXM5-80GB): device-filter rules for other models are left out (default: all)")
	return cmd
}

// importMigParted builds the MigLayout of one mig-config's entries. Where
// only is not empty, the rules a device-filter makes are those of the
// catalog models it names (the GPUs the selected nodes have): an entry
// whose filter names none of them is left out.
func importMigParted(config string, entries []migPartedEntry, name, selector string, only []string) (*v1alpha1.MigLayout, []string, error) {
	cat := mig.DefaultCatalog()
	keep := map[string]bool{}
	for _, m := range only {
		model, err := cat.Model(strings.TrimSpace(m))
		if err != nil {
			return nil, nil, fmt.Errorf("--models: %w", err)
		}
		keep[model.Name] = true
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, nil, fmt.Errorf("%q cannot name a MigLayout (%s): give --name", name, strings.Join(errs, "; "))
	}
	sel := metav1.LabelSelector{MatchLabels: map[string]string{"nvidia.com/mig.config": config}}
	if selector != "" {
		set, err := labels.ConvertSelectorToLabelsMap(selector)
		if err != nil {
			return nil, nil, fmt.Errorf("--selector: %w", err)
		}
		// A key given twice with two values would keep its last value
		// alone, where the selector as written selects no node.
		for _, part := range strings.Split(selector, ",") {
			k, v, _ := strings.Cut(part, "=")
			if set[strings.TrimSpace(k)] != strings.TrimSpace(v) {
				return nil, nil, fmt.Errorf("--selector %q gives label %s two values: a node has one value per key, so it would select no node", selector, strings.TrimSpace(k))
			}
		}
		sel = metav1.LabelSelector{MatchLabels: set}
	} else if errs := validation.IsValidLabelValue(config); len(errs) > 0 {
		return nil, nil, fmt.Errorf("%q cannot be a label value (%s): give --selector", config, strings.Join(errs, "; "))
	}
	var notes []string
	var rules []v1alpha1.LayoutRule
	// forAll are the entries so far without a device-filter, by index, with
	// their GPU indices (nil: all) and MIG mode.
	type forAllEntry struct {
		index   int
		devices []int32
		migOn   bool
	}
	var forAll []forAllEntry
	for i, en := range entries {
		where := fmt.Sprintf("entry %d", i)
		if err := checkEntry(en); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", where, err)
		}
		indices, err := entryDevices(en.Devices)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", where, err)
		}
		models, unknown, uncatalogued, err := entryModels(en.DeviceFilter)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", where, err)
		}
		if len(uncatalogued) > 0 && *en.MigEnabled {
			// mig-parted gives those GPUs this entry's MIG layout; left
			// out, each would get that of the last earlier entry for
			// every GPU model that names its index, which, turning MIG
			// off (it needs no model), would destroy its devices.
			var earlier [][]int32
			for _, f := range forAll {
				earlier = append(earlier, f.devices)
			}
			for _, idx := range candidateIndices(indices, earlier) {
				for j := len(forAll) - 1; j >= 0; j-- {
					f := forAll[j]
					if f.devices != nil && !slices.Contains(f.devices, idx) {
						continue
					}
					if !f.migOn {
						return nil, nil, fmt.Errorf("%s: its device-filter names GPUs the miglayout catalog does not know (%s), which mig-parted gives this entry's layout; imported without them, entry %d would turn MIG off on them (an entry for every GPU model), destroying their devices: leave the nodes with such GPUs out of the selector and those IDs out of the entry, or drop entry %d",
							where, strings.Join(uncatalogued, ", "), f.index, f.index)
					}
					break
				}
			}
		}
		if len(unknown) > 0 {
			notes = append(notes, fmt.Sprintf("%s: device-filter IDs of GPUs the miglayout catalog does not know are left out: %s", where, strings.Join(unknown, ", ")))
		}
		if !filtered(en.DeviceFilter) {
			forAll = append(forAll, forAllEntry{index: i, devices: indices, migOn: *en.MigEnabled})
		}
		if filtered(en.DeviceFilter) && len(models) == 0 {
			notes = append(notes, fmt.Sprintf("%s: no GPU of its device-filter is in the miglayout catalog; the entry is left out", where))
			continue
		}
		if len(keep) > 0 && len(models) > 0 {
			models = slices.DeleteFunc(models, func(m string) bool { return !keep[m] })
			if len(models) == 0 {
				continue // for GPUs the nodes do not have (--models)
			}
		}
		var profiles map[string]int32
		if *en.MigEnabled {
			// No device (mig-devices: {}, or zero of each): MIG on with
			// every device destroyed, profiles: {} in a MigLayout rule.
			profiles = map[string]int32{}
			for p, n := range en.MigDevices {
				if strings.Count(p, ".") > 1 && strings.Contains(strings.SplitN(p, ".", 2)[0], "c") {
					ci, gi, _ := strings.Cut(p, ".")
					if strings.TrimSuffix(ci, "c") != strings.SplitN(gi, "g", 2)[0] {
						return nil, nil, fmt.Errorf("%s: %q is a compute-instance profile; miglayout creates one compute instance spanning each GPU instance, so name the GPU instance profile (e.g. %s)", where, p, gi)
					}
					// A compute instance spanning its GPU instance
					// (mig-parted reads 7c.7g.80gb as 7g.80gb): what
					// miglayout makes of a GPU instance profile.
					p = gi
				}
				if _, err := mig.ParseProfileName(p); err != nil {
					return nil, nil, fmt.Errorf("%s: %w", where, err)
				}
				if n < 0 || n > 7 {
					return nil, nil, fmt.Errorf("%s: %d × %s: a GPU holds 0 to 7 devices of a profile", where, n, p)
				}
				if n > 0 {
					profiles[p] += int32(n)
				}
			}
		}
		targets := models
		if len(targets) == 0 {
			// No model to fit (fits): the API server's own rules.
			if err := admittedCounts(profiles); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", where, err)
			}
			targets = []string{""}
			if *en.MigEnabled && len(profiles) > 0 && !fitsAnyModel(cat, profiles) {
				notes = append(notes, fmt.Sprintf("%s: no GPU model of the miglayout catalog holds %s: every GPU of the selected nodes will report InvalidLayout (a mistyped profile, or too many devices?)", where, profileList(profiles)))
			}
		}
		for _, model := range targets {
			r := v1alpha1.LayoutRule{Name: limitName(fmt.Sprintf("%s-%d", dnsToken(config), i), 63), GPUIndices: indices, ProductName: model}
			if model != "" {
				r.Name = limitName(fmt.Sprintf("%s-%d-%s", dnsToken(config), i, strings.ToLower(model)), 63)
			}
			if !*en.MigEnabled {
				r.MIGEnabled = new(bool)
			} else {
				r.Profiles = profiles
				if model != "" {
					if err := fits(cat, model, profiles); err != nil {
						return nil, nil, fmt.Errorf("%s on %s: %w", where, model, err)
					}
				}
			}
			rules = append(rules, r)
		}
	}
	if len(rules) == 0 {
		return nil, notes, errors.New("no entry could be imported")
	}
	if len(rules) > 16 {
		return nil, notes, fmt.Errorf("%d rules (one per GPU model of each device-filter); a MigLayout holds at most 16: name the models the selected nodes have with --models, or split the entry", len(rules))
	}
	// mig-parted: later entries win; MigLayout: the first matching rule wins.
	slices.Reverse(rules)
	ml := &v1alpha1.MigLayout{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "MigLayout"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.MigLayoutSpec{NodeSelector: sel, Mode: v1alpha1.ModeStatic, Rules: rules},
	}
	return ml, notes, nil
}

// filtered reports whether a device-filter names GPUs: mig-parted matches
// every GPU where it is missing, an empty list or an empty string.
func filtered(v any) bool {
	switch f := v.(type) {
	case []any:
		return len(f) > 0
	case string:
		return f != ""
	}
	return v != nil
}

// fitsAnyModel reports whether some model of the catalog holds profiles.
func fitsAnyModel(cat *mig.Catalog, profiles map[string]int32) bool {
	return slices.ContainsFunc(cat.Models(), func(m *mig.Model) bool { return fits(cat, m.Name, profiles) == nil })
}

// profileList is profiles as "2 × 3g.40gb, 1 × 1g.10gb", by name.
func profileList(profiles map[string]int32) string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(profiles)) {
		out = append(out, fmt.Sprintf("%d × %s", profiles[p], p))
	}
	return strings.Join(out, ", ")
}

func fits(cat *mig.Catalog, model string, profiles map[string]int32) error {
	m, err := cat.Model(model)
	if err != nil {
		return err
	}
	want := map[string]int{}
	for p, n := range profiles {
		want[p] = int(n)
	}
	_, err = m.Fit(mig.FitRequest{Want: want})
	return err
}

// entryDevices reads devices: "all" (nil) or a list of GPU indices.
func entryDevices(v any) ([]int32, error) {
	switch d := v.(type) {
	case nil:
		return nil, errors.New("devices is missing (write all, or a list of GPU indices)")
	case string:
		if d == "all" {
			return nil, nil
		}
		return nil, fmt.Errorf("devices %q: write all, or a list of GPU indices", d)
	case []any:
		if len(d) == 0 {
			return nil, errors.New("devices: an empty list names no GPU (write all, or the GPU indices)")
		}
		var out []int32
		for _, x := range d {
			n, err := strconv.Atoi(fmt.Sprint(x))
			if _, quoted := x.(string); quoted || err != nil || n < 0 || n > 63 {
				// mig-parted reads a list of integers: "0" is refused.
				return nil, fmt.Errorf("devices: %q is not a GPU index (write the indices as numbers, unquoted)", fmt.Sprint(x))
			}
			if !slices.Contains(out, int32(n)) {
				out = append(out, int32(n))
			}
		}
		slices.Sort(out)
		if len(out) > 16 {
			return nil, fmt.Errorf("devices: %d GPU indices; a MigLayout rule names at most 16 (write all where the entry means every GPU)", len(out))
		}
		return out, nil
	}
	return nil, fmt.Errorf("devices: %v is neither all nor a list of GPU indices", v)
}

// unquotedID is a hint for a device-filter value YAML read as a number:
// an unquoted 0x20B710DE is the integer 548868318.
func unquotedID(v any) string {
	switch v.(type) {
	case float64, int, int64:
		return ` (YAML reads an unquoted 0x... ID as a number: quote it, device-filter: "0x20B710DE")`
	}
	return ""
}

// entryModels reads device-filter (one PCI device ID or a list) into catalog
// model names, and the IDs it does not know (with why); uncatalogued are
// those of them that are NVIDIA's, of GPUs the catalog lacks.
func entryModels(v any) (models, unknown, uncatalogued []string, err error) {
	var ids []string
	switch f := v.(type) {
	case nil:
		return nil, nil, nil, nil
	case string:
		if f == "" {
			return nil, nil, nil, nil // every GPU, as no filter
		}
		ids = []string{f}
	case []any:
		for _, x := range f {
			s, ok := x.(string)
			if !ok {
				return nil, nil, nil, fmt.Errorf("device-filter: %v is not a PCI device ID%s", x, unquotedID(x))
			}
			ids = append(ids, s)
		}
	default:
		return nil, nil, nil, fmt.Errorf("device-filter: %v is neither a PCI device ID nor a list of them%s", v, unquotedID(v))
	}
	for _, id := range ids {
		if strings.Contains(id, ":") {
			return nil, nil, nil, fmt.Errorf("device-filter: %q names a PCI subsystem, which narrows it to some boards of a GPU model: a MigLayout rule names whole models (productName); split the nodes by a label instead", id)
		}
		m := pciIDRE.FindStringSubmatch(strings.TrimSpace(id))
		if m == nil {
			return nil, nil, nil, fmt.Errorf("device-filter: %q is not a PCI device ID such as 0x20B210DE (device 0x20B2, vendor 0x10DE)", id)
		}
		v, err := strconv.ParseUint(m[1], 16, 32)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("device-filter: %q: %w", id, err)
		}
		if v&0xFFFF != nvidiaVendorID {
			// mig-parted reads 0x20B2 as device 0 of vendor 0x20B2: it
			// matches no GPU.
			unknown = append(unknown, fmt.Sprintf("%s (vendor 0x%04X, not NVIDIA's 0x10DE: mig-parted matches no GPU with it; write the device and vendor, e.g. 0x%04X10DE)", id, v&0xFFFF, v&0xFFFF))
			continue
		}
		if model, ok := pciModels[fmt.Sprintf("%04X", v>>16)]; ok {
			if !slices.Contains(models, model) {
				models = append(models, model)
			}
		} else {
			unknown, uncatalogued = append(unknown, id), append(uncatalogued, id)
		}
	}
	return models, unknown, uncatalogued, nil
}

// admittedCounts returns why the API server refuses a rule of profiles
// (counts by profile name), nil where it admits it: the CEL rules of
// LayoutRule.Profiles (api/v1alpha1) refuse counts whose compute slices (the
// count times the profile's leading number) add up to more than 7, which no
// GPU model holds, and more than one device with media extensions (+me).
func admittedCounts(profiles map[string]int32) error {
	computeSlices := 0
	var media []string
	for _, p := range slices.Sorted(maps.Keys(profiles)) {
		n := profiles[p]
		if strings.Contains(p, "+me") && n > 1 {
			return fmt.Errorf("%d × %s: a GPU holds at most one device of a profile with media extensions, and the API server refuses the MigLayout", n, p)
		}
		if strings.Contains(p, "+me") {
			if media = append(media, p); len(media) > 1 {
				return fmt.Errorf("%s: a GPU holds at most one device with media extensions, and the API server refuses the MigLayout", strings.Join(media, " and "))
			}
		}
		if g, err := strconv.Atoi(p[:strings.Index(p, "g")]); err == nil {
			computeSlices += int(n) * g
		}
	}
	if computeSlices > 7 {
		return fmt.Errorf("%s need %d compute slices, more than any GPU has (7), and the API server refuses the MigLayout", profileList(profiles), computeSlices)
	}
	return nil
}

// candidateIndices are the GPU indices to judge an entry for devices
// (nil: every GPU) by, against the GPU indices of the earlier entries for
// every GPU model (earlier): its own, or for every GPU, each index an earlier entry names
// and one no earlier entry names (-1, which only those for every GPU
// cover).
func candidateIndices(devices []int32, earlier [][]int32) []int32 {
	if devices != nil {
		return devices
	}
	out := []int32{-1}
	for _, d := range earlier {
		for _, i := range d {
			if !slices.Contains(out, i) {
				out = append(out, i)
			}
		}
	}
	return out
}
