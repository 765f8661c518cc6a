// Package eventnote keeps events whose notes differ apart when they are
// recorded with client-go's events.k8s.io recorder (the one
// controller-runtime's manager hands out).
//
// That recorder counts an event whose regarding and related objects, type,
// reason and action equal one it recorded in the last minutes as a repeat:
// it folds it into the first event's series and drops the new note, and
// from the third occurrence on it sends nothing to the API server until
// the series has been quiet for 6 minutes. A GPU repartitioned twice, a pod
// whose reason to wait changed, or a drain blocked by another cause would
// still read the first note in `kubectl describe`; a note that comes back
// after another (a GPU back on its earlier layout, a pod waiting again for
// the first reason) would look older than the note it replaced. Distinct
// gives every change of note an action of its own, so only an event that
// repeats the note just recorded is folded into a series.
package eventnote

import (
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// forget is how long Distinct remembers the last note of a series key after
// its last event: longer than the recorder keeps an event to fold repeats
// into (6 minutes after its last occurrence, checked every 6 minutes).
const forget = 15 * time.Minute

// Distinct returns rec wrapped so that the action of every event it records
// ends in "-" and 8 hex digits (FNV-1a, 32 bits): the hash of the event's
// note (Action) for the first event of its regarding and related objects,
// type, reason and action, and for a later one whose note differs from the
// one recorded last for them, the hash of the note chained to the previous
// action, so that a note that comes back after another is a new event too;
// an event that repeats the last note reuses its action and is folded into
// its series. "RepartitionGPU0" becomes "RepartitionGPU0-1a2b3c4d". The note
// is formatted as rec formats it (fmt.Sprintf(note, args...)). A nil rec
// gives nil, and a recorder Distinct returned is returned as it is (its
// actions get one hash).
func Distinct(rec events.EventRecorder) events.EventRecorder {
	return distinctWithClock(rec, time.Now)
}

func distinctWithClock(rec events.EventRecorder, now func() time.Time) events.EventRecorder {
	switch rec.(type) {
	case nil:
		return nil
	case *distinct:
		return rec
	}
	return &distinct{rec: rec, now: now, last: map[seriesKey]lastEvent{}}
}

// Action is action with the hash of note appended, as Distinct records the
// first event of a series key.
func Action(action, note string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(note))
	return fmt.Sprintf("%s-%08x", action, h.Sum32())
}

type distinct struct {
	rec events.EventRecorder
	now func() time.Time

	mu     sync.Mutex
	last   map[seriesKey]lastEvent
	pruned time.Time
}

// seriesKey is what the recorder tells series apart by, but the
// reporting controller (one per recorder).
type seriesKey struct {
	regarding, related, eventtype, reason, action string
}

type lastEvent struct {
	note, action string
	at           time.Time
}

// Eventf records the event with rec under the action Distinct describes.
func (d *distinct) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	msg := fmt.Sprintf(note, args...)
	k := seriesKey{regarding: objectKey(regarding), related: objectKey(related), eventtype: eventtype, reason: reason, action: action}
	d.mu.Lock()
	now := d.now()
	d.prune(now)
	prev, ok := d.last[k]
	act := prev.action
	switch {
	case !ok:
		act = Action(action, msg)
	case prev.note != msg:
		act = Action(action, msg+"\x00"+prev.action)
	}
	d.last[k] = lastEvent{note: msg, action: act, at: now}
	d.mu.Unlock()
	d.rec.Eventf(regarding, related, eventtype, reason, act, "%s", msg)
}

// prune forgets, at most once a minute, the series keys without an event
// for longer than forget. d.mu is held.
func (d *distinct) prune(now time.Time) {
	if now.Sub(d.pruned) < time.Minute {
		return
	}
	d.pruned = now
	for k, e := range d.last {
		if now.Sub(e.at) > forget {
			delete(d.last, k)
		}
	}
}

// objectKey names obj as the recorder's series key does: kind, namespace,
// name and UID ("" for nil).
func objectKey(obj runtime.Object) string {
	if obj == nil {
		return ""
	}
	if ref, ok := obj.(*corev1.ObjectReference); ok {
		return fmt.Sprintf("%s/%s/%s/%s/%s", ref.APIVersion, ref.Kind, ref.Namespace, ref.Name, ref.UID)
	}
	if m, err := meta.Accessor(obj); err == nil {
		return fmt.Sprintf("%T/%s/%s/%s", obj, m.GetNamespace(), m.GetName(), m.GetUID())
	}
	return fmt.Sprintf("%T/%v", obj, obj)
}
