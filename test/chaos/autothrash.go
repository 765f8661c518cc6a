package chaos

import (
	"regexp"
	"strconv"

	"k8s.io/apimachinery/pkg/util/sets"

	migslices "github.com/miglayout/miglayout/pkg/slices"
)

var nvmlWorkRE = regexp.MustCompile(`"(Creating|Destroying) MIG device" [^\n]*? gpu=(\d+) device="([^"]+)"`)

// unusedDestroys counts, in an agent's log of a run, the MIG devices created in the run
// and destroyed again without any claim ever being allocated one of them (allocated
// holds the device names claims were seen allocated on that node). Each is a change of
// plan, a device made for a pod that left before it was served, or a rollback.
func unusedDestroys(log []byte, allocated sets.Set[string]) int {
	type dev struct {
		gpu    int
		device string
	}
	created := map[dev]bool{}
	n := 0
	for _, m := range nvmlWorkRE.FindAllSubmatch(log, -1) {
		gpu, _ := strconv.Atoi(string(m[2]))
		d := dev{gpu, string(m[3])}
		if string(m[1]) == "Creating" {
			created[d] = true
			continue
		}
		if !created[d] {
			continue
		}
		delete(created, d)
		profile, start, ok := splitDevice(d.device)
		used := false
		for name := range allocated {
			used = used || (ok && migslices.IsMIGDeviceName(name, d.gpu, profile, start))
		}
		if !used {
			n++
		}
	}
	return n
}

// splitDevice splits "3g.40gb@4" into its profile and placement start.
func splitDevice(s string) (string, int, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '@' {
			start, err := strconv.Atoi(s[i+1:])
			return s[:i], start, err == nil
		}
	}
	return "", 0, false
}
