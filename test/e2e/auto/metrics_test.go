package auto

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/miglayout/miglayout/test/cluster/clustertest"
)

// TestMetricsEndpoints scrapes the controller's and an agent's /metrics after
// TestAutoRepartitionsWholeGPUs has made them plan and repartition: the
// miglayout metrics are served by the running processes, not only registered
// (the planner's histogram has timed a plan: a plain histogram is served with
// a count of 0 from its registration on).
func TestMetricsEndpoints(t *testing.T) {
	ctx := clustertest.Context(t, time.Minute)
	want := map[string][]string{
		"controller": {"miglayout_pending_pods", "miglayout_planner_duration_seconds_count [1-9]", "miglayout_controller_nodes"},
		nodeA:        {"miglayout_agent_repartitions_total", "miglayout_agent_phase_duration_seconds_bucket", "miglayout_agent_mig_devices"},
	}
	for who, names := range want {
		url := "http://" + metricsAddr[who] + "/metrics"
		clustertest.Poll(t, ctx, 30*time.Second, who+" metrics at "+url, func(ctx context.Context) (bool, string) {
			body, err := scrape(ctx, url)
			if err != nil {
				return false, err.Error()
			}
			var missing []string
			for _, n := range names {
				if !regexp.MustCompile(`\n` + n).MatchString(body) {
					missing = append(missing, n)
				}
			}
			return len(missing) == 0, fmt.Sprintf("missing %v", missing)
		})
	}
}

func scrape(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(b), nil
}
