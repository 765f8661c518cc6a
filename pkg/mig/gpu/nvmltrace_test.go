package gpu_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/miglayout/miglayout/pkg/mig"
	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// nvmlTrace is what one GPU answered to probe's fixed sequence of NVML
// calls. Traces recorded on real GPUs (TestRealNVML) are kept in
// testdata/nvml-traces and replayed against the simulator in CI
// (TestSimulatorAnswersAsRecorded).
type nvmlTrace struct {
	// Recorded says where the trace comes from: driver and NVML versions,
	// the machine's runtime.
	Recorded string `json:"recorded"`
	// Product is nvmlDeviceGetName's answer, e.g. "NVIDIA H200".
	Product string `json:"product"`
	// MIGCurrent and MIGPending are the GPU's MIG mode while probed.
	MIGCurrent bool       `json:"migCurrent"`
	MIGPending bool       `json:"migPending"`
	Calls      []nvmlCall `json:"calls"`
}

// nvmlCall is one call of a trace: the call with its arguments, its return
// code by name, and its value where it succeeded.
type nvmlCall struct {
	Call   string `json:"call"`
	Return string `json:"return"`
	Value  string `json:"value,omitempty"`
	// Board marks a value of the board or the machine (UUID, PCI address,
	// driver version, processes running): only the return code is
	// compared.
	Board bool `json:"board,omitempty"`
}

// returnNames are the nvmlReturn_t constants' names without "NVML_"
// (go-nvml's Error() gives nvmlErrorString's prose once the real library is
// loaded).
var returnNames = map[nvml.Return]string{
	nvml.SUCCESS:                         "SUCCESS",
	nvml.ERROR_UNINITIALIZED:             "ERROR_UNINITIALIZED",
	nvml.ERROR_INVALID_ARGUMENT:          "ERROR_INVALID_ARGUMENT",
	nvml.ERROR_NOT_SUPPORTED:             "ERROR_NOT_SUPPORTED",
	nvml.ERROR_NO_PERMISSION:             "ERROR_NO_PERMISSION",
	nvml.ERROR_NOT_FOUND:                 "ERROR_NOT_FOUND",
	nvml.ERROR_INSUFFICIENT_SIZE:         "ERROR_INSUFFICIENT_SIZE",
	nvml.ERROR_INSUFFICIENT_RESOURCES:    "ERROR_INSUFFICIENT_RESOURCES",
	nvml.ERROR_IN_USE:                    "ERROR_IN_USE",
	nvml.ERROR_RESET_REQUIRED:            "ERROR_RESET_REQUIRED",
	nvml.ERROR_GPU_IS_LOST:               "ERROR_GPU_IS_LOST",
	nvml.ERROR_FUNCTION_NOT_FOUND:        "ERROR_FUNCTION_NOT_FOUND",
	nvml.ERROR_ARGUMENT_VERSION_MISMATCH: "ERROR_ARGUMENT_VERSION_MISMATCH",
	nvml.ERROR_UNKNOWN:                   "ERROR_UNKNOWN",
	nvml.ERROR_LIBRARY_NOT_FOUND:         "ERROR_LIBRARY_NOT_FOUND",
	nvml.ERROR_DRIVER_NOT_LOADED:         "ERROR_DRIVER_NOT_LOADED",
}

// returnName is r's name in returnNames, else its number.
func returnName(r nvml.Return) string {
	if n, ok := returnNames[r]; ok {
		return n
	}
	return fmt.Sprintf("return code %d", int(r))
}

// giProfileText is a GI profile's values as nvidia-smi mig -lgip shows
// them, memory in MiB.
func giProfileText(i nvml.GpuInstanceProfileInfo) string {
	return fmt.Sprintf("id=%d slices=%d instances=%d memoryMiB=%d multiprocessors=%d copyEngines=%d decoders=%d encoders=%d jpeg=%d ofa=%d p2p=%d",
		i.Id, i.SliceCount, i.InstanceCount, i.MemorySizeMB, i.MultiprocessorCount,
		i.CopyEngineCount, i.DecoderCount, i.EncoderCount, i.JpegCount, i.OfaCount, i.IsP2pSupported)
}

