package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestConvertInitContainerReusesAClaimOfItsCount: an init container that
// asks for as many devices as an app container uses that container's
// claim, and the note says it gets the same devices (not that it shares
// several claims).
func TestConvertInitContainerReusesAClaimOfItsCount(t *testing.T) {
	out, notes := convertFile(t, `apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  initContainers:
  - name: fetch
    image: x
    resources: {limits: {nvidia.com/gpu: 2}}
  containers:
  - name: app
    image: x
    resources: {limits: {nvidia.com/gpu: 2}}
`)
	if diff := cmp.Diff([]string{"app-gpu"}, containerClaims(t, out, "fetch")); diff != "" {
		t.Errorf("claims of init container fetch (-want +got):\n%s", diff)
	}
	if want := "init container fetch: nvidia.com/gpu: 2 -> the claim app-gpu of container app (the device plugin gave it the same devices)"; !strings.Contains(notes, want) {
		t.Errorf("notes lack %q:\n%s", want, notes)
	}
}
