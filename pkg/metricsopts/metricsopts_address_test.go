package metricsopts

import "testing"

// TestOptionsBindAddress: the metrics server listens where the flag says,
// plain or secure, and "0" stays "0" (no metrics server).
func TestOptionsBindAddress(t *testing.T) {
	for _, addr := range []string{"0", "127.0.0.1:9090", ":8443"} {
		for _, secure := range []bool{false, true} {
			if got := Options(addr, secure).BindAddress; got != addr {
				t.Errorf("Options(%q, %t): bind address %q, want %q", addr, secure, got, addr)
			}
		}
	}
}
