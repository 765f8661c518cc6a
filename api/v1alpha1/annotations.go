package v1alpha1

import (
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

// AnnotationClearXids, on a Node, asks the node's agent to forget the Xid
// marks of its GPUs (the devices an Xid critical error made Unhealthy and
// published with the taint miglayout.io/xid), once the GPUs were reset or
// found sound. Its value is a ClearXidsRequest in JSON, for example
// {"id":"r1","gpus":[0,3],"requestedAt":"2026-12-06T20:30:00Z"}; kubectl
// miglayout clear-xids writes it. The agent applies each request ID once (it keeps
// the last ID applied across its restarts), so a request is repeated with
// a new ID. A value that does not parse is refused with a Warning event on
// the Node and clears nothing.
const AnnotationClearXids = "miglayout.io/clear-xids"

// ClearXidsRequest is the value of AnnotationClearXids.
type ClearXidsRequest struct {
	// ID names the request; the agent applies each ID once. Required, at
	// most 128 characters.
	ID string `json:"id"`
	// GPUs are the NVML indexes of the GPUs whose marks are cleared; empty
	// or left out: every GPU of the node. At most 64 items.
	// +optional
	GPUs []int `json:"gpus,omitempty"`
	// RequestedAt is when the request was made (RFC 3339, by the
	// requester's clock): a mark whose Xid the node last saw after it, by
	// the node's clock, to the second, is kept (an Xid the requester had
	// not seen); clocks out of step keep or clear marks of the seconds
	// between. Left out: every mark of the GPUs is cleared, however new.
	// +optional
	RequestedAt *metav1.Time `json:"requestedAt,omitempty"`
}

// ParseClearXidsRequest reads an AnnotationClearXids value. It refuses
// unknown fields, an empty or longer than 128-character ID, a negative GPU
// index and more than 64 GPUs.
func ParseClearXidsRequest(value string) (ClearXidsRequest, error) {
	var r ClearXidsRequest
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return ClearXidsRequest{}, fmt.Errorf("parsing %s %q: want JSON such as {\"id\":\"1\",\"gpus\":[0]}: %w", AnnotationClearXids, value, err)
	}
	if dec.More() {
		return ClearXidsRequest{}, fmt.Errorf("parsing %s %q: more than one JSON value", AnnotationClearXids, value)
	}
	switch {
	case r.ID == "":
		return ClearXidsRequest{}, fmt.Errorf("parsing %s %q: id is required", AnnotationClearXids, value)
	case len(r.ID) > 128:
		return ClearXidsRequest{}, fmt.Errorf("parsing %s: id is %d characters, at most 128", AnnotationClearXids, len(r.ID))
	case len(r.GPUs) > 64:
		return ClearXidsRequest{}, fmt.Errorf("parsing %s: %d GPUs, at most 64", AnnotationClearXids, len(r.GPUs))
	}
	for _, idx := range r.GPUs {
		if idx < 0 {
			return ClearXidsRequest{}, fmt.Errorf("parsing %s %q: GPU index %d is negative", AnnotationClearXids, value, idx)
		}
	}
	return r, nil
}
