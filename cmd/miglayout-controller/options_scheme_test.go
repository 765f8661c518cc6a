package main

import "testing"

// TestManagerOptionsUseTheScheme: the manager is given the scheme that
// knows the miglayout API (controller-runtime's default one does not).
func TestManagerOptionsUseTheScheme(t *testing.T) {
	s, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	if m := parseFlags(t, nil).managerOptions(s); m.Scheme != s {
		t.Errorf("manager scheme %p, want newScheme's %p", m.Scheme, s)
	}
}
