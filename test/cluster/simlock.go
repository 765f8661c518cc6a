package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/miglayout/miglayout/pkg/mig/nvmlsim"
)

// KillAgentWhen kills a node's agent with SIGKILL at the first moment its simulated GPUs
// satisfy cond, between two NVML calls of the agent, and returns that state.
//
// Every simulator call takes an exclusive flock on the state file's ".lock" file for the
// whole call. KillAgentWhen takes the same lock over and over, reads the state under it,
// and when cond holds kills the agent before releasing it, so the agent cannot make
// another NVML call after the state cond saw: e.g. cond "a GPU instance without its
// compute instance exists" kills the agent between nvmlDeviceCreateGpuInstanceWithPlacement
// and nvmlGpuInstanceCreateComputeInstance. A state that lasts for only one lock cycle
// of the agent may be missed; callers retry the operation when ctx ends first.
func (c *Cluster) KillAgentWhen(ctx context.Context, nodeName string, cond func(nvmlsim.State) bool) (nvmlsim.State, error) {
	n := c.node(nodeName)
	lockPath := n.simState + ".lock"
	for {
		if err := ctx.Err(); err != nil {
			return nvmlsim.State{}, fmt.Errorf("waiting for the simulator state of node %s to satisfy the condition: %w", nodeName, err)
		}
		st, met, err := func() (nvmlsim.State, bool, error) {
			f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				return nvmlsim.State{}, false, err
			}
			defer f.Close() // releases the lock
			for {
				err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
				if !errors.Is(err, syscall.EINTR) {
					break
				}
			}
			if err != nil {
				return nvmlsim.State{}, false, err
			}
			data, err := os.ReadFile(n.simState)
			if err != nil {
				return nvmlsim.State{}, false, err
			}
			var st nvmlsim.State
			if err := json.Unmarshal(data, &st); err != nil {
				return nvmlsim.State{}, false, fmt.Errorf("decoding %s: %w", n.simState, err)
			}
			if !cond(st) {
				return st, false, nil
			}
			c.KillAgent(nodeName)
			return st, true, nil
		}()
		if err != nil {
			return nvmlsim.State{}, err
		}
		if met {
			return st, nil
		}
		// Let a waiting agent take the lock for one call before asking for it again.
		time.Sleep(50 * time.Microsecond)
	}
}
