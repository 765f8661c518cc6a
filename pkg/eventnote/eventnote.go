// Package eventnote keeps events whose notes differ apart when they are
// recorded with client-go's events.k8s.io recorder (the one
// controller-runtime's manager hands out).
//
// That recorder counts an event whose regarding and related objects, type,
// reason and action equal one it recorded in the last minutes as a repeat:
// it updates the first event's series and drops the new note. A GPU
// repartitioned twice, a pod whose reason to wait changed, or a drain
// blocked by another cause would still read the first note in
// `kubectl describe`. Distinct makes the action end in a hash of the note,
// so only an event with the very same note is folded into a series.
package eventnote

import (
	"fmt"
	"hash/fnv"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Distinct returns rec wrapped so that the action of every event it records
// ends in "-" and the FNV-1a (32-bit, hex) hash of the event's note (Action):
// "RepartitionGPU0" becomes "RepartitionGPU0-1a2b3c4d". The note is formatted
// as rec formats it (fmt.Sprintf(note, args...)). A nil rec gives nil, and a
// recorder Distinct returned is returned as it is (its actions get one hash).
func Distinct(rec events.EventRecorder) events.EventRecorder {
	switch rec.(type) {
	case nil:
		return nil
	case distinct:
		return rec
	}
	return distinct{rec: rec}
}

// Action is action with a hash of note appended, as Distinct records it.
// The events.k8s.io API allows actions of up to 128 characters; the hash
// takes 9.
func Action(action, note string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(note))
	return fmt.Sprintf("%s-%08x", action, h.Sum32())
}

type distinct struct{ rec events.EventRecorder }

// Eventf records the event with rec, its action ending in the note's hash.
func (d distinct) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	msg := fmt.Sprintf(note, args...)
	d.rec.Eventf(regarding, related, eventtype, reason, Action(action, msg), "%s", msg)
}
