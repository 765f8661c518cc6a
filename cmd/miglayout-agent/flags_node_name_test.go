package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunWithoutNodeNameSaysWhereItComesFrom: an agent started without a
// node name says that --node-name or $NODE_NAME must give one, rather than
// that the empty name is not a node name.
func TestRunWithoutNodeNameSaysWhereItComesFrom(t *testing.T) {
	o := options{driverName: "mig.miglayout.io", stateDir: t.TempDir(), settle: 5 * time.Second, resync: time.Minute,
		maxPass: 10 * time.Minute, leaseDuration: 40 * time.Second, metricsAddr: ":8081", healthAddr: ":8082"}
	err := run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "$NODE_NAME") || !strings.Contains(err.Error(), "required") {
		t.Errorf("run: %v, want an error saying --node-name (or $NODE_NAME) is required", err)
	}
}
