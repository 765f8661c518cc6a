package agent

import (
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// ctrlOptions: one worker, since one node's GPUs are repartitioned by one
// pass at a time.
func ctrlOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: 1}
}
