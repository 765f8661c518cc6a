package plugin

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/miglayout/miglayout/pkg/slices"
)

// TestUVMNodesMadeByPreparesAtOnce: the kubelet's prepare and the agent's
// re-prepare of the claims it holds (RefreshRecreated) run at once while
// the Unified Memory nodes are missing, or of another major (a reboot, the
// module loaded again); neither fails, and the nodes the specs name are
// there afterwards: one's remaking of the nodes does not remove the
// other's.
func TestUVMNodesMadeByPreparesAtOnce(t *testing.T) {
	for name, stale := range map[string]bool{"missing": false, "of another major": true} {
		t.Run(name, func(t *testing.T) {
			e, devRoot := devEnv(t)
			writeParams(t, e.hostRoot, 1)
			p := e.pluginWithDev(devRoot)
			a := claim(uid1, "a", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-2"})
			b := claim(uid2, "b", alloc{"mig", slices.DefaultDriverName, node, "gpu-0-mig-1g10gb-19-3"})
			for _, c := range []*resourceapi.ResourceClaim{a, b} {
				if r := e.prepare(p, c); r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			const rounds = 1000
			failed, gone := 0, 0
			for round := range rounds {
				for _, n := range []string{"nvidia-uvm", "nvidia-uvm-tools"} {
					path := filepath.Join(devRoot, n)
					_ = os.Remove(path)
					if stale {
						if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(240, driverNodes[n][1]))); err != nil {
							t.Fatal(err)
						}
					}
				}
				var wg sync.WaitGroup
				var prepErr error
				var refreshErrs []error
				wg.Go(func() {
					res, err := p.PrepareResourceClaims(e.ctx, []*resourceapi.ResourceClaim{b})
					prepErr = err
					if err == nil {
						prepErr = res[b.UID].Err
					}
				})
				wg.Go(func() {
					for _, err := range p.RefreshRecreated(e.ctx) {
						refreshErrs = append(refreshErrs, err)
					}
				})
				wg.Wait()
				if prepErr != nil || len(refreshErrs) > 0 {
					if failed++; failed == 1 {
						t.Logf("round %d: prepare: %v; refresh: %v", round, prepErr, refreshErrs)
					}
				}
				for _, n := range []string{"nvidia-uvm", "nvidia-uvm-tools"} {
					var st unix.Stat_t
					if err := unix.Lstat(filepath.Join(devRoot, n), &st); err != nil || st.Rdev != unix.Mkdev(237, driverNodes[n][1]) {
						gone++
					}
				}
			}
			if failed > 0 || gone > 0 {
				t.Errorf("of %d rounds, %d had the prepare or the re-prepare fail, and %d nodes were missing or stale after one", rounds, failed, gone)
			}
		})
	}
}
