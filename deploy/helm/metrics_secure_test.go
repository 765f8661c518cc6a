package helm

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestSecureMetrics: metrics.secure turns on --metrics-secure in both
// components, grants each the TokenReviews and SubjectAccessReviews the
// check needs, renders the metrics-reader ClusterRole and a scraper
// ServiceAccount bound to it alone, whose token the ServiceMonitors scrape
// over HTTPS with, and drops the prometheus.io annotations (that scraping
// sends no token). Off (the default), none of it is rendered.
func TestSecureMetrics(t *testing.T) {
	for name, secure := range map[string]bool{"off": false, "on": true} {
		t.Run(name, func(t *testing.T) {
			r := render(t, map[string]any{"metrics": map[string]any{"secure": secure, "serviceMonitor": map[string]any{"enabled": true}}})
			specs := map[string]corev1.PodTemplateSpec{
				"controller": convert[appsv1.Deployment](t, find(t, r, "Deployment", "miglayout-controller")).Spec.Template,
				"agent":      convert[appsv1.DaemonSet](t, find(t, r, "DaemonSet", "miglayout-agent")).Spec.Template,
			}
			for component, tmpl := range specs {
				if got := slices.Contains(tmpl.Spec.Containers[0].Args, "--metrics-secure"); got != secure {
					t.Errorf("%s: --metrics-secure passed: %t, want %t", component, got, secure)
				}
				if got := tmpl.Annotations["prometheus.io/scrape"] == "true"; got == secure {
					t.Errorf("%s: prometheus.io/scrape annotation: %t, want %t (%v)", component, got, !secure, tmpl.Annotations)
				}
				role := convert[rbacv1.ClusterRole](t, find(t, r, "ClusterRole", "miglayout-"+component))
				var reviews []string
				for _, rule := range role.Rules {
					if slices.Contains(rule.Verbs, "create") && (slices.Contains(rule.Resources, "tokenreviews") || slices.Contains(rule.Resources, "subjectaccessreviews")) {
						reviews = append(reviews, rule.Resources...)
					}
				}
				var want []string
				if secure {
					want = []string{"tokenreviews", "subjectaccessreviews"}
				}
				if diff := cmp.Diff(want, reviews); diff != "" {
					t.Errorf("%s: review grants (-want +got):\n%s", component, diff)
				}
				kind := map[string]string{"controller": "ServiceMonitor", "agent": "PodMonitor"}[component]
				sm := find(t, r, kind, "miglayout-"+component)
				endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", monitorEndpoints[kind])
				ep, _ := endpoints[0].(map[string]any)
				secret, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name")
				if got := ep["scheme"] == "https" && secret == "miglayout-metrics-scraper"; got != secure {
					t.Errorf("%s: %s scrapes over HTTPS with the scraper's token: %t, want %t (%v)", component, kind, got, secure, ep)
				}
			}
			var reader *rbacv1.ClusterRole
			for _, o := range r.Objects {
				if o.GetKind() == "ClusterRole" && o.GetName() == "miglayout-metrics-reader" {
					reader = convert[rbacv1.ClusterRole](t, o)
				}
			}
			if (reader != nil) != secure {
				t.Fatalf("metrics-reader ClusterRole rendered: %t, want %t", reader != nil, secure)
			}
			if reader == nil {
				return
			}
			want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
			if diff := cmp.Diff(want, reader.Rules); diff != "" {
				t.Errorf("metrics-reader rules (-want +got):\n%s", diff)
			}
			// The scraper's token, of a ServiceAccount bound to the reader
			// role and to nothing else.
			token := convert[corev1.Secret](t, find(t, r, "Secret", "miglayout-metrics-scraper"))
			if token.Type != corev1.SecretTypeServiceAccountToken || token.Annotations[corev1.ServiceAccountNameKey] != "miglayout-metrics-scraper" {
				t.Errorf("scraper token Secret: type %q, annotations %v", token.Type, token.Annotations)
			}
			find(t, r, "ServiceAccount", "miglayout-metrics-scraper")
			var bound []string
			for _, o := range r.Objects {
				if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
					continue
				}
				b := convert[rbacv1.ClusterRoleBinding](t, o)
				for _, s := range b.Subjects {
					if s.Name == "miglayout-metrics-scraper" {
						bound = append(bound, b.RoleRef.Name)
					}
				}
			}
			if diff := cmp.Diff([]string{"miglayout-metrics-reader"}, bound); diff != "" {
				t.Errorf("roles the scraper is bound to (-want +got):\n%s", diff)
			}
		})
	}
}
