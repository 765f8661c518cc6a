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

// BenchmarkHoldTogether16GPUs is the search for spares of six profiles on a
// node of 16 A100s that the search cannot cut short: the bound it gives up
// at (holdTogetherSteps), which the controller pays once per distinct node
// and spec (HoldTogether keeps answers).
func BenchmarkHoldTogether16GPUs(b *testing.B) {
	a100, err := DefaultCatalog().Model("A100-SXM4-80GB")
	if err != nil {
		b.Fatal(err)
	}
	models := repeatModel(a100, 16)
	want := map[string]int{"1g.10gb": 19, "1g.10gb+me": 6, "1g.20gb": 8, "2g.20gb": 2, "3g.40gb": 1, "4g.40gb": 13, "7g.80gb": 2}
	b.ReportAllocs()
	for b.Loop() {
		holdTogether(models, want)
	}
}