// probe makes a fixed sequence of NVML calls on GPU idx of lib and records
// their answers. Every call reads, except two GPU-instance creates made
// only while MIG mode is off and pending off, which NVML refuses then
// (nvml.h: NOT_SUPPORTED "if device doesn't have MIG mode enabled"); a
// create that succeeds anyway is destroyed at once and recorded, so the
// trace shows it. The GI profile IDs probed for placements come from NVML
// where it gives them, else from cat's model of the GPU (none when the
// catalog lacks the product).
func probe(lib nvml.Interface, cat *mig.Catalog, idx int) (nvmlTrace, error) {
	var tr nvmlTrace
	add := func(call string, ret nvml.Return, value func() string, board bool) {
		c := nvmlCall{Call: call, Return: returnName(ret), Board: board}
		if ret == nvml.SUCCESS && value != nil {
			c.Value = value()
		}
		tr.Calls = append(tr.Calls, c)
	}
	driver, ret := lib.SystemGetDriverVersion()
	add("SystemGetDriverVersion", ret, func() string { return driver }, true)
	nvmlVersion, ret := lib.SystemGetNVMLVersion()
	add("SystemGetNVMLVersion", ret, func() string { return nvmlVersion }, true)
	cuda, ret := lib.SystemGetCudaDriverVersion()
	add("SystemGetCudaDriverVersion", ret, func() string { return fmt.Sprint(cuda) }, true)
	tr.Recorded = fmt.Sprintf("driver %s, NVML %s", driver, nvmlVersion)
	count, ret := lib.DeviceGetCount()
	add("DeviceGetCount", ret, func() string { return fmt.Sprint(count) }, true)
	if ret != nvml.SUCCESS {
		return tr, fmt.Errorf("counting GPUs: %s", returnName(ret))
	}
	_, ret = lib.DeviceGetHandleByIndex(count)
	add("DeviceGetHandleByIndex(count)", ret, nil, false)
	dev, ret := lib.DeviceGetHandleByIndex(idx)
	add("DeviceGetHandleByIndex", ret, nil, false)
	if ret != nvml.SUCCESS {
		return tr, fmt.Errorf("getting GPU %d: %s", idx, returnName(ret))
	}

	name, ret := dev.GetName()
	add("GetName", ret, func() string { return name }, false)
	tr.Product = name
	uuid, ret := dev.GetUUID()
	add("GetUUID", ret, func() string { return uuid }, true)
	index, ret := dev.GetIndex()
	add("GetIndex", ret, func() string { return fmt.Sprint(index) }, true)
	mem, ret := dev.GetMemoryInfo()
	add("GetMemoryInfo.Total (MiB)", ret, func() string { return fmt.Sprint(mem.Total >> 20) }, false)
	pci, ret := dev.GetPciInfo()
	add("GetPciInfo", ret, func() string { return fmt.Sprintf("%08x:%02x:%02x", pci.Domain, pci.Bus, pci.Device) }, true)
	minor, ret := dev.GetMinorNumber()
	add("GetMinorNumber", ret, func() string { return fmt.Sprint(minor) }, true)
	major, minorCC, ret := dev.GetCudaComputeCapability()
	add("GetCudaComputeCapability", ret, func() string { return fmt.Sprintf("%d.%d", major, minorCC) }, false)
	arch, ret := dev.GetArchitecture()
	add("GetArchitecture", ret, func() string { return fmt.Sprint(uint32(arch)) }, false)
	brand, ret := dev.GetBrand()
	add("GetBrand", ret, func() string { return fmt.Sprint(uint32(brand)) }, false)
	cur, pend, ret := dev.GetMigMode()
	add("GetMigMode", ret, func() string { return fmt.Sprintf("current=%d pending=%d", cur, pend) }, false)
	tr.MIGCurrent, tr.MIGPending = ret == nvml.SUCCESS && cur == nvml.DEVICE_MIG_ENABLE, ret == nvml.SUCCESS && pend == nvml.DEVICE_MIG_ENABLE
	maxMIG, ret := dev.GetMaxMigDeviceCount()
	add("GetMaxMigDeviceCount", ret, func() string { return fmt.Sprint(maxMIG) }, false)
	isMIG, ret := dev.IsMigDeviceHandle()
	add("IsMigDeviceHandle", ret, func() string { return fmt.Sprint(isMIG) }, false)
	_, ret = dev.GetGpuInstanceId()
	add("GetGpuInstanceId on a GPU", ret, nil, false)
	_, ret = dev.GetComputeInstanceId()
	add("GetComputeInstanceId on a GPU", ret, nil, false)
	_, ret = dev.GetDeviceHandleFromMigDeviceHandle()
	add("GetDeviceHandleFromMigDeviceHandle on a GPU", ret, nil, false)
	_, ret = dev.GetMigDeviceHandleByIndex(0)
	add("GetMigDeviceHandleByIndex(0)", ret, nil, false)
	procs, ret := dev.GetComputeRunningProcesses()
	add("GetComputeRunningProcesses", ret, func() string { return fmt.Sprint(len(procs)) }, true)

	infos := map[int]nvml.GpuInstanceProfileInfo{} // by GI profile ID
	for pi := -1; pi <= nvml.GPU_INSTANCE_PROFILE_COUNT; pi++ {
		info, ret := dev.GetGpuInstanceProfileInfo(pi)
		add(fmt.Sprintf("GetGpuInstanceProfileInfo(%d)", pi), ret, func() string { return giProfileText(info) }, false)
		if ret == nvml.SUCCESS {
			infos[int(info.Id)] = info
		}
	}
	var ids []int
	if model, err := cat.Model(name); err == nil {
		for _, p := range model.Profiles {
			ids = append(ids, p.ID)
			if _, ok := infos[p.ID]; !ok {
				infos[p.ID] = nvml.GpuInstanceProfileInfo{Id: uint32(p.ID)}
			}
		}
	}
	var extra []int // profiles NVML offers that the catalog lacks
	for id := range infos {
		if !slices.Contains(ids, id) {
			extra = append(extra, id)
		}
	}
	slices.Sort(extra)
	ids = append(ids, extra...)
	for _, id := range ids {
		info := infos[id]
		pls, ret := dev.GetGpuInstancePossiblePlacements(&info)
		add(fmt.Sprintf("GetGpuInstancePossiblePlacements(id %d)", id), ret, func() string {
			parts := make([]string, len(pls))
			for i, pl := range pls {
				parts[i] = fmt.Sprintf("%d+%d", pl.Start, pl.Size)
			}
			return strings.Join(parts, ",")
		}, false)
		n, ret := dev.GetGpuInstanceRemainingCapacity(&info)
		add(fmt.Sprintf("GetGpuInstanceRemainingCapacity(id %d)", id), ret, func() string { return fmt.Sprint(n) }, false)
		gis, ret := dev.GetGpuInstances(&info)
		add(fmt.Sprintf("GetGpuInstances(id %d)", id), ret, func() string { return fmt.Sprint(len(gis)) }, false)
	}
	unknown := nvml.GpuInstanceProfileInfo{Id: 99, InstanceCount: 1}
	_, ret = dev.GetGpuInstancePossiblePlacements(&unknown)
	add("GetGpuInstancePossiblePlacements(id 99)", ret, nil, false)
	_, ret = dev.GetGpuInstanceRemainingCapacity(&unknown)
	add("GetGpuInstanceRemainingCapacity(id 99)", ret, nil, false)
	_, ret = dev.GetGpuInstances(&unknown)
	add("GetGpuInstances(id 99)", ret, nil, false)
	_, ret = dev.GetGpuInstanceById(1)
	add("GetGpuInstanceById(1)", ret, nil, false)

	if cur == nvml.DEVICE_MIG_DISABLE && pend == nvml.DEVICE_MIG_DISABLE && len(ids) > 0 {
		info := infos[ids[0]]
		gi, ret := dev.CreateGpuInstance(&info)
		add(fmt.Sprintf("CreateGpuInstance(id %d) with MIG mode off", ids[0]), ret, nil, false)
		if ret == nvml.SUCCESS {
			add("GpuInstance.Destroy", gi.Destroy(), nil, false)
		}
		gi, ret = dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 0, Size: 1})
		add(fmt.Sprintf("CreateGpuInstanceWithPlacement(id %d, 0+1) with MIG mode off", ids[0]), ret, nil, false)
		if ret == nvml.SUCCESS {
			add("GpuInstance.Destroy", gi.Destroy(), nil, false)
		}
	}
	return tr, nil
}

