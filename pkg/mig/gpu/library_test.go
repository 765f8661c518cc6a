package gpu

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestFindNVMLLibrary: libnvidia-ml.so.1 is found in the driver root's
// library directories, through relative links and absolute ones (taken
// inside the driver root, as the host reads them); a dangling link is no
// library; none at all wraps ErrNotFound.
func TestFindNVMLLibrary(t *testing.T) {
	write := func(t *testing.T, root, rel string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("ELF"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(t *testing.T, root, rel, target string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	for name, tc := range map[string]struct {
		setup func(t *testing.T, root string)
		want  string // relative to the root; "" for ErrNotFound
	}{
		"Debian layout, relative link": {func(t *testing.T, root string) {
			write(t, root, "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05")
			link(t, root, "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "libnvidia-ml.so.580.95.05")
		}, "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.95.05"},
		"RPM layout, absolute link": {func(t *testing.T, root string) {
			write(t, root, "usr/lib64/libnvidia-ml.so.580.95.05")
			link(t, root, "usr/lib64/libnvidia-ml.so.1", "/usr/lib64/libnvidia-ml.so.580.95.05")
		}, "usr/lib64/libnvidia-ml.so.580.95.05"},
		"dangling link, then a library further on": {func(t *testing.T, root string) {
			link(t, root, "usr/lib64/libnvidia-ml.so.1", "libnvidia-ml.so.gone")
			write(t, root, "lib/aarch64-linux-gnu/libnvidia-ml.so.1")
		}, "lib/aarch64-linux-gnu/libnvidia-ml.so.1"},
		"relative link climbing past the top": {func(t *testing.T, root string) {
			write(t, root, "usr/lib64/libnvidia-ml.so.580.95.05")
			link(t, root, "usr/lib64/libnvidia-ml.so.1", "../../../../usr/lib64/libnvidia-ml.so.580.95.05")
		}, "usr/lib64/libnvidia-ml.so.580.95.05"},
		"library directory linked absolutely": {func(t *testing.T, root string) {
			write(t, root, "opt/nvidia/lib/libnvidia-ml.so.1")
			link(t, root, "usr/lib64", "/opt/nvidia/lib")
		}, "opt/nvidia/lib/libnvidia-ml.so.1"},
		"link loop, then a library further on": {func(t *testing.T, root string) {
			link(t, root, "usr/lib64/libnvidia-ml.so.1", "libnvidia-ml.so.1")
			write(t, root, "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")
		}, "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"},
		"no driver": {func(t *testing.T, root string) {
			write(t, root, "usr/lib/x86_64-linux-gnu/libc.so.6")
		}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			tc.setup(t, root)
			got, err := FindNVMLLibrary(root)
			if tc.want == "" {
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("FindNVMLLibrary = %q, %v; want ErrNotFound", got, err)
				}
				return
			}
			if err != nil || got != filepath.Join(root, tc.want) {
				t.Errorf("FindNVMLLibrary = %q, %v; want %s", got, err, filepath.Join(root, tc.want))
			}
		})
	}
}
