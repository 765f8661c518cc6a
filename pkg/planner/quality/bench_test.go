package quality

import (
	"math"
	"testing"
)

// BenchmarkQuality runs QuickConfig and reports the ratios per
// scenario and mix: gap-closed (share of the large-claim gap between
// first-fit and the best no-migration bound that miglayout closes; goal
// ≥ 0.5), served-loss and served-queue (miglayout's served claims over
// first-fit's; goal ≥ 1), p95-large (miglayout's p95 wait of large claims
// over first-fit's in the queue model; goal ≤ 0.5). One op is one full
// comparison (seconds); run with -benchtime 1x.
func BenchmarkQuality(b *testing.B) {
	cfg := QuickConfig()
	var rep Report
	for b.Loop() {
		var err error
		if rep, err = Run(cfg); err != nil {
			b.Fatal(err)
		}
	}
	for _, r := range rep.Ratios {
		suffix := "/" + r.Scenario + "/" + r.Mix
		report := func(v float64, unit string) {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				b.ReportMetric(v, unit+suffix)
			}
		}
		report(r.GapClosed, "gap-closed")
		report(r.ServedRatioLoss, "served-loss")
		if r.HasQueue {
			report(r.ServedRatioQueue, "served-queue")
			report(r.P95LargeRatio, "p95-large")
		}
	}
	b.Log("\n" + rep.String())
}
