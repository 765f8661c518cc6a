package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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
// the Node and clears nothing. The annotation holds one value, so a
// request that replaces another the agent may not have read yet carries
// it in earlier (ClearXidsRequest.Merge; kubectl miglayout clear-xids
// does it); an agent of a release before earlier refuses such a value.
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
	// RequestedAt is when the request was made (RFC 3339, to the second,
	// by the requester's clock): a mark whose Xid the node last saw in
	// that second or after, by the node's clock, is kept (an Xid the
	// requester may not have seen); clocks out of step keep or clear marks
	// of the seconds between. Left out: every mark of the GPUs is cleared,
	// however new.
	// +optional
	RequestedAt *metav1.Time `json:"requestedAt,omitempty"`
	// Earlier are the requests this one replaced on the annotation, which
	// the agent may not have read: each is applied with this one, under
	// its ID. Applying one again clears nothing it did not clear the
	// first time but a mark older than its requestedAt. At most 64 items;
	// ordered oldest first.
	// +optional
	Earlier []ClearXidsPart `json:"earlier,omitempty"`
}

// ClearXidsPart is what one request to clear the Xid marks asks for: the
// GPUs and time of a ClearXidsRequest.
type ClearXidsPart struct {
	// GPUs are the NVML indexes of the GPUs whose marks are cleared; empty
	// or left out: every GPU of the node. At most 64 items.
	// +optional
	GPUs []int `json:"gpus,omitempty"`
	// RequestedAt is as in ClearXidsRequest: marks whose Xid the node saw
	// last after it are kept. Left out: none is kept.
	// +optional
	RequestedAt *metav1.Time `json:"requestedAt,omitempty"`
}

// String names the part's GPUs, and its time where set, for people:
// "every GPU", "GPUs [0 3] as of 2026-12-06T20:30:00Z".
func (p ClearXidsPart) String() string {
	which := "every GPU"
	if len(p.GPUs) > 0 {
		which = fmt.Sprintf("GPUs %v", p.GPUs)
	}
	if p.RequestedAt != nil {
		which += " as of " + p.RequestedAt.UTC().Format(time.RFC3339)
	}
	return which
}

// maxClearXidsItems bounds a request's GPUs, each part's, and its earlier
// parts.
const maxClearXidsItems = 64

// Parts returns what the request asks for: its own GPUs and time first,
// then Earlier's.
func (r ClearXidsRequest) Parts() []ClearXidsPart {
	return append([]ClearXidsPart{{GPUs: r.GPUs, RequestedAt: r.RequestedAt}}, r.Earlier...)
}

// Merge returns r carrying, in Earlier, what the request it replaces on
// the annotation (replaced, and its own earlier parts) asked for beyond r:
// for each GPU, the latest time a part asked to clear its marks before,
// where neither r nor a part naming every GPU asks for as much. A part
// without requestedAt is not carried: applied again, after the agent read
// it, it would clear marks of Xids seen since. What remains is grouped by
// time, oldest first; beyond 64 groups, or 64 GPUs in a group, the oldest
// groups and the lowest indexes are dropped (requests naming more GPU
// indexes than a node has).
func (r ClearXidsRequest) Merge(replaced ClearXidsRequest) ClearXidsRequest {
	// Times to the second, as the agent compares them.
	at := func(p ClearXidsPart) (time.Time, bool) {
		if p.RequestedAt == nil || p.RequestedAt.IsZero() {
			return time.Time{}, false
		}
		return p.RequestedAt.Time.UTC().Truncate(time.Second), true
	}
	own, ownTimed := at(ClearXidsPart{RequestedAt: r.RequestedAt})
	// ownCovers: r clears GPU idx's marks (idx -1: every GPU's) up to t.
	ownCovers := func(idx int, t time.Time) bool {
		if len(r.GPUs) > 0 && (idx < 0 || !slices.Contains(r.GPUs, idx)) {
			return false
		}
		return !ownTimed || !own.Before(t)
	}
	var every time.Time // the latest time of a part naming every GPU
	hasEvery := false
	gpus := map[int]time.Time{}
	for _, p := range append(replaced.Parts(), r.Earlier...) {
		t, ok := at(p)
		switch {
		case !ok:
		case len(p.GPUs) == 0:
			if !hasEvery || t.After(every) {
				every, hasEvery = t, true
			}
		default:
			for _, idx := range p.GPUs {
				if old, ok := gpus[idx]; !ok || t.After(old) {
					gpus[idx] = t
				}
			}
		}
	}
	var parts []ClearXidsPart
	if hasEvery && !ownCovers(-1, every) {
		parts = append(parts, ClearXidsPart{RequestedAt: &metav1.Time{Time: every}})
	}
	byTime := map[time.Time][]int{}
	for idx, t := range gpus {
		if !(hasEvery && !every.Before(t)) && !ownCovers(idx, t) {
			byTime[t] = append(byTime[t], idx)
		}
	}
	for t, idxs := range byTime {
		slices.Sort(idxs)
		parts = append(parts, ClearXidsPart{GPUs: idxs[max(0, len(idxs)-maxClearXidsItems):], RequestedAt: &metav1.Time{Time: t}})
	}
	slices.SortFunc(parts, func(a, b ClearXidsPart) int { return a.RequestedAt.Compare(b.RequestedAt.Time) })
	out := r
	out.Earlier = parts[max(0, len(parts)-maxClearXidsItems):]
	if len(out.Earlier) == 0 {
		out.Earlier = nil
	}
	return out
}

// ParseClearXidsRequest reads an AnnotationClearXids value. It refuses
// unknown fields and what Validate refuses.
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
	if err := r.Validate(); err != nil {
		return ClearXidsRequest{}, fmt.Errorf("parsing %s %q: %w", AnnotationClearXids, value, err)
	}
	return r, nil
}

// Validate refuses an empty or longer than 128-character ID, a negative GPU
// index, more than 64 GPUs in a part and more than 64 earlier parts.
func (r ClearXidsRequest) Validate() error {
	switch {
	case r.ID == "":
		return errors.New("id is required")
	case len(r.ID) > 128:
		return fmt.Errorf("id is %d characters, at most 128", len(r.ID))
	case len(r.Earlier) > maxClearXidsItems:
		return fmt.Errorf("%d earlier requests, at most %d", len(r.Earlier), maxClearXidsItems)
	}
	for i, p := range r.Parts() {
		where := ""
		if i > 0 {
			where = fmt.Sprintf("earlier[%d]: ", i-1)
		}
		if len(p.GPUs) > maxClearXidsItems {
			return fmt.Errorf("%s%d GPUs, at most %d", where, len(p.GPUs), maxClearXidsItems)
		}
		for _, idx := range p.GPUs {
			if idx < 0 {
				return fmt.Errorf("%sGPU index %d is negative", where, idx)
			}
		}
	}
	return nil
}
