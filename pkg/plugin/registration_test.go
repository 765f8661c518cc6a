package plugin

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// TestKubeletRegistration: the readiness check fails until the kubelet
// registers the plugin through its registration socket (GetInfo, then
// NotifyRegistrationStatus, as the kubelet's plugin watcher calls them),
// says why where the kubelet refused it, and passes once it is registered.
func TestKubeletRegistration(t *testing.T) {
	e := newEnv(t)
	p := e.plugin("")
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}})
	h, registry := startHelper(t, t.Context(), p, kube)
	ready := KubeletRegistration(h.RegistrationStatus)
	if err := ready(nil); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("before the kubelet registered the plugin: readiness %v, want %v", err, ErrNotRegistered)
	}

	socks, err := filepath.Glob(filepath.Join(registry, "*-reg.sock"))
	if err != nil || len(socks) != 1 {
		t.Fatalf("registration sockets %v (%v), want one", socks, err)
	}
	conn, err := grpc.NewClient("unix://"+socks[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kubelet := registerapi.NewRegistrationClient(conn)
	info, err := kubelet.GetInfo(t.Context(), &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.DRAPlugin {
		t.Fatalf("plugin type %q, want %q", info.Type, registerapi.DRAPlugin)
	}
	if err := ready(nil); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("after GetInfo alone: readiness %v, want %v", err, ErrNotRegistered)
	}

	const refusal = "no supported DRA API version"
	// The helper answers a refusal with an error of its own.
	_, _ = kubelet.NotifyRegistrationStatus(t.Context(), &registerapi.RegistrationStatus{PluginRegistered: false, Error: refusal})
	if err := ready(nil); err == nil || !strings.Contains(err.Error(), refusal) {
		t.Errorf("after the kubelet refused the plugin: readiness %v, want the kubelet's error %q", err, refusal)
	}

	if _, err := kubelet.NotifyRegistrationStatus(t.Context(), &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if err := ready(nil); err != nil {
		t.Errorf("after the kubelet registered the plugin: readiness %v, want ready", err)
	}
}
