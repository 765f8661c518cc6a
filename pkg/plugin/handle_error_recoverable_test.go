package plugin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// TestHandleErrorKeepsRecoverableErrorsFromOnFatalError: a background
// error the helper marks as recoverable (a ResourceSlice update the API
// server refused once, retried by the helper) is only logged: OnFatalError,
// on which the agent stops, is not called for it.
func TestHandleErrorKeepsRecoverableErrorsFromOnFatalError(t *testing.T) {
	var fatal []error
	p := &Plugin{cfg: Config{OnFatalError: func(err error) { fatal = append(fatal, err) }}}
	p.HandleError(t.Context(), fmt.Errorf("%w: updating ResourceSlice: conflict", kubeletplugin.ErrRecoverable), "publishing ResourceSlices")
	if len(fatal) != 0 {
		t.Errorf("OnFatalError called with %v for a recoverable error, want no call", fatal)
	}
}

// TestHandleErrorWithoutCallbacks: a plugin configured without
// OnDroppedFields and OnFatalError logs a report of dropped fields and a
// fatal error alike, without calling anything.
func TestHandleErrorWithoutCallbacks(t *testing.T) {
	p := &Plugin{}
	report := &resourceslice.DroppedFieldsError{PoolName: "n1",
		DesiredSlice: &resourceapi.ResourceSlice{}, ActualSlice: &resourceapi.ResourceSlice{}}
	p.HandleError(t.Context(), fmt.Errorf("publishing: %w", report), "publishing ResourceSlices")
	p.HandleError(t.Context(), errors.New("the gRPC server stopped"), "serving")
}

// TestHandleErrorPassesSliceErrorsOn: a recoverable error (the
// ResourceSlice controller's: an update the API server refused) reaches
// OnPublishError, wrapped with the helper's message; a report of dropped
// fields goes to OnDroppedFields alone, and a fatal error or the helper's
// stale health report to neither.
func TestHandleErrorPassesSliceErrorsOn(t *testing.T) {
	var published []error
	var dropped int
	p := &Plugin{cfg: Config{
		OnPublishError:  func(err error) { published = append(published, err) },
		OnDroppedFields: func(*resourceslice.DroppedFieldsError) { dropped++ },
	}}
	refused := errors.New("update resource slice: forbidden")
	p.HandleError(t.Context(), fmt.Errorf("%w: %w", kubeletplugin.ErrRecoverable, refused), "processing ResourceSlice objects")
	report := &resourceslice.DroppedFieldsError{PoolName: "n1",
		DesiredSlice: &resourceapi.ResourceSlice{}, ActualSlice: &resourceapi.ResourceSlice{}}
	p.HandleError(t.Context(), fmt.Errorf("%w: %w", kubeletplugin.ErrRecoverable, report), "processing ResourceSlice objects")
	p.HandleError(t.Context(), errors.New("the gRPC server stopped"), "serving")
	p.HandleError(t.Context(), fmt.Errorf("%w: %w", kubeletplugin.ErrRecoverable, errors.New("last report 2m ago")),
		"device health reports are stale, WatchHealthStatus must re-send within each device's HealthCheckTimeout")
	if len(published) != 1 || !errors.Is(published[0], refused) || !strings.Contains(published[0].Error(), "processing ResourceSlice objects") {
		t.Errorf("OnPublishError got %v, want the refused update alone, with the helper's message", published)
	}
	if dropped != 1 {
		t.Errorf("OnDroppedFields called %d times, want 1", dropped)
	}
}

// TestSliceControllerMessagesAreTheLibrarys: each message of
// sliceControllerMessages is one the ResourceSlice controller of the
// k8s.io/dynamic-resource-allocation this module builds with reports its
// errors with, so that a version that words them otherwise is noticed
// here rather than by OnPublishError falling silent.
func TestSliceControllerMessagesAreTheLibrarys(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/dynamic-resource-allocation").Output()
	if err != nil {
		t.Fatalf("locating k8s.io/dynamic-resource-allocation: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "resourceslice", "resourceslicecontroller.go"))
	if err != nil {
		t.Fatal(err)
	}
	for msg := range sliceControllerMessages {
		if !strings.Contains(string(src), strconv.Quote(msg)) {
			t.Errorf("the ResourceSlice controller reports no error with the message %q", msg)
		}
	}
}
