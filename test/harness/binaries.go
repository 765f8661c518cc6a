package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Pinned versions; keep in sync with test/testbin/build.sh.
const (
	KubernetesVersion = "1.37.2"
	EtcdVersion       = "3.7.3"
)

// EnvBinDir names the environment variable that overrides where the binaries live.
const EnvBinDir = "MIGLAYOUT_TESTBIN"

// Components are the binaries test/testbin/build.sh builds: the control
// plane Start runs, and kubectl, which test clusters (test/cluster) run.
var Components = []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl"}

// DefaultBinDir is where test/testbin/build.sh puts the binaries when MIGLAYOUT_TESTBIN is unset.
func DefaultBinDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".cache", "miglayout", "testbin",
		"v"+KubernetesVersion+"-etcd"+EtcdVersion), nil
}

// BinDir locates the control-plane binaries: $MIGLAYOUT_TESTBIN (an absolute path),
// else DefaultBinDir. It fails, telling the reader to run `make testbin`, when any of
// Components is missing.
func BinDir() (string, error) {
	dir := os.Getenv(EnvBinDir)
	if dir != "" && !filepath.IsAbs(dir) {
		// go test runs each package in its own directory: a relative
		// path would name another directory for each.
		return "", fmt.Errorf("%s=%q is a relative path: give an absolute one (make test resolves it)", EnvBinDir, dir)
	}
	if dir == "" {
		d, err := DefaultBinDir()
		if err != nil {
			return "", fmt.Errorf("locating control-plane binaries: %w (set %s, or run make testbin)", err, EnvBinDir)
		}
		dir = d
	}
	if err := checkBinaries(dir); err != nil {
		return "", err
	}
	return dir, nil
}

func checkBinaries(dir string) error {
	var missing []error
	for _, c := range Components {
		p := filepath.Join(dir, c)
		st, err := os.Stat(p)
		switch {
		case err != nil:
			missing = append(missing, err)
		case st.IsDir() || st.Mode()&0o111 == 0:
			missing = append(missing, fmt.Errorf("%s is not an executable file", p))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("control-plane binaries (Kubernetes %s, etcd %s) missing in %s; run make testbin (takes 10-15 min the first time): %w",
			KubernetesVersion, EtcdVersion, dir, errors.Join(missing...))
	}
	return nil
}
