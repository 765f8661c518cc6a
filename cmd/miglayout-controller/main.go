// Command miglayout-controller runs the miglayout controller: for each
// MigLayout it writes the NodeMigLayouts of the selected nodes and aggregates
// the node agents' reports into the MigLayout's status. Replicas elect a
// leader through a Lease; only the leader reconciles.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/miglayout/miglayout/pkg/managerrun"
)

func main() {
	// controller-runtime registers --kubeconfig on the default flag set.
	klog.InitFlags(nil)
	opts := bindFlags(flag.CommandLine)
	flag.Parse()
	if err := managerrun.NoArgs(flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "miglayout-controller:", err)
		os.Exit(2)
	}
	logger := klog.NewKlogr()
	ctrl.SetLogger(logger)
	ctx := klog.NewContext(ctrl.SetupSignalHandler(), logger)
	if err := run(ctx, opts); err != nil {
		logger.Error(err, "miglayout-controller failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}
