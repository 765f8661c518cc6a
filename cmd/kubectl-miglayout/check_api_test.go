package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCheckFindsWhatTheAPIServerRefuses: claims and pods the API server's
// validation refuses beyond the mistakes of older snippets are found
// offline, each at its path (none for the valid ones beside them).
func TestCheckFindsWhatTheAPIServerRefuses(t *testing.T) {
	claim := func(devices string) string {
		return "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: r}\nspec:\n  devices:\n" + devices
	}
	pod := func(spec string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n" + spec
	}
	for name, tc := range map[string]struct {
		manifest string
		paths    []string
	}{
		"count beside All": {
			manifest: claim("    requests:\n    - name: g\n      exactly: {deviceClassName: mig.miglayout.io, allocationMode: All, count: 2}\n"),
			paths:    []string{"spec.devices.requests[0].exactly.count"},
		},
		// 0 is the field left out: 1 under ExactCount, none under All.
		"count 0": {
			manifest: claim("    requests:\n    - name: g\n      exactly: {deviceClassName: mig.miglayout.io, count: 0}\n" +
				"    - name: h\n      exactly: {deviceClassName: mig.miglayout.io, allocationMode: All, count: 0}\n"),
		},
		"count -1": {
			manifest: claim("    requests:\n    - name: g\n      exactly: {deviceClassName: mig.miglayout.io, count: -1}\n"),
			paths:    []string{"spec.devices.requests[0].exactly.count"},
		},
		"count 2": {
			manifest: claim("    requests:\n    - name: g\n      exactly: {deviceClassName: mig.miglayout.io, allocationMode: ExactCount, count: 2}\n"),
		},
		"a selector that does not compile": {
			manifest: claim("    requests:\n    - name: g\n      exactly:\n        deviceClassName: mig.miglayout.io\n        selectors:\n        - cel: {expression: \"device.attributes['mig.miglayout.io'].memory >= \"}\n"),
			paths:    []string{"spec.devices.requests[0].exactly.selectors[0].cel.expression"},
		},
		"a selector that is no bool": {
			manifest: claim("    requests:\n    - name: g\n      exactly:\n        deviceClassName: mig.miglayout.io\n        selectors:\n        - cel: {expression: \"device.driver\"}\n"),
			paths:    []string{"spec.devices.requests[0].exactly.selectors[0].cel.expression"},
		},
		"a DeviceClass selector that does not compile": {
			manifest: "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: c}\nspec:\n  selectors:\n  - cel: {expression: \"device.driver ==\"}\n",
			paths:    []string{"spec.selectors[0].cel.expression"},
		},
		"a constraint naming no request": {
			manifest: claim("    requests:\n    - name: g\n      exactly: {deviceClassName: mig.miglayout.io}\n" +
				"    constraints:\n    - {requests: [gpux], matchAttribute: mig.miglayout.io/parentUUID}\n"),
			paths: []string{"spec.devices.constraints[0].requests[0]"},
		},
		"a constraint naming a subrequest": {
			manifest: claim("    requests:\n    - name: g\n      firstAvailable:\n      - {name: small, deviceClassName: mig.miglayout.io}\n    - name: h\n      exactly: {deviceClassName: mig.miglayout.io}\n" +
				"    constraints:\n    - {requests: [g/small, h], matchAttribute: mig.miglayout.io/parentUUID}\n    - {requests: [g/large]}\n"),
			paths: []string{"spec.devices.constraints[1].requests[0]"},
		},
		"a pod claim with both sources": {
			manifest: pod("  resourceClaims: [{name: gpu, resourceClaimName: a, resourceClaimTemplateName: b}]\n  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]\n"),
			paths:    []string{"spec.resourceClaims[0]"},
		},
		"a pod claim without source": {
			manifest: pod("  resourceClaims: [{name: gpu}]\n  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]\n"),
			paths:    []string{"spec.resourceClaims[0]"},
		},
		"both sources under source:": {
			manifest: pod("  resourceClaims: [{name: gpu, source: {resourceClaimName: a, resourceClaimTemplateName: b}}]\n  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]\n"),
			paths:    []string{"spec.resourceClaims[0]", "spec.resourceClaims[0].source"},
		},
		"an empty claim name beside a template": {
			manifest: pod("  resourceClaims: [{name: gpu, resourceClaimName: \"\", resourceClaimTemplateName: b}]\n  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]\n"),
			paths:    []string{"spec.resourceClaims[0].resourceClaimName", "spec.resourceClaims[0]"},
		},
		"an empty template name alone": {
			manifest: pod("  resourceClaims: [{name: gpu, resourceClaimTemplateName: \"\"}]\n  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]\n"),
			paths:    []string{"spec.resourceClaims[0].resourceClaimTemplateName"},
		},
		"a null claim name beside a template": {
			manifest: pod("  resourceClaims: [{name: gpu, resourceClaimName: null, resourceClaimTemplateName: b}]\n  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]\n"),
		},
		"an entry without a name": {
			manifest: pod("  resourceClaims: [{resourceClaimName: a}]\n  containers: [{name: c, image: x}]\n"),
			paths:    []string{"spec.resourceClaims[0].name"},
		},
		"an entry name that is no DNS label": {
			manifest: pod("  resourceClaims: [{name: GPU_0, resourceClaimName: a}]\n  containers: [{name: c, image: x, resources: {claims: [{name: GPU_0}]}}]\n"),
			paths:    []string{"spec.resourceClaims[0].name"},
		},
		"a claim name that is no DNS subdomain": {
			manifest: pod("  resourceClaims: [{name: gpu, resourceClaimName: Bad_Name}]\n  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]\n"),
			paths:    []string{"spec.resourceClaims[0].resourceClaimName"},
		},
		"a claim name under source: that is no DNS subdomain": {
			manifest: pod("  resourceClaims: [{name: gpu, source: {resourceClaimName: Bad_Name}}]\n  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]\n"),
			paths:    []string{"spec.resourceClaims[0].source.resourceClaimName", "spec.resourceClaims[0].source"},
		},
		"a dotted template name": {
			manifest: pod("  resourceClaims: [{name: gpu, resourceClaimTemplateName: mig.small}]\n  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]\n"),
		},
		"a pod claim named twice": {
			manifest: pod("  resourceClaims: [{name: gpu, resourceClaimName: a}, {name: gpu, resourceClaimName: b}]\n  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]\n"),
			paths:    []string{"spec.resourceClaims[1].name"},
		},
		"a container listing a claim twice": {
			manifest: pod("  resourceClaims: [{name: gpu, resourceClaimName: a}]\n  containers: [{name: c, image: x, resources: {claims: [{name: gpu, request: r}, {name: gpu, request: s}, {name: gpu, request: r}]}}]\n"),
			paths:    []string{"spec.containers[0].resources.claims[2]"},
		},
		"a container listing a claim whole and by request": {
			manifest: pod("  resourceClaims: [{name: gpu, resourceClaimName: a}, {name: cpu, resourceClaimName: b}]\n  containers:\n" +
				"  - {name: c, image: x, resources: {claims: [{name: gpu}, {name: gpu, request: r}]}}\n" +
				"  - {name: d, image: x, resources: {claims: [{name: cpu, request: r}, {name: cpu}]}}\n"),
			paths: []string{"spec.containers[0].resources.claims[1]", "spec.containers[1].resources.claims[1]"},
		},
		"source: beside a source on the entry": {
			manifest: pod("  resourceClaims: [{name: gpu, resourceClaimName: a, source: {resourceClaimTemplateName: b}}]\n  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]\n"),
			paths:    []string{"spec.resourceClaims[0]", "spec.resourceClaims[0].source"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			out, paths, err := checkFindingPaths(t, tc.manifest)
			if diff := cmp.Diff(tc.paths, paths); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, out)
			}
			if (err != nil) != (len(tc.paths) > 0) {
				t.Errorf("check: %v, with %d problems", err, len(tc.paths))
			}
		})
	}
}

// TestCheckFixLeavesBothSourcesToTheUser: --fix does not move a source:
// naming both a claim and a template onto the entry, which the API server
// would refuse; the report says so and the command fails.
func TestCheckFixLeavesBothSourcesToTheUser(t *testing.T) {
	for name, entry := range map[string]string{
		"both under source:":             "{name: gpu, source: {resourceClaimName: a, resourceClaimTemplateName: b}}",
		"one on the entry, one under it": "{name: gpu, resourceClaimName: a, source: {resourceClaimTemplateName: b}}",
	} {
		t.Run(name, func(t *testing.T) {
			manifest := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  resourceClaims: [" + entry + "]\n  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]\n"
			fixed, err := checkOffline(t, manifest, "--fix")
			if err == nil {
				t.Error("check --fix: no error, want the entry found")
			}
			if !strings.Contains(fixed, "source:") || strings.Contains(fixed, "\n    resourceClaimTemplateName: b") {
				t.Errorf("--fix moved a source beside another; output:\n%s", fixed)
			}
		})
	}
}
