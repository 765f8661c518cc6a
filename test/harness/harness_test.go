package harness

import (
	"crypto/x509"
	"encoding/pem"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Tests of the parts that need no control plane; test/e2e exercises the rest.

func TestBinDirMissingSaysMakeTestbin(t *testing.T) {
	t.Setenv(EnvBinDir, t.TempDir())
	_, err := BinDir()
	if err == nil || !strings.Contains(err.Error(), "make testbin") {
		t.Fatalf("BinDir() error = %v, want one that says to run make testbin", err)
	}
}

func TestClientCertCarriesUserAndGroups(t *testing.T) {
	p, err := newPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	crtPEM, _, err := p.clientCert("system:node:n1", []string{"system:nodes", "extra"})
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(crtPEM)
	crt, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	orgs := append([]string(nil), crt.Subject.Organization...)
	slices.Sort(orgs) // DER sorts the SET of O values
	if crt.Subject.CommonName != "system:node:n1" || strings.Join(orgs, ",") != "extra,system:nodes" {
		t.Errorf("subject %v", crt.Subject)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.ca)
	if _, err := crt.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify against the CA: %v", err)
	}
}

func TestFreePortsDistinct(t *testing.T) {
	ports, err := freePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v", ports)
		}
		seen[p] = true
	}
}

func TestLivePidsIgnoresDeadAndReusedPids(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	me := strconv.Itoa(os.Getpid())
	content := "owner:" + filepath.Base(self) + " " + me + "\n" + // the process that started the plane
		filepath.Base(self) + " " + me + "\n" + // alive, right name
		"owner:other " + me + "\n" + // alive, but not other: a reused pid
		"etcd " + me + "\n" + // alive, but not etcd: a reused pid
		"kube-apiserver 999999999\n" + // dead
		"garbage\n"
	if err := os.WriteFile(filepath.Join(dir, PidsFile), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	got := LivePids(dir)
	want := map[string]int{filepath.Base(self): os.Getpid(), "owner:" + filepath.Base(self): os.Getpid()}
	if !maps.Equal(got, want) {
		t.Errorf("LivePids = %v, want only this test binary, as itself and as owner %v", got, want)
	}
}

func TestStillRunningErrorNamesProcessesAndHowToStop(t *testing.T) {
	for name, tc := range map[string]struct {
		live map[string]int
		want string
	}{
		"the process that started them gone": {
			live: map[string]int{"kube-apiserver": 21600, "etcd": 21564},
			want: "a cluster from /state is still running: etcd (pid 21564), kube-apiserver (pid 21600); stop it with Ctrl-C where it was started, or: kill 21564 21600",
		},
		"the process that started them running": {
			live: map[string]int{"kube-apiserver": 21600, "etcd": 21564, "owner:miglayout-demo": 21500},
			want: "a cluster from /state is still running: etcd (pid 21564), kube-apiserver (pid 21600), started by miglayout-demo (pid 21500); stop it with Ctrl-C where it was started, or: kill 21500",
		},
	} {
		if err := StillRunningError("a cluster", "/state", tc.live); err.Error() != tc.want {
			t.Errorf("%s: error %q, want %q", name, err, tc.want)
		}
	}
}
