package gpu

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
)

// TestIsNVMLErrorClasses: errors of NVML calls and of this package's
// sentinels, ErrShutdown included, are the GPU manager's; a context's or
// another package's error is not.
func TestIsNVMLErrorClasses(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"NVML call", fmt.Errorf("listing: %w", &NVMLError{Op: "nvmlDeviceGetCount", Return: nvml.ERROR_UNKNOWN}), true},
		{"shut down", fmt.Errorf("listing MIG devices of GPU 0: %w", ErrShutdown), true},
		{"refused before NVML", fmt.Errorf("placement: %w", ErrInsufficientResources), true},
		{"in use without NVML", fmt.Errorf("%w: 1 process(es) running", ErrInUse), true},
		{"context cancelled", fmt.Errorf("listing: %w", context.Canceled), false},
		{"other", errors.New("the API server said no"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsNVMLError(tc.err); got != tc.want {
				t.Errorf("IsNVMLError(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestUnreadableGPUsErrorInIndexOrder: the error of several unreadable GPUs
// names them in index order, whatever order they were found in, so that
// the message a GPU's status shows does not change from read to read.
func TestUnreadableGPUsErrorInIndexOrder(t *testing.T) {
	lost := func(i int) error {
		return &NVMLError{Op: fmt.Sprintf("nvmlDeviceGetUUID%d", i), Return: nvml.ERROR_GPU_IS_LOST}
	}
	e := &UnreadableGPUsError{Errors: map[int]error{}}
	for _, i := range []int{5, 0, 3, 7, 1, 6, 2, 4} {
		e.Errors[i] = lost(i)
	}
	want := ""
	var wantErrs []string
	for i := range 8 {
		if i > 0 {
			want += "; "
		}
		want += fmt.Sprintf("reading GPU %d: %v", i, lost(i))
		wantErrs = append(wantErrs, lost(i).Error())
	}
	// Map order varies from call to call: ask several times.
	for range 5 {
		if got := e.Error(); got != want {
			t.Fatalf("Error() = %q, want %q", got, want)
		}
		var gotErrs []string
		for _, err := range e.Unwrap() {
			gotErrs = append(gotErrs, err.Error())
		}
		if diff := cmp.Diff(wantErrs, gotErrs); diff != "" {
			t.Fatalf("Unwrap() not in index order (-want +got):\n%s", diff)
		}
	}
}
