package controller

import (
	"strings"
	"testing"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestNodeRowListsAtMostSixteenGPUs: a NodeMigLayout whose spec was edited
// by hand to name GPUs the node lacks, beside the 16 its agent reports in
// Auto mode, gives a row of at most 16 GPUs (the MigLayout's status is
// still written), the reported ones kept, the rest counted in the message.
func TestNodeRowListsAtMostSixteenGPUs(t *testing.T) {
	var reported []*gpuBuilder
	for i := range 16 {
		reported = append(reported, a100(int32(i)).layout(wholeLayout))
	}
	var specs []v1alpha1.GPUSpec
	for i := range 4 {
		specs = append(specs, specGPU(int32(40+i), wholeLayout, ""))
	}
	nml := nodeMigLayout("n1").status(reported...).spec(specs...).build()
	st := withUntouchedGPUs(evaluateReport("n1", nml, nil), nml)
	if len(st.Row.GPUs) != maxRowGPUs {
		t.Fatalf("row lists %d GPUs, want %d", len(st.Row.GPUs), maxRowGPUs)
	}
	for i, r := range st.Row.GPUs {
		if r.Index != int32(i) {
			t.Errorf("row %d is GPU %d, want the reported GPU %d", i, r.Index, i)
		}
	}
	if !strings.Contains(st.Row.Message, "4 more GPU rows not listed") {
		t.Errorf("row message %q does not count the rows left out", st.Row.Message)
	}
}
