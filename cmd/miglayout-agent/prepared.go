package main

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/miglayout/miglayout/pkg/agent"
	"github.com/miglayout/miglayout/pkg/plugin"
)

// preparedSet adapts the kubelet plugin to agent.Prepared and
// agent.PreparedClaims.
type preparedSet struct{ p *plugin.Plugin }

func (s preparedSet) PreparedDevices() sets.Set[string] {
	out := sets.New[string]()
	for name := range s.p.PreparedDevices() {
		out.Insert(name)
	}
	return out
}

func (s preparedSet) PreparedUUIDs() sets.Set[string] { return s.p.PreparedUUIDs() }

func (s preparedSet) PreparedClaimRefs() []kubeletplugin.NamespacedObject {
	claims := s.p.PreparedClaims()
	out := make([]kubeletplugin.NamespacedObject, len(claims))
	for i, c := range claims {
		out[i] = kubeletplugin.NamespacedObject{UID: c.UID, NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}}
	}
	return out
}

func (s preparedSet) ReleaseOrphan(ctx context.Context, uid types.UID, stillGone func(context.Context) (bool, error)) ([]string, bool, error) {
	pc, released, err := s.p.ReleaseOrphan(ctx, uid, stillGone)
	var devices []string
	for _, d := range pc.Devices {
		devices = append(devices, d.Device)
	}
	return devices, released, err
}

func (s preparedSet) RefreshRecreated(ctx context.Context) map[types.UID]error {
	return s.p.RefreshRecreated(ctx)
}

// The agent relies on the plugin holding, by UUID too, the devices it
// prepared (agent.PreparedUUIDs).
var (
	_ agent.Prepared           = preparedSet{}
	_ agent.PreparedUUIDs      = preparedSet{}
	_ agent.RecreatedRefresher = preparedSet{}
)