// simulatedTrace probes a simulator of rec's GPU, brought to rec's MIG
// mode.
func simulatedTrace(t *testing.T, rec nvmlTrace) nvmlTrace {
	t.Helper()
	cat := mig.DefaultCatalog()
	model, err := cat.Model(rec.Product)
	if err != nil {
		t.Fatalf("the catalog lacks the recorded GPU: %v", err)
	}
	sim, err := nvmlsim.New(nvmlsim.Config{Spec: "1x" + model.Name})
	if err != nil {
		t.Fatal(err)
	}
	if ret := sim.Init(); ret != nvml.SUCCESS {
		t.Fatalf("initialising the simulator: %s", returnName(ret))
	}
	defer sim.Shutdown()
	if rec.MIGCurrent != rec.MIGPending {
		t.Fatalf("the trace was recorded with a MIG mode change pending (current %t, pending %t), which the simulator is not brought to", rec.MIGCurrent, rec.MIGPending)
	}
	if rec.MIGCurrent {
		dev, ret := sim.DeviceGetHandleByIndex(0)
		if ret != nvml.SUCCESS {
			t.Fatal(returnName(ret))
		}
		if _, ret := dev.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
			t.Fatalf("enabling MIG mode: %s", returnName(ret))
		}
		if model.MIGModeNeedsReset {
			if err := sim.ResetGPU(0); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := probe(sim, cat, 0)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// diffTraces is the difference between the recorded calls and the
// simulator's, values of Board calls ignored ("" when they agree).
func diffTraces(rec, sim nvmlTrace) string {
	strip := func(tr nvmlTrace) []nvmlCall {
		out := make([]nvmlCall, len(tr.Calls))
		for i, c := range tr.Calls {
			if c.Board {
				c.Value = ""
			}
			out[i] = c
		}
		return out
	}
	return cmp.Diff(strip(rec), strip(sim), cmpopts.EquateEmpty())
}

// TestSimulatorAnswersAsRecorded replays each trace recorded on a real GPU
// against the simulator: every call must give the same return code, and
// every value but the board's the same value.
func TestSimulatorAnswersAsRecorded(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "nvml-traces", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded NVML traces in testdata/nvml-traces")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var rec nvmlTrace
			if err := json.Unmarshal(b, &rec); err != nil {
				t.Fatal(err)
			}
			if d := diffTraces(rec, simulatedTrace(t, rec)); d != "" {
				t.Errorf("the simulator answers otherwise than NVML did (%s) (-recorded +simulated):\n%s", rec.Recorded, d)
			}
		})
	}
}
