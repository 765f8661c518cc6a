package helm

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// TestServiceMonitors: with metrics.serviceMonitor.enabled the controller
// gets a ServiceMonitor that selects its metrics Service (labels,
// namespace, the "metrics" port) and no other, and the agents a PodMonitor
// that selects the agent pods by their "metrics" container port (every
// agent however many GPU nodes: the Endpoints of a Service, which a
// ServiceMonitor reads, stop at 1000 addresses), each with the labels and
// interval asked for, and the pod's node as label node; the controller-down
// alert reads the job the controller's ServiceMonitor gives (the Service's
// name).
func TestServiceMonitors(t *testing.T) {
	for _, o := range render(t, nil).Objects {
		if o.GetKind() == "ServiceMonitor" || o.GetKind() == "PodMonitor" {
			t.Fatalf("rendered by default: %s %s", o.GetKind(), o.GetName())
		}
	}
	r := render(t, map[string]any{"metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus"}, "interval": "30s"},
		"prometheusRule": map[string]any{"enabled": true},
	}})
	var services []*corev1.Service
	for _, o := range r.Objects {
		if o.GetKind() == "Service" {
			services = append(services, convert[corev1.Service](t, o))
		}
	}
	for component, kind := range map[string]string{"controller": "ServiceMonitor", "agent": "PodMonitor"} {
		sm := find(t, r, kind, "miglayout-"+component)
		if sm.GetLabels()["release"] != "kube-prometheus" || sm.GetNamespace() != "miglayout-system" {
			t.Errorf("%s: labels %v, namespace %q", component, sm.GetLabels(), sm.GetNamespace())
		}
		match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		namespaces, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", monitorEndpoints[kind])
		if len(match) == 0 {
			t.Fatalf("%s: no selector", component)
		}
		if kind == "ServiceMonitor" {
			var selected []string
			for _, svc := range services {
				if labels.SelectorFromSet(match).Matches(labels.Set(svc.Labels)) && svc.Namespace == namespaces[0] {
					selected = append(selected, svc.Name)
					if len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].Name != "metrics" {
						t.Errorf("%s: Service %s has no metrics port: %+v", component, svc.Name, svc.Spec.Ports)
					}
				}
			}
			if diff := cmp.Diff([]string{"miglayout-" + component + "-metrics"}, selected); diff != "" {
				t.Errorf("%s: Services selected (-want +got):\n%s", component, diff)
			}
		} else {
			ds := convert[appsv1.DaemonSet](t, find(t, r, "DaemonSet", "miglayout-agent"))
			if ds.Namespace != namespaces[0] || !labels.SelectorFromSet(match).Matches(labels.Set(ds.Spec.Template.Labels)) {
				t.Errorf("%s: selector %v in %v does not select the agent pods (%v in %s)", component, match, namespaces, ds.Spec.Template.Labels, ds.Namespace)
			}
			named := false
			for _, p := range ds.Spec.Template.Spec.Containers[0].Ports {
				named = named || p.Name == "metrics"
			}
			if !named {
				t.Errorf("%s: the agent container has no port named metrics: %+v", component, ds.Spec.Template.Spec.Containers[0].Ports)
			}
			for _, o := range r.Objects {
				if o.GetKind() == "DaemonSet" && o.GetName() != ds.Name && labels.SelectorFromSet(match).Matches(labels.Set(convert[appsv1.DaemonSet](t, o).Spec.Template.Labels)) {
					t.Errorf("%s: selector %v also selects DaemonSet %s", component, match, o.GetName())
				}
			}
		}
		// The node label the agent's alerts name the node by.
		nodeLabel := map[string]any{"sourceLabels": []any{"__meta_kubernetes_pod_node_name"}, "targetLabel": "node"}
		want := []any{map[string]any{"port": "metrics", "path": "/metrics", "interval": "30s", "relabelings": []any{nodeLabel}}}
		if diff := cmp.Diff(want, endpoints); diff != "" {
			t.Errorf("%s: endpoints (-want +got):\n%s", component, diff)
		}
	}
	rule := find(t, r, "PrometheusRule", "miglayout")
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	exprs := map[string]string{} // by alert
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, x := range rules {
			alert, _ := x.(map[string]any)["alert"].(string)
			exprs[alert], _ = x.(map[string]any)["expr"].(string)
		}
	}
	// The job label of a ServiceMonitor's targets is the Service's name;
	// of a PodMonitor's, the PodMonitor's namespace/name.
	m := regexp.MustCompile(`up\{job="([^"]+)", namespace="([^"]+)"\}`).FindStringSubmatch(exprs["MigLayoutControllerDown"])
	if m == nil || m[1] != "miglayout-controller-metrics" || m[2] != "miglayout-system" {
		t.Errorf("MigLayoutControllerDown reads %q, want up of job miglayout-controller-metrics in miglayout-system", exprs["MigLayoutControllerDown"])
	}
	m = regexp.MustCompile(`up\{job="([^"]+)"\}`).FindStringSubmatch(exprs["MigLayoutAgentMetricsDown"])
	if pm := find(t, r, "PodMonitor", "miglayout-agent"); m == nil || m[1] != pm.GetNamespace()+"/"+pm.GetName() {
		t.Errorf("MigLayoutAgentMetricsDown reads %q, want up of job %s/%s", exprs["MigLayoutAgentMetricsDown"], pm.GetNamespace(), pm.GetName())
	}
}

// monitorEndpoints is where a Prometheus Operator monitor of each kind lists
// its scrape endpoints.
var monitorEndpoints = map[string]string{"ServiceMonitor": "endpoints", "PodMonitor": "podMetricsEndpoints"}
