package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/miglayout/miglayout/api/v1alpha1"
)

// env is what the commands need from outside: a client of the cluster (made
// on first use from the kubeconfig flags, or given by tests) and stdin.
type env struct {
	kubeconfig string
	// overrides are the kubeconfig overrides of kubectl's flags
	// (--context, --cluster, --user, --server, --token, --as and the
	// like).
	overrides clientcmd.ConfigOverrides
	timeout   time.Duration
	// newClient, when set, replaces the kubeconfig (tests).
	newClient func() (client.Client, error)
	stdin     io.Reader
	// now, when set, replaces the wall clock (tests).
	now func() time.Time
}

// clock is the time now.
func (e *env) clock() time.Time {
	if e.now != nil {
		return e.now()
	}
	return time.Now()
}

func (e *env) bindFlags(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&e.kubeconfig, "kubeconfig", "", "path of the kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	// kubectl's connection flags, as client-go names them; the commands
	// read every namespace (no --namespace), and --request-timeout is a
	// duration of its own.
	names := clientcmd.RecommendedConfigOverrideFlags("")
	names.Timeout = clientcmd.FlagInfo{}
	names.ContextOverrideFlags.Namespace = clientcmd.FlagInfo{}
	clientcmd.BindOverrideFlags(&e.overrides, cmd.PersistentFlags(), names)
	cmd.PersistentFlags().DurationVar(&e.timeout, "request-timeout", 30*time.Second, "timeout of each request to the API server (0: none)")
}

// scheme knows the built-in types and the miglayout API.
func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// restConfig is the connection the kubeconfig and the flags give.
func (e *env) restConfig() (*rest.Config, error) {
	if e.timeout < 0 {
		return nil, fmt.Errorf("--request-timeout=%s: want 0 (none) or more", e.timeout)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = e.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &e.overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	cfg.Timeout = e.timeout
	return cfg, nil
}

// client returns a client of the cluster of the kubeconfig.
func (e *env) client() (client.Client, error) {
	if e.newClient != nil {
		return e.newClient()
	}
	cfg, err := e.restConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		return nil, fmt.Errorf("creating a client for %s: %w", cfg.Host, err)
	}
	return c, nil
}

// document is one YAML document of a manifest file.
type document struct {
	// Source is the file name ("-" for stdin), Index the 1-based position of
	// the document in it.
	Source string
	Index  int
	Object map[string]any
}

func (d *document) kind() string { s, _ := d.Object["kind"].(string); return s }
func (d *document) apiVersion() string {
	s, _ := d.Object["apiVersion"].(string)
	return s
}
func (d *document) name() string {
	if m, ok := d.Object["metadata"].(map[string]any); ok {
		if s, ok := m["name"].(string); ok {
			return s
		}
	}
	return ""
}
func (d *document) namespace() string {
	if m, ok := d.Object["metadata"].(map[string]any); ok {
		if s, ok := m["namespace"].(string); ok {
			return s
		}
	}
	return ""
}

// describe names the document for people: "gpu-pod.yaml: Pod vectoradd".
func (d *document) describe() string {
	name := d.name()
	if name == "" {
		name = fmt.Sprintf("(document %d)", d.Index)
	}
	return fmt.Sprintf("%s: %s %s", d.Source, d.kind(), name)
}

// readManifests reads the YAML (or JSON) documents of each file, "-" being
// stdin. A List's items are documents of their own. Empty documents are
// skipped.
func (e *env) readManifests(files []string) ([]*document, error) {
	if len(files) == 0 {
		return nil, errors.New("no manifests: give them with -f FILE (- for standard input)")
	}
	var out []*document
	for _, f := range files {
		var data []byte
		var err error
		if f == "-" {
			in := e.stdin
			if in == nil {
				in = os.Stdin
			}
			data, err = io.ReadAll(in)
		} else {
			data, err = os.ReadFile(f)
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for i := 1; ; i++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("%s: document %d: %w", f, i, err)
			}
			// Whole numbers are int64, as in the API machinery's
			// unstructured objects (utiljson.Unmarshal): a float64
			// would round those above 2^53 in what convert writes back.
			var obj map[string]any
			if len(raw) > 0 && string(raw) != "null" {
				if err := utiljson.Unmarshal(raw, &obj); err != nil {
					return nil, fmt.Errorf("%s: document %d: %w", f, i, err)
				}
			}
			if len(obj) == 0 {
				i--
				continue
			}
			// A List (kind List, or PodList and the like as kubectl get
			// writes them) gives its items; an object of another kind
			// whose name ends in List (a custom resource) has no items.
			if kind, _ := obj["kind"].(string); kind == "List" || strings.HasSuffix(kind, "List") && isList(obj["items"]) {
				items, _ := obj["items"].([]any)
				for _, it := range items {
					if m, ok := it.(map[string]any); ok {
						out = append(out, &document{Source: f, Index: i, Object: m})
					}
				}
				continue
			}
			out = append(out, &document{Source: f, Index: i, Object: obj})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no objects in %s", strings.Join(files, ", "))
	}
	return out, nil
}

