package v1alpha1

// AnnotationSpecWrittenBy, on a NodeMigLayout, names the mode whose writer
// last wrote its spec.gpus: ModeStatic (the controller, from the
// MigLayout's rules) or ModeAuto (the Auto planner). A MigLayout switched
// to Auto mode, or an Auto MigLayout adopting the node, drops the changes
// of a spec written in Static mode (or by another MigLayout) that the
// agent has not started; a Static write over a spec the Auto planner wrote
// first reads the MigLayout from the API server, so that a Static pass
// that began before a switch to Auto does not overwrite the plan. An
// object without it (written by an earlier release) counts as written in
// the mode of the MigLayout that controls it.
const AnnotationSpecWrittenBy = "miglayout.io/spec-written-by"
