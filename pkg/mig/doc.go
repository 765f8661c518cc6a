// Package mig is the Multi-Instance GPU (MIG) domain of miglayout. It has no
// Kubernetes imports.
//
// It holds:
//   - the catalog of MIG-capable GPU models and their GPU-instance profiles
//     (models/*.yaml, numbers from the NVIDIA Multi-Instance GPU User Guide,
//     section "Supported MIG Profiles"; values that no cited source gives are
//     listed in each profile's Unverified field);
//   - Layout, a set of GPU instances given as profile@placement on one GPU, with
//     validation, a canonical text form ("3g.40gb@0,2g.20gb@4,1g.10gb@6") and its
//     parser;
//   - Fit, which places a multiset of profiles onto a GPU around devices that must
//     stay, with the fewest moves; Diff, which turns a current layout into a
//     desired one keeping every unchanged device; and MaximalLayouts.
//
// Sub-packages hold the go-nvml backed GPU manager (gpu) and the NVML simulator
// (nvmlsim) that tests and the demo run it against.
//
// Units: memory is in MiB (1 MiB = 2^20 bytes) everywhere in this package, as
// NVML's memorySizeMB reports it; placements and sizes are counted in memory
// slices (8 per GPU on A100/H100/H200/B200, 4 on A30).
package mig
