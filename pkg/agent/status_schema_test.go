package agent

import (
	"os"
	"strings"
	"testing"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/miglayout/miglayout/api/v1alpha1"
	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/gpu"
	"github.com/miglayout/miglayout/pkg/slices"
)

// TestStatusOfLongNVMLStringsFitsTheCRD: a GPU whose NVML strings are as
// long as NVML's buffers allow (a name of 96 bytes,
// NVML_DEVICE_NAME_V2_BUFFER_SIZE; a driver version of 80,
// NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE) gets a status the CRD's schema
// admits: the API server would refuse the whole status write otherwise, and
// the node would never report. Its product is cut as the ResourceSlice's
// productName attribute is, so that a rule's productName matches both.
func TestStatusOfLongNVMLStringsFitsTheCRD(t *testing.T) {
	validator := nodeMigLayoutValidator(t)
	a100, _ := mig.DefaultCatalog().Model("A100-SXM4-80GB")
	// Strings of ASCII and of two-byte characters: the CRD counts
	// characters, ResourceSlice attributes bytes.
	for name, filler := range map[string]string{"ascii": "x", "two-byte characters": "é"} {
		t.Run(name, func(t *testing.T) {
			long := func(prefix string, n int) string {
				return prefix + strings.Repeat(filler, (n-len(prefix))/len(filler))
			}
			g := gpu.GPU{
				Index: 0, UUID: "GPU-5d5f3e6a-0c4b-4c55-8d0e-0f1d2c3b4a59", ProductName: long("NVIDIA ", 96), Model: a100,
				MIGCapable: true, MIGMode: gpu.MIGMode{Current: true, Pending: true},
				PCIBusID: long("00000000:", 32), PCIeRoot: long("pci", 80), Brand: long("Nvidia", 80), Architecture: long("Ampere", 80),
				CUDAComputeCapability: long("8.0", 80), DriverVersion: long("580.", 80), CUDADriverVersion: long("13.", 80),
			}
			res := &SyncResult{
				GPUs:    []GPUState{{GPU: g}},
				InUse:   map[int]mig.Layout{},
				Results: map[int]GPUResult{0: {Phase: v1alpha1.PhaseReady, Reason: v1alpha1.ReasonLayoutApplied}},
			}
			nml := &v1alpha1.NodeMigLayout{
				TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "NodeMigLayout"},
				ObjectMeta: metav1.ObjectMeta{Name: "n1"},
				Status:     BuildStatus(v1alpha1.NodeMigLayoutStatus{}, 1, res, metav1.Now()),
			}
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(nml)
			if err != nil {
				t.Fatal(err)
			}
			if errs := validation.ValidateCustomResource(field.NewPath(""), obj, validator); len(errs) > 0 {
				t.Errorf("the CRD refuses the status of a GPU of long NVML strings: %v", errs.ToAggregate())
			}
			product := *slices.GPUDevice(g).Attributes[slices.AttrProductName].StringValue
			if got := nml.Status.GPUs[0].Product; got != product {
				t.Errorf("status product %q, want the ResourceSlice's productName %q", got, product)
			}
		})
	}
}

// nodeMigLayoutValidator returns the schema validator of the served version
// of deploy/crds' NodeMigLayout CRD.
func nodeMigLayoutValidator(t *testing.T) validation.SchemaValidator {
	t.Helper()
	data, err := os.ReadFile("../../deploy/crds/miglayout.io_nodemiglayouts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != v1alpha1.GroupVersion.Version {
			continue
		}
		var schema apiextensionsinternal.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &schema, nil); err != nil {
			t.Fatal(err)
		}
		validator, _, err := validation.NewSchemaValidator(&schema)
		if err != nil {
			t.Fatal(err)
		}
		return validator
	}
	t.Fatalf("the CRD serves no version %s", v1alpha1.GroupVersion.Version)
	return nil
}
