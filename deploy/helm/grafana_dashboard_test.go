package helm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// grafanaDashboard is the part of a Grafana dashboard the test reads.
type grafanaDashboard struct {
	UID        string
	Title      string
	Templating struct {
		List []struct{ Type, Name, Query string }
	}
	Panels []struct {
		Type, Title, Description string
		Datasource               struct{ Type, UID string }
		GridPos                  struct{ H, W, X, Y int }
		Targets                  []struct {
			Expr, LegendFormat string
			Datasource         struct{ UID string }
		}
	}
}

// TestGrafanaDashboard: off by default; on, a ConfigMap carries the
// dashboard file unchanged, with the label the sidecar selects by, in the
// namespace asked for; the dashboard has a Prometheus data-source variable
// every panel reads through, panels that do not overlap, each titled and
// described, and queries that read only metrics the components register,
// with the labels they carry (checkPromQL, as the alerts are checked).
func TestGrafanaDashboard(t *testing.T) {
	for _, o := range render(t, nil).Objects {
		if o.GetKind() == "ConfigMap" && o.GetName() == "miglayout-dashboard" {
			t.Fatal("the dashboard is rendered by default")
		}
	}
	r := render(t, map[string]any{"metrics": map[string]any{"grafanaDashboard": map[string]any{
		"enabled": true, "label": "grafana_dashboard", "labelValue": "yes", "namespace": "monitoring"}}})
	cm := convert[corev1.ConfigMap](t, find(t, r, "ConfigMap", "miglayout-dashboard"))
	if cm.Namespace != "monitoring" || cm.Labels["grafana_dashboard"] != "yes" {
		t.Errorf("ConfigMap in %q with labels %v, want monitoring and grafana_dashboard=yes", cm.Namespace, cm.Labels)
	}
	file, err := os.ReadFile(filepath.Join(ChartDir(), "files", "dashboards", "miglayout.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fromFile, fromChart any
	if err := json.Unmarshal(file, &fromFile); err != nil {
		t.Fatalf("the dashboard file: %v", err)
	}
	if err := json.Unmarshal([]byte(cm.Data["miglayout.json"]), &fromChart); err != nil {
		t.Fatalf("the ConfigMap's dashboard: %v", err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(file, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q", d.UID, d.Title)
	}
	if len(d.Templating.List) != 1 || d.Templating.List[0].Type != "datasource" || d.Templating.List[0].Query != "prometheus" {
		t.Fatalf("templating %+v, want one Prometheus data-source variable", d.Templating.List)
	}
	source := "${" + d.Templating.List[0].Name + "}"
	labels, nodeStates := registeredMetrics(t), controllerNodeStates(t)
	read := map[string]bool{}
	type rect struct{ x, y, w, h int }
	var placed []rect
	queries := 0
	for _, p := range d.Panels {
		g := rect{p.GridPos.X, p.GridPos.Y, p.GridPos.W, p.GridPos.H}
		if g.w <= 0 || g.h <= 0 || g.x < 0 || g.x+g.w > 24 {
			t.Errorf("panel %q: grid position %+v outside the 24 columns", p.Title, p.GridPos)
		}
		for _, o := range placed {
			if g.x < o.x+o.w && o.x < g.x+g.w && g.y < o.y+o.h && o.y < g.y+g.h {
				t.Errorf("panel %q at %+v overlaps another at %+v", p.Title, g, o)
			}
		}
		placed = append(placed, g)
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || p.Description == "" || p.Datasource.UID != source || len(p.Targets) == 0 {
			t.Errorf("panel %q: description %q, data source %q, %d queries", p.Title, p.Description, p.Datasource.UID, len(p.Targets))
		}
		for _, q := range p.Targets {
			if q.Datasource.UID != source {
				t.Errorf("panel %q: a query reads data source %q, not %s", p.Title, q.Datasource.UID, source)
			}
			checkPromQL(t, "panel "+p.Title, q.Expr, labels, nodeStates)
			for name := range labels {
				if regexp.MustCompile(`\b` + name + `(_bucket|_sum|_count)?\b`).MatchString(q.Expr) {
					read[name] = true
				}
			}
			queries++
		}
	}
	if queries < 10 {
		t.Errorf("%d queries", queries)
	}
	// Every metric is on the dashboard.
	for name := range labels {
		if !read[name] {
			t.Errorf("no panel reads %s", name)
		}
	}
	if !reflect.DeepEqual(fromFile, fromChart) {
		t.Error("the ConfigMap's dashboard differs from files/dashboards/miglayout.json")
	}
}