// Helpers over unstructured maps.

// isList reports whether v, a List's items, is a list (empty or not).
func isList(v any) bool {
	_, ok := v.([]any)
	return ok
}

// mapAt is the map at keys under m, or nil. A key "field[i]" steps into
// item i of the list at field (a path a walk of nested pod templates makes,
// nestedPodSpecs; it reads as the field's path in messages, pathOf).
func mapAt(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		var v any = m[k]
		if field, i, ok := listStep(k); ok {
			l, _ := m[field].([]any)
			if i >= len(l) {
				return nil
			}
			v = l[i]
		}
		next, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return m
}

// listStep splits a key "field[i]" into field and i.
func listStep(k string) (string, int, bool) {
	field, rest, ok := strings.Cut(k, "[")
	if !ok || field == "" || !strings.HasSuffix(rest, "]") {
		return "", 0, false
	}
	i, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
	if err != nil || i < 0 {
		return "", 0, false
	}
	return field, i, true
}

// maxPodSpecDepth bounds how deep nestedPodSpecs looks for pod templates
// (a JobSet's lie 6 keys down: spec.replicatedJobs[i].template.spec.template.spec).
const maxPodSpecDepth = 12

// nestedPodSpecs returns the paths (keys for mapAt) of the pod specs within
// obj, an object of a kind podSpecPath does not know (a JobSet, a
// LeaderWorkerSet, a training operator's job, a custom resource of a
// built-in kind's name): every map whose "containers" is a list of maps
// with a name, in document order (map keys sorted). Pod specs within a pod
// spec are not looked for.
func nestedPodSpecs(obj map[string]any) [][]string {
	var out [][]string
	var walk func(m map[string]any, keys []string)
	walk = func(m map[string]any, keys []string) {
		if isPodSpec(m) && len(keys) > 0 {
			out = append(out, slices.Clone(keys))
			return
		}
		if len(keys) >= maxPodSpecDepth {
			return
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if k == "metadata" || k == "status" {
				continue
			}
			switch v := m[k].(type) {
			case map[string]any:
				walk(v, append(keys, k))
			case []any:
				for i, item := range v {
					if im, ok := item.(map[string]any); ok {
						walk(im, append(keys, fmt.Sprintf("%s[%d]", k, i)))
					}
				}
			}
		}
	}
	walk(obj, nil)
	return out
}

// isPodSpec reports whether m looks like a pod spec: its "containers" is a
// non-empty list of maps, each with a name.
func isPodSpec(m map[string]any) bool {
	l, ok := m["containers"].([]any)
	if !ok || len(l) == 0 {
		return false
	}
	for _, c := range l {
		cm, ok := c.(map[string]any)
		if !ok {
			return false
		}
		if n, _ := cm["name"].(string); n == "" {
			return false
		}
	}
	return true
}

func listAt(m map[string]any, keys ...string) []any {
	if len(keys) == 0 {
		return nil
	}
	parent := mapAt(m, keys[:len(keys)-1]...)
	if parent == nil {
		return nil
	}
	l, _ := parent[keys[len(keys)-1]].([]any)
	return l
}

func stringAt(m map[string]any, keys ...string) string {
	if len(keys) == 0 {
		return ""
	}
	parent := mapAt(m, keys[:len(keys)-1]...)
	if parent == nil {
		return ""
	}
	s, _ := parent[keys[len(keys)-1]].(string)
	return s
}

// podSpecPaths are where the built-in workloads keep their pod spec, by
// kind, with their API group.
var podSpecPaths = map[string]struct {
	group string
	path  []string
}{
	"Pod":                   {"", []string{"spec"}},
	"PodTemplate":           {"", []string{"template", "spec"}},
	"ReplicationController": {"", []string{"spec", "template", "spec"}},
	"Deployment":            {"apps", []string{"spec", "template", "spec"}},
	"StatefulSet":           {"apps", []string{"spec", "template", "spec"}},
	"DaemonSet":             {"apps", []string{"spec", "template", "spec"}},
	"ReplicaSet":            {"apps", []string{"spec", "template", "spec"}},
	"Job":                   {"batch", []string{"spec", "template", "spec"}},
	"CronJob":               {"batch", []string{"spec", "jobTemplate", "spec", "template", "spec"}},
}

// podSpecPath is where a built-in workload keeps its pod spec, or nil for
// a kind without one or of another API group (a custom resource of the
// same kind name, a Volcano Job). A document without apiVersion is taken
// for the built-in kind.
func podSpecPath(d *document) []string {
	w, ok := podSpecPaths[d.kind()]
	if !ok {
		return nil
	}
	if group, ok := d.group(); ok && group != w.group {
		return nil
	}
	return w.path
}

// group is the API group of d's apiVersion ("" for the core group, "v1"),
// and false where d has no apiVersion.
func (d *document) group() (string, bool) {
	version, _ := d.Object["apiVersion"].(string)
	if version == "" {
		return "", false
	}
	group, _, grouped := strings.Cut(version, "/")
	if !grouped {
		return "", true
	}
	return group, true
}
