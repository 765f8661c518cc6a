package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// TestJournalSetAsideToldOnTheNode: an agent that starts on a journal of
// another version sets it aside and says so once, in a Warning event on the
// Node, naming the file it was set aside as; a pass that cannot read the
// Node leaves it to the next. A journal it reads is told of nowhere.
func TestJournalSetAsideToldOnTheNode(t *testing.T) {
	for name, tc := range map[string]struct {
		journal  string
		nodeFail bool
		// withheld: no NodeMigLayout, and NVIDIA's device plugin
		// advertises the GPUs (the agent withholds its devices).
		withheld bool
		want     int
	}{
		"another version":           {journal: `{"version":99,"entries":[]}`, want: 1},
		"corrupt":                   {journal: `{"version":`, want: 1},
		"the Node unreadable first": {journal: `{"version":99}`, nodeFail: true, want: 1},
		"withheld":                  {journal: `{"version":99}`, withheld: true, want: 1},
		"readable":                  {want: 0},
	} {
		t.Run(name, func(t *testing.T) {
			g := newRig(t, "1xA100-SXM4-80GB")
			path := filepath.Join(t.TempDir(), "journal.json")
			if tc.journal != "" {
				if err := os.WriteFile(path, []byte(tc.journal), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			j, err := OpenJournal(path)
			if err != nil {
				t.Fatal(err)
			}
			g.r.Journal = j
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}
			objs := []client.Object{node, &v1alpha1.NodeMigLayout{ObjectMeta: metav1.ObjectMeta{Name: "n1", Generation: 1}}}
			if tc.withheld {
				node.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
				objs = objs[:1]
			}
			failNode := tc.nodeFail
			nodeGets := 0
			c := fake.NewClientBuilder().WithScheme(nmlScheme(t)).WithObjects(objs...).
				WithStatusSubresource(&v1alpha1.NodeMigLayout{}).WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.Node); ok {
					nodeGets++
				}
				if _, ok := obj.(*corev1.Node); ok && failNode && nodeGets == 2 { // the tell's read, not checkNode's
					failNode = false
					return errors.New("the API server is down")
				}
				return cl.Get(ctx, key, obj, opts...)
			}}).Build()
			rec := events.NewFakeRecorder(20)
			r := &NodeReconciler{Client: c, NodeName: "n1", Repartitioner: g.r, Recorder: rec}
			for range 3 {
				// A pass whose Node read fails fails (the first, where
				// the Node is unreadable).
				if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "n1"}}); err != nil {
					t.Fatal(err)
				}
			}
			var told []string
			for len(rec.Events) > 0 {
				if e := <-rec.Events; strings.Contains(e, EventJournalSetAside) {
					told = append(told, e)
				}
			}
			if len(told) != tc.want {
				t.Fatalf("%d JournalSetAside event(s), want %d: %q", len(told), tc.want, told)
			}
			if tc.want > 0 && (!strings.HasPrefix(told[0], corev1.EventTypeWarning) || !strings.Contains(told[0], path+".unreadable")) {
				t.Errorf("event %q: want a Warning naming %s.unreadable", told[0], path)
			}
		})
	}
}
