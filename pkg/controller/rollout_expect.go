package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// rolloutExpectTTL bounds how long a spec write is taken as in flight
// while the cache does not show it: longer than any informer lag, short
// enough that a write the cache never shows (the object deleted or taken
// over meanwhile) does not hold a maxNodesChanging slot for long.
const rolloutExpectTTL = time.Minute

// rolloutExpectations remember, per MigLayout (UID) and node, the spec
// GPUs the reconciler last wrote under maxNodesChanging, until the cache
// shows them. A pass that reads the cache before it shows a write would
// otherwise count that node as holding its old layout and give its slot
// to another node: two nodes changing under a bound of one. Safe for
// concurrent use.
type rolloutExpectations struct {
	mu sync.Mutex
	m  map[types.UID]map[string]rolloutExpectation
}

type rolloutExpectation struct {
	gpus []v1alpha1.GPUSpec
	// generation is the NodeMigLayout's metadata.generation the write
	// gave it (0 where the answer did not say), uid the object's UID (""
	// where unknown): an object of another UID (deleted and made again,
	// its generation starting over at 1) is not the one written, and
	// shows that write gone.
	generation int64
	uid        types.UID
	written    time.Time
	// unsure: the write was answered with an error that may have come
	// after it was applied (writeMayHaveApplied).
	unsure bool
}

// expect records that node's spec GPUs were written as gpus at now on the
// object of UID uid, making its generation the one given (0, "": unknown).
func (e *rolloutExpectations) expect(ml types.UID, node string, gpus []v1alpha1.GPUSpec, uid types.UID, generation int64, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[types.UID]map[string]rolloutExpectation{}
	}
	// Expectations of MigLayouts no pass looks at any more (deleted) go
	// once they are stale.
	for uid, nodes := range e.m {
		for n, x := range nodes {
			if now.Sub(x.written) > rolloutExpectTTL {
				delete(nodes, n)
			}
		}
		if len(nodes) == 0 {
			delete(e.m, uid)
		}
	}
	if e.m[ml] == nil {
		e.m[ml] = map[string]rolloutExpectation{}
	}
	e.m[ml][node] = rolloutExpectation{gpus: gpus, uid: uid, generation: generation, written: now}
}

// unseen returns the nodes of ml whose last write the cache (cached, by
// node) does not show yet, and when the first of those is forgotten (zero
// with none); it forgets the writes the cache shows, those of nodes it no
// longer has, and those older than rolloutExpectTTL. The cache shows a
// write once it has the object at the write's generation or later (or,
// where the generation is unknown, with the layouts written): a cache
// still at an older write whose layouts equal the last one's (a rule
// reverted) does not. An object of another UID than the one written
// (deleted and made again since) ends the wait: the write is gone with
// the object it was made on.
func (e *rolloutExpectations) unseen(ml types.UID, cached map[string]*v1alpha1.NodeMigLayout, now time.Time) (map[string]bool, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out map[string]bool
	var expires time.Time
	for node, x := range e.m[ml] {
		nml := cached[node]
		shown := x.generation > 0 && nml != nil && nml.Generation >= x.generation ||
			x.generation == 0 && nml != nil && sameLayouts(nml.Spec.GPUs, x.gpus)
		remade := nml != nil && x.uid != "" && nml.UID != x.uid
		if nml == nil || shown || remade || now.Sub(x.written) > rolloutExpectTTL {
			delete(e.m[ml], node)
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[node] = true
		expires = earliest(expires, x.written.Add(rolloutExpectTTL))
	}
	if len(e.m[ml]) == 0 {
		delete(e.m, ml)
	}
	return out, expires
}

// expectUnsure is expect for a write answered with an error that may have
// come after it was applied (writeMayHaveApplied): its generation is
// unknown, and resolve settles it from a live read.
func (e *rolloutExpectations) expectUnsure(ml types.UID, node string, gpus []v1alpha1.GPUSpec, now time.Time) {
	e.expect(ml, node, gpus, "", 0, now)
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.m[ml][node]
	x.unsure = true
	e.m[ml][node] = x
}

// unsure returns the nodes of ml whose last write expectUnsure recorded and
// resolve has not settled, with the GPUs written.
func (e *rolloutExpectations) unsure(ml types.UID) map[string][]v1alpha1.GPUSpec {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out map[string][]v1alpha1.GPUSpec
	for node, x := range e.m[ml] {
		if x.unsure {
			if out == nil {
				out = map[string][]v1alpha1.GPUSpec{}
			}
			out[node] = x.gpus
		}
	}
	return out
}

// resolve settles node's unsure write from a live read of its object
// (nil: gone): the write is expected at the generation read, as the spec
// read, whether the write was applied or not (an earlier write the cache
// does not show yet, which the unsure one replaced in memory, is then still
// waited for); a node whose object is gone is forgotten.
func (e *rolloutExpectations) resolve(ml types.UID, node string, live *v1alpha1.NodeMigLayout) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[ml][node]
	if !ok || !x.unsure {
		return
	}
	if live == nil {
		delete(e.m[ml], node)
		return
	}
	x.unsure, x.gpus, x.uid, x.generation = false, live.Spec.GPUs, live.UID, live.Generation
	e.m[ml][node] = x
}

// resolveLive reads live (reader: around the cache) each node of ml whose
// last write expectUnsure recorded, and settles it (resolve): the pass then
// waits for the cache to show the object as read, the write or not. A
// failed read is returned, and the node stays expected as written (unseen
// until the cache shows that spec, or for rolloutExpectTTL).
func (e *rolloutExpectations) resolveLive(ctx context.Context, reader client.Reader, ml types.UID) error {
	for node, gpus := range e.unsure(ml) {
		var nml v1alpha1.NodeMigLayout
		err := reader.Get(ctx, types.NamespacedName{Name: node}, &nml)
		switch {
		case apierrors.IsNotFound(err):
			e.resolve(ml, node, nil)
		case err != nil:
			return fmt.Errorf("reading NodeMigLayout %s, whose write was answered with an error: %w", node, err)
		default:
			if !sameLayouts(nml.Spec.GPUs, gpus) {
				klog.FromContext(ctx).V(1).Info("A write answered with an error was not applied", "node", node)
			}
			e.resolve(ml, node, &nml)
		}
	}
	return nil
}

// forget drops every expectation of ml (deleted, or no longer bounded).
func (e *rolloutExpectations) forget(ml types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, ml)
}

// writeMayHaveApplied reports whether a write that returned err may have
// been applied all the same: an API server answering a timeout (its
// request timeout filter answers 504 while the write goes on), an internal
// error or no answer at all (a connection reset, the client's deadline).
// A refusal the API server gives before applying anything (a conflict,
// invalid, forbidden, not found, too many requests...) was not. A write
// that may have been applied is expected as written (expectUnsure), so
// that a pass reading a cache that does not show it yet still counts its
// node as changing.
func writeMayHaveApplied(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	switch status.Status().Code {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusMethodNotAllowed, http.StatusConflict, http.StatusRequestEntityTooLarge,
		http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity, http.StatusTooManyRequests:
		return false
	}
	return true
}
