package auto

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/miglayout/miglayout/test/cluster"
	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestSecureMetricsEndpoint: an agent run with --metrics-secure, with the
// chart's RBAC for it, serves /metrics over HTTPS to a token the API
// server authenticates and allows get on /metrics (the chart's
// metrics-reader ClusterRole), and to nothing else: 401 without a token,
// 403 for a ServiceAccount not bound to that role.
func TestSecureMetricsEndpoint(t *testing.T) {
	ctx := clustertest.Context(t, time.Minute)
	kube := env.Client
	suffix := rand.String(5)
	token := func(name string) string {
		t.Helper()
		sa, err := kube.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + suffix}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = kube.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Delete(context.Background(), sa.Name, metav1.DeleteOptions{})
		})
		tr, err := kube.CoreV1().ServiceAccounts(metav1.NamespaceDefault).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	reader, stranger := token("scraper"), token("stranger")
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scraper-" + suffix},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cluster.ChartRelease + "-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: metav1.NamespaceDefault, Name: "scraper-" + suffix}}}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	// The agent's certificate is self-signed, made as it started.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := "https://" + metricsAddr[slowNode] + "/metrics"
	get := func(ctx context.Context, token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	for _, tc := range []struct {
		who, token string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a ServiceAccount without the metrics-reader role", stranger, http.StatusForbidden},
		{"a ServiceAccount bound to the metrics-reader role", reader, http.StatusOK},
	} {
		// RBAC and the agent's review cache take a moment to agree.
		clustertest.Poll(t, ctx, 30*time.Second, tc.who+" at "+url, func(ctx context.Context) (bool, string) {
			code, body, err := get(ctx, tc.token)
			if err != nil {
				return false, err.Error()
			}
			if code == http.StatusOK && !strings.Contains(body, "\nmiglayout_agent_") {
				return false, "200 without miglayout_agent_ metrics"
			}
			return code == tc.want, fmt.Sprintf("HTTP %d, want %d", code, tc.want)
		})
	}
}
