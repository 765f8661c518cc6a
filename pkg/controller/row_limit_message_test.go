package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestRowMessageCountsRowsLeftOut: a row cut to 16 GPUs counts the rows
// left out in its message, after what the message said before, joined by
// "; "; a row whose message was empty reads the count alone.
func TestRowMessageCountsRowsLeftOut(t *testing.T) {
	tests := map[string]struct {
		message string
		want    string
	}{
		"empty message": {
			want: "1 more GPU rows not listed (a row lists at most 16)",
		},
		"message about the GPUs": {
			message: "gpu 3: Draining",
			want:    "gpu 3: Draining; 1 more GPU rows not listed (a row lists at most 16)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var st NodeState
			for i := range maxRowGPUs + 1 {
				st.Row.GPUs = append(st.Row.GPUs, v1alpha1.GPURow{Index: int32(i), Product: "NVIDIA A100-SXM4-80GB"})
			}
			st.Row.Message = tc.message
			got := capGPURows(st)
			if diff := cmp.Diff(tc.want, got.Row.Message); diff != "" {
				t.Errorf("row message (-want +got):\n%s", diff)
			}
		})
	}
}
