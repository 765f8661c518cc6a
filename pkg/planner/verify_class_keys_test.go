package planner

import (
	"flag"
	"os"
	"testing"
)

// TestMain has every test of the package check that each GPU's stored
// class key is its state's (stateKey reads the stored one); benchmarks run
// without the check, which costs as much as what it checks.
func TestMain(m *testing.M) {
	flag.Parse()
	if b := flag.Lookup("test.bench"); b == nil || b.Value.String() == "" {
		verifyClassKeys = true
	}
	os.Exit(m.Run())
}
