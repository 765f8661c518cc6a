// Package chaos measures miglayout's reliability promises on the real test cluster
// (test/cluster: control plane, CRDs, the controller and one agent per node on simulated
// GPUs, stand-in kubelets), over many seeded scenarios:
//
//   - Chaos scenarios (Scenario, Runner): on two nodes (2x A100, 1x H100) one MigLayout's
//     rules change at random (counts or explicit placements, MIG off, per-GPU rules, a
//     second change mid-flight) while claims with pods come and go (every other pod idle,
//     running no process on its device: kubelet.IdleLabel), and a fault strikes:
//     the agent killed at a journal step (Draining, Destroying, Creating, SettingMIGMode,
//     with a GPU instance lacking its compute instance, inside an NVML call), an NVML
//     call failing (IN_USE, INSUFFICIENT_RESOURCES, a CI create failing after its GI, with
//     or without a failing rollback, SetMigMode, reads), an NVML call lying (success
//     reported, nothing done), NVML stalling for seconds, concurrent writers causing
//     update conflicts, kube-scheduler stopped, the node's kubelet restarted (it deletes
//     the node's ResourceSlices), the agent killed while draining and kept down until
//     the kubelet deletes them; and in one scenario in five besides, the
//     MigLayout paused and resumed (PauseFlap). Everything a scenario does derives from
//     its seed (NewScenario); it starts from its base layout (explicit placements) and
//     the previous scenario ends on it.
//   - The Monitor counts invariant violations while everything runs: allocations of
//     devices NVML then lacks (the simulators are read under their lock together with a
//     live list of the claims), and — replaying the ResourceSlice and ResourceClaim
//     watch events in etcd revision order — allocations that landed on a tainted or an
//     unpublished device, and devices withdrawn, or published again under their name
//     with another UUID, while allocated; and MIG devices NVML destroyed (a poll lacks
//     a UUID that a poll or a publication had) whose UUID left the pool from a
//     publication without the drain taint (UndrainedDestroyed: the agent must drain a
//     device before it destroys it, allocated or not; a device never published, or of
//     a GPU fallen off the bus, is exempt). A pool whose slices are all deleted is
//     absent (PoolAbsence): allowed only after a kubelet restart of its node or an
//     outage of its agent past the kubelet's wipe delay, and judged by what it
//     publishes once it is back.
//   - After each scenario, once the product reports convergence (twice: with the claims,
//     where Blocked is accepted only when a device that must go is really in use; and
//     after releasing them, on the next scenario's base layout), Env.Check compares the
//     published pool with NVML and NVML with the desired layouts, and looks for GPU
//     instances without compute instance.
//   - The drain race (RunDrainRace) flips race nodes (one per settle period, and
//     RaceBindNode, whose devices carry binding conditions) between two layouts while
//     claims arrive, with the scheduler running normally or stopped across the flip, and
//     counts what happened to each drain. An allocation that waits for a binding
//     confirmation the agent refuses is no violation (RefusedAllocation): no pod is bound
//     to it.
//   - Auto scenarios (AutoScenario, Runner.RunAuto): from a seeded Static base layout the
//     chaos MigLayout switches to Auto (seeded limits on GPUs changing at once, a spare
//     now and then); pods asking for one MIG device of a random profile (from 1g.10gb
//     up to 7g.80gb, CEL on the profile attribute), some of high priority, arrive on
//     either node and are deleted a random hold after they are bound (a few abandoned
//     while pending), while the planner repartitions and a fault of the same kinds
//     strikes (MIG-mode faults excepted: Auto mode plans on GPUs with MIG on). The
//     Monitor's counts must be 0. Liveness: once the faults end and nothing arrives or
//     departs, a pending pod that some GPU could serve beside the devices in use must be
//     bound within -chaos.auto-liveness, unless a pod the planner takes first (higher
//     priority, or as large) of 3 compute slices or more fits nowhere and may keep a
//     placement; the same again after the bound pods are released (pending pods that the
//     freed GPUs could hold together but are left pending are counted, not failed).
//     Then, everything released, the nodes must settle and Env.Check find the pools
//     equal to NVML and no GPU instance without compute instance. The table gives the
//     devices destroyed per pod served and the planned changes that return a GPU to a
//     layout it was planned away from, to spot thrash.
//
// The tests (go test ./test/chaos) run the quick mode in CI (4 Auto scenarios among
// them); -chaos.long runs 500 scenarios, as does `go run ./cmd/miglayout-chaos
// -scenarios 500`, and 40 Auto scenarios.
package chaos
