package agent

import (
	"context"
	"testing"
)

// BenchmarkInUse: what a pass reads to know which devices run processes,
// on a node of 8 A100s cut into seven 1g.10gb each (56 MIG devices).
// Reported per call of inUse (a pass makes two or three).
func BenchmarkInUse(b *testing.B) {
	g := newRig(b, "8xA100-SXM4-80GB")
	for idx := range 8 {
		g.setup(b, idx, "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6")
	}
	ctx := context.Background()
	obs, _, err := g.r.observe(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.r.inUse(ctx, obs, false); err != nil {
			b.Fatal(err)
		}
	}
}
