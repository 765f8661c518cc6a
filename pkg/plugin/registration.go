package plugin

import (
	"errors"
	"fmt"
	"net/http"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// ErrNotRegistered is what KubeletRegistration reports until the kubelet
// has registered the plugin.
var ErrNotRegistered = errors.New("the kubelet has not registered the DRA plugin yet")

// KubeletRegistration is a readiness check (a controller-runtime
// healthz.Checker, for the agent's /readyz) that passes once the kubelet
// has registered the plugin: its plugin watcher found the registration
// socket in the registrar directory, called GetInfo and confirmed with
// NotifyRegistrationStatus (k8s.io/kubelet/pkg/apis/pluginregistration/v1).
//
// status is the kubeletplugin helper's RegistrationStatus: nil until the
// kubelet's first NotifyRegistrationStatus, then its last one. The check
// fails with ErrNotRegistered while it is nil, which is where it stays when
// the agent's registrar directory is not the one the kubelet watches (a
// distribution that keeps the kubelet's state elsewhere): the node's
// devices would be published and allocated, and every pod given one would
// fail to start, its claim never prepared. It fails with the kubelet's
// error where the kubelet refused the plugin (a DRA API version it does not
// speak).
func KubeletRegistration(status func() *registerapi.RegistrationStatus) func(*http.Request) error {
	return func(*http.Request) error {
		st := status()
		switch {
		case st == nil:
			return ErrNotRegistered
		case !st.PluginRegistered:
			return fmt.Errorf("the kubelet refused to register the DRA plugin: %s", st.Error)
		}
		return nil
	}
}
