package slices

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// ErrInvalid is wrapped by every validation error of this package.
var ErrInvalid = errors.New("invalid")

// semverRE is the Semantic Versioning 2.0.0 grammar (semver.org), which the
// apiserver requires of VersionValue.
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// cIdentifierRE is the form of an attribute or capacity ID.
var cIdentifierRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidateDriverName checks that name can be a DRA driver name: a lower-case
// DNS subdomain of at most 63 characters (e.g. "mig.miglayout.io",
// "gpu.nvidia.com").
func ValidateDriverName(name string) error {
	if len(name) > resourceapi.DriverNameMaxLength {
		return fmt.Errorf("validating driver name %q: %w: longer than %d characters", name, ErrInvalid, resourceapi.DriverNameMaxLength)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("validating driver name %q: %w: %s", name, ErrInvalid, strings.Join(errs, "; "))
	}
	return nil
}

// ValidateDevice checks d against the limits the apiserver enforces on a
// device in a ResourceSlice that this package can break: the name is a DNS
// label; at most 32 attributes and capacities together; attribute and
// capacity names are qualified names; every attribute has exactly one value;
// string and version values have at most 64 characters; versions are
// semantic versions; capacities are not negative; at most 16 taints, each
// with a label-name key, a label value and a known effect. All problems are reported, each
// naming the device.
func ValidateDevice(d resourceapi.Device) error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("validating device %q: %w: %s", d.Name, ErrInvalid, fmt.Sprintf(format, args...)))
	}
	for _, e := range validation.IsDNS1123Label(d.Name) {
		fail("name: %s", e)
	}
	if n := len(d.Attributes) + len(d.Capacity); n > resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
		fail("%d attributes and capacities, at most %d allowed", n, resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice)
	}
	for name, a := range d.Attributes {
		if err := validateQualifiedName(name); err != nil {
			fail("attribute %q: %v", name, err)
		}
		set := 0
		if a.StringValue != nil {
			set++
			if l := len(*a.StringValue); l > resourceapi.DeviceAttributeMaxValueLength {
				fail("attribute %q: string value of %d characters, at most %d allowed", name, l, resourceapi.DeviceAttributeMaxValueLength)
			}
		}
		if a.VersionValue != nil {
			set++
			v := *a.VersionValue
			if l := len(v); l > resourceapi.DeviceAttributeMaxValueLength {
				fail("attribute %q: version value of %d characters, at most %d allowed", name, l, resourceapi.DeviceAttributeMaxValueLength)
			}
			if !semverRE.MatchString(v) {
				fail("attribute %q: version value %q is not a semantic version", name, v)
			}
		}
		if a.IntValue != nil {
			set++
		}
		if a.BoolValue != nil {
			set++
		}
		if set != 1 {
			fail("attribute %q: %d values set, exactly one required", name, set)
		}
	}
	for name, c := range d.Capacity {
		if err := validateQualifiedName(name); err != nil {
			fail("capacity %q: %v", name, err)
		}
		if c.Value.Sign() < 0 {
			fail("capacity %q: negative value %s", name, c.Value.String())
		}
	}
	if len(d.Taints) > resourceapi.DeviceTaintsMaxLength {
		fail("%d taints, at most %d allowed", len(d.Taints), resourceapi.DeviceTaintsMaxLength)
	}
	for _, t := range d.Taints {
		for _, e := range validation.IsQualifiedName(t.Key) {
			fail("taint key %q: %s", t.Key, e)
		}
		for _, e := range validation.IsValidLabelValue(t.Value) {
			fail("taint %q: value %q: %s", t.Key, t.Value, e)
		}
		switch t.Effect {
		case resourceapi.DeviceTaintEffectNoSchedule, resourceapi.DeviceTaintEffectNoExecute, resourceapi.DeviceTaintEffectNone:
		default:
			fail("taint %q: unknown effect %q", t.Key, t.Effect)
		}
	}
	return errors.Join(errs...)
}

func validateQualifiedName(name resourceapi.QualifiedName) error {
	domain, id, qualified := strings.Cut(string(name), "/")
	if !qualified {
		id, domain = domain, ""
	}
	if qualified {
		if len(domain) > resourceapi.DeviceMaxDomainLength {
			return fmt.Errorf("domain longer than %d characters", resourceapi.DeviceMaxDomainLength)
		}
		if errs := validation.IsDNS1123Subdomain(domain); len(errs) > 0 {
			return fmt.Errorf("domain: %s", strings.Join(errs, "; "))
		}
	}
	if len(id) > resourceapi.DeviceMaxIDLength {
		return fmt.Errorf("identifier longer than %d characters", resourceapi.DeviceMaxIDLength)
	}
	if !cIdentifierRE.MatchString(id) {
		return fmt.Errorf("identifier %q is not a C identifier", id)
	}
	return nil
}

// ValidatePool checks a pool before it is published: the pool name is a DNS
// subdomain (a node name), the pool has at least one slice, each slice holds
// at most 128 devices (64 when one of them has a taint), device names are
// unique in the pool, and every device passes ValidateDevice.
func ValidatePool(poolName string, pool resourceslice.Pool) error {
	var errs []error
	if errs2 := validation.IsDNS1123Subdomain(poolName); len(errs2) > 0 {
		errs = append(errs, fmt.Errorf("validating pool %q: %w name: %s", poolName, ErrInvalid, strings.Join(errs2, "; ")))
	}
	if len(pool.Slices) == 0 {
		errs = append(errs, fmt.Errorf("validating pool %q: %w: no slice (publish one empty slice for a pool without devices)", poolName, ErrInvalid))
	}
	names := sets.New[string]()
	for i, s := range pool.Slices {
		if max := SliceCapacity(s.Devices); len(s.Devices) > max {
			errs = append(errs, fmt.Errorf("validating pool %q: %w: slice %d: %d devices, at most %d allowed", poolName, ErrInvalid, i, len(s.Devices), max))
		}
		for _, d := range s.Devices {
			if names.Has(d.Name) {
				errs = append(errs, fmt.Errorf("validating pool %q: %w: device %q published twice", poolName, ErrInvalid, d.Name))
			}
			names.Insert(d.Name)
			if err := ValidateDevice(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
