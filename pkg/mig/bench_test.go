package mig

import "testing"

// BenchmarkFit measures one Fit on an A100 with a full current layout, the
// shape of work a Static reconcile does per GPU.
func BenchmarkFit(b *testing.B) {
	m := mustModel(b, "A100-SXM4-80GB")
	cur := MustParseLayout("1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6")
	req := FitRequest{Want: map[string]int{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}, Current: cur, Pinned: MustParseLayout("1g.10gb@3"), AllowMoves: true}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Fit(req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMaximalLayouts(b *testing.B) {
	m := mustModel(b, "A100-SXM4-80GB")
	b.ReportAllocs()
	for b.Loop() {
		m.MaximalLayouts()
	}
}
