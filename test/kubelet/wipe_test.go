package kubelet

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"
	testingclock "k8s.io/utils/clock/testing"
)

// wipeRecorder records the wipes a registry asks for.
type wipeRecorder struct {
	mu     sync.Mutex
	wiped  []string
	signal chan struct{}
}

// newTestRegistry returns a registry that wipes after delay on the clock it
// returns, recording its wipes.
func newTestRegistry(t *testing.T, delay time.Duration) (*registry, *wipeRecorder, *testingclock.FakeClock) {
	t.Helper()
	rec := &wipeRecorder{signal: make(chan struct{}, 16)}
	clk := testingclock.NewFakeClock(time.Unix(0, 0))
	r := newRegistry(t.TempDir(), t.Logf)
	r.wipeDelay, r.clock = delay, clk
	r.wipe = func(driver string) {
		rec.mu.Lock()
		rec.wiped = append(rec.wiped, driver)
		rec.mu.Unlock()
		rec.signal <- struct{}{}
	}
	return r, rec, clk
}

func (w *wipeRecorder) got() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.wiped...)
}

// set changes the registry's plugin of driver (nil: none) and lets it sync,
// as a registration, a deregistration or a connection change does.
func set(r *registry, driver string, p *draPlugin) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p == nil {
		delete(r.plugins, driver)
	} else {
		r.plugins[driver] = p
	}
	r.sync(driver)
}

// TestWipeAfterDriverUnusable: a driver's ResourceSlices are wiped once it
// has had no plugin with a live connection for the wipe delay, from the
// first moment it became unusable, and once per outage; not where it became
// usable again before, nor where the delay is negative.
func TestWipeAfterDriverUnusable(t *testing.T) {
	const delay = 4 * time.Second
	tests := map[string]struct {
		delay time.Duration
		steps []*draPlugin // the driver's plugin after each step, a second apart
		want  []string
	}{
		"registered, never connected":           {delay: delay, steps: []*draPlugin{{driver: "d"}}, want: []string{"d"}},
		"connected":                             {delay: delay, steps: []*draPlugin{{driver: "d", connected: true}}},
		"connected after a while":               {delay: delay, steps: []*draPlugin{{driver: "d"}, {driver: "d", connected: true}}},
		"connected just before the delay":       {delay: delay, steps: []*draPlugin{{driver: "d"}, nil, nil, {driver: "d", connected: true}}},
		"deregistered":                          {delay: delay, steps: []*draPlugin{{driver: "d", connected: true}, nil}, want: []string{"d"}},
		"disconnected, then registered again":   {delay: delay, steps: []*draPlugin{{driver: "d"}, nil, {driver: "d", connected: true}}},
		"unusable long after the wipe":          {delay: delay, steps: []*draPlugin{{driver: "d"}, nil, nil, nil, nil, nil, {driver: "d"}, nil}, want: []string{"d"}},
		"usable after the wipe, then not again": {delay: delay, steps: []*draPlugin{nil, nil, nil, nil, nil, {driver: "d", connected: true}, nil}, want: []string{"d", "d"}},
		"never wiping":                          {delay: -1, steps: []*draPlugin{{driver: "d"}, nil}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, rec, clk := newTestRegistry(t, tc.delay)
			for _, p := range tc.steps {
				set(r, "d", p)
				clk.Step(time.Second)
			}
			clk.Step(time.Hour)
			if diff := cmp.Diff(tc.want, rec.got()); diff != "" {
				t.Errorf("wipes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWipeDeadlineIsTheFirst: a driver unusable all along is wiped delay
// after it first became so; the changes that keep it unusable do not push
// the wipe back.
func TestWipeDeadlineIsTheFirst(t *testing.T) {
	const delay = 30 * time.Second
	r, rec, clk := newTestRegistry(t, delay)
	set(r, "d", &draPlugin{driver: "d"})
	clk.Step(delay / 2)
	set(r, "d", nil)
	set(r, "d", &draPlugin{driver: "d"})
	clk.Step(delay/2 - time.Millisecond)
	if got := rec.got(); len(got) != 0 {
		t.Fatalf("wiped %v before the delay", got)
	}
	clk.Step(time.Millisecond)
	if diff := cmp.Diff([]string{"d"}, rec.got()); diff != "" {
		t.Errorf("wipes at the first deadline (-want +got):\n%s", diff)
	}
}

// TestConnectionEndsAndBegins: the connection monitor makes the driver
// unusable at a connection's end and usable at its begin, so that a plugin
// that comes back before the wipe delay keeps its slices; the connection of
// a plugin no longer registered does not count.
func TestConnectionEndsAndBegins(t *testing.T) {
	const delay = 30 * time.Second
	r, rec, clk := newTestRegistry(t, delay)
	conn, err := grpc.NewClient("unix://"+filepath.Join(t.TempDir(), "none.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	p := &draPlugin{driver: "d", conn: conn}
	m := &connMonitor{r: r, p: p}
	set(r, "d", p)
	m.HandleConn(context.Background(), &stats.ConnBegin{})
	m.HandleConn(context.Background(), &stats.ConnEnd{})
	clk.Step(delay / 2)
	m.HandleConn(context.Background(), &stats.ConnBegin{})
	clk.Step(time.Hour)
	if got := rec.got(); len(got) != 0 {
		t.Fatalf("wiped %v though the connection came back within the delay", got)
	}

	// A replaced plugin's connection ending changes nothing.
	set(r, "d", &draPlugin{driver: "d", connected: true})
	m.HandleConn(context.Background(), &stats.ConnEnd{})
	clk.Step(time.Hour)
	if got := rec.got(); len(got) != 0 {
		t.Fatalf("wiped %v after the end of a replaced plugin's connection", got)
	}

	set(r, "d", p)
	m.HandleConn(context.Background(), &stats.ConnEnd{})
	clk.Step(delay)
	if diff := cmp.Diff([]string{"d"}, rec.got()); diff != "" {
		t.Errorf("wipes after the connection ended for good (-want +got):\n%s", diff)
	}
}
