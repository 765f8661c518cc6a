package main

import (
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/miglayout/miglayout/pkg/plugin"
)

// preparedSet adapts the kubelet plugin to agent.Prepared.
type preparedSet struct{ p *plugin.Plugin }

func (s preparedSet) PreparedDevices() sets.Set[string] {
	out := sets.New[string]()
	for name := range s.p.PreparedDevices() {
		out.Insert(name)
	}
	return out
}
