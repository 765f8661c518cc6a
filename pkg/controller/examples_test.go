package controller

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
)

// TestExamples applies the Static examples of deploy/examples to a node of
// four A100-SXM4-80GB: every GPU gets a spec, none a problem.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../../deploy/examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var ml v1alpha1.MigLayout
			if err := yaml.UnmarshalStrict(data, &ml); err != nil {
				t.Fatal(err)
			}
			if ml.Spec.Mode == v1alpha1.ModeAuto {
				return
			}
			got, problems := DesiredGPUs(mig.DefaultCatalog(), ml.Spec.Rules, inventory(a100(0), a100(1), a100(2), a100(3)), nil)
			if len(problems) > 0 || len(got) != 4 {
				t.Errorf("specs %v, problems %v; want 4 specs and no problem", got, problems)
			}
		})
	}
}
