package kubelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/clock"
)

// draPlugin is one registered DRA kubelet plugin.
type draPlugin struct {
	driver       string
	endpoint     string
	conn         *grpc.ClientConn
	client       drapb.DRAPluginClient
	registeredAt time.Time
	socketID     socketID // the registration socket it came from
	regPath      string   // that socket's path
	connected    bool     // its gRPC connection is up (registry.mu)
}

// socketID tells a re-created registration socket from the old one.
type socketID struct {
	ino   uint64
	mtime time.Time
}

// registry watches the registrar directory the way the kubelet's plugin
// watcher does: for each new "*-reg.sock" socket it calls GetInfo, connects
// to the DRA endpoint the plugin names, and calls NotifyRegistrationStatus.
// A socket that is re-created (the agent restarted) is registered again; one
// that is removed deregisters its plugin.
//
// Like the kubelet's DRA plugin manager it follows each plugin's gRPC
// connection (a stats handler sees it begin and end, and asks gRPC to
// connect again after each end), and once a driver has had no registered
// plugin with a live connection for wipeDelay it calls wipe for that driver,
// unless the driver became usable again before.
type registry struct {
	dir       string
	log       func(format string, args ...any)
	wipeDelay time.Duration          // negative: never wipe
	wipe      func(driver string)    // deletes the driver's ResourceSlices of the node
	pending   map[string]clock.Timer // driver → its wipe while it is unusable (nil once done)
	// onRegistered, when set, is called after each registration, with
	// whether the plugin serves device health (DRAResourceHealth v1).
	onRegistered func(p *draPlugin, health bool)
	clock        clock.WithDelayedExecution

	mu      sync.Mutex
	cond    *sync.Cond
	plugins map[string]*draPlugin // by driver name
	seen    map[string]socketID   // registration socket path → the socket last registered
	failed  map[string]time.Time  // registration socket path → last failure (retried after a second)
}

func newRegistry(dir string, log func(string, ...any)) *registry {
	r := &registry{dir: dir, log: log, plugins: map[string]*draPlugin{}, seen: map[string]socketID{}, failed: map[string]time.Time{},
		wipeDelay: -1, pending: map[string]clock.Timer{}, clock: clock.RealClock{}}
	r.cond = sync.NewCond(&r.mu)
	return r
}

func (r *registry) run(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		r.scan(ctx)
		select {
		case <-ctx.Done():
			r.mu.Lock()
			for _, t := range r.pending {
				if t != nil {
					t.Stop()
				}
			}
			r.pending = map[string]clock.Timer{}
			plugins := r.plugins
			r.plugins = map[string]*draPlugin{}
			r.cond.Broadcast()
			r.mu.Unlock()
			for _, p := range plugins {
				_ = p.conn.Close()
			}
			return
		case <-tick.C:
		}
	}
}

func (r *registry) scan(ctx context.Context) {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return
	}
	r.deregisterRemoved(entries)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), "-reg.sock") || e.Type()&os.ModeSocket == 0 {
			continue
		}
		path := filepath.Join(r.dir, e.Name())
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			continue
		}
		id := socketID{ino: st.Ino, mtime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec)}
		r.mu.Lock()
		known := r.seen[path] == id
		last := r.failed[path]
		r.mu.Unlock()
		if known || time.Since(last) < time.Second {
			continue
		}
		if err := r.register(ctx, path, id); err != nil {
			r.log("registering plugin at %s: %v", path, err)
			r.mu.Lock()
			r.failed[path] = time.Now()
			r.mu.Unlock()
		}
	}
}

func (r *registry) register(ctx context.Context, path string, id socketID) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	regConn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer regConn.Close()
	reg := registerapi.NewRegistrationClient(regConn)
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		return fmt.Errorf("GetInfo: %w", err)
	}
	if info.Type != registerapi.DRAPlugin {
		return fmt.Errorf("plugin type %q is not %q", info.Type, registerapi.DRAPlugin)
	}
	notify := func(regErr error) error {
		st := &registerapi.RegistrationStatus{PluginRegistered: regErr == nil}
		if regErr != nil {
			st.Error = regErr.Error()
		}
		if _, err := reg.NotifyRegistrationStatus(ctx, st); err != nil {
			return fmt.Errorf("NotifyRegistrationStatus: %w", err)
		}
		return regErr
	}
	if !slices.Contains(info.SupportedVersions, drapb.DRAPluginService) {
		return notify(fmt.Errorf("plugin %s supports %v, the stand-in kubelet speaks %s", info.Name, info.SupportedVersions, drapb.DRAPluginService))
	}
	p := &draPlugin{driver: info.Name, endpoint: info.Endpoint, socketID: id, regPath: path}
	conn, err := grpc.NewClient("unix://"+info.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(&connMonitor{r: r, p: p}))
	if err != nil {
		return notify(fmt.Errorf("connecting to %s: %w", info.Endpoint, err))
	}
	if err := notify(nil); err != nil {
		conn.Close()
		return err
	}
	r.mu.Lock()
	old := r.plugins[p.driver]
	p.conn, p.client, p.registeredAt = conn, drapb.NewDRAPluginClient(conn), time.Now()
	r.plugins[p.driver] = p
	r.seen[path] = id
	delete(r.failed, path)
	r.sync(p.driver)
	r.cond.Broadcast()
	r.mu.Unlock()
	if old != nil {
		_ = old.conn.Close()
	}
	// gRPC connects on the first call; connect now, as the kubelet does, to
	// learn early whether the plugin is reachable.
	conn.Connect()
	r.log("registered DRA plugin %s at %s", p.driver, p.endpoint)
	if r.onRegistered != nil {
		r.onRegistered(p, slices.Contains(info.SupportedVersions, drahealthv1.DRAResourceHealthService))
	}
	return nil
}

// deregisterRemoved deregisters the plugins whose registration socket is no
// longer among entries (the kubelet's DeRegisterPlugin), closing their
// connections.
func (r *registry) deregisterRemoved(entries []os.DirEntry) {
	present := map[string]bool{}
	for _, e := range entries {
		present[filepath.Join(r.dir, e.Name())] = true
	}
	var gone []*draPlugin
	r.mu.Lock()
	for path := range r.seen {
		if present[path] {
			continue
		}
		delete(r.seen, path)
		for driver, p := range r.plugins {
			if p.regPath == path {
				delete(r.plugins, driver)
				r.sync(driver)
				gone = append(gone, p)
			}
		}
	}
	r.mu.Unlock()
	for _, p := range gone {
		_ = p.conn.Close()
		r.log("deregistered DRA plugin %s: its registration socket %s is gone", p.driver, p.regPath)
	}
}

// sync schedules or cancels the wipe of driver's ResourceSlices after a
// change of its plugin or connection, as the kubelet's DRA plugin manager
// does: a driver with no registered plugin whose connection is up gets its
// slices deleted wipeDelay after it became unusable, once until it is usable
// again. Called with r.mu held.
func (r *registry) sync(driver string) {
	if r.wipeDelay < 0 || r.wipe == nil {
		return
	}
	t, queued := r.pending[driver]
	if p := r.plugins[driver]; p != nil && p.connected {
		if queued {
			delete(r.pending, driver)
			if t != nil && t.Stop() {
				r.log("DRA driver %s usable again; its ResourceSlices are kept", driver)
			}
		}
		return
	}
	if queued {
		return // the first deadline stands; once wiped, not again until usable
	}
	r.log("DRA driver %s unusable; its ResourceSlices are deleted in %s unless it comes back", driver, r.wipeDelay)
	t = r.clock.AfterFunc(r.wipeDelay, func() {
		r.mu.Lock()
		current := r.pending[driver] == t
		if current {
			r.pending[driver] = nil // wiped: kept, as the kubelet keeps its finished work
		}
		r.mu.Unlock()
		if current {
			r.wipe(driver)
		}
	})
	r.pending[driver] = t
}

// connMonitor follows one plugin's gRPC connection (a grpc stats.Handler).
type connMonitor struct {
	r *registry
	p *draPlugin
}

func (m *connMonitor) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (m *connMonitor) HandleRPC(context.Context, stats.RPCStats)                         {}
func (m *connMonitor) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

// HandleConn records the connection's begin and end; after an end it asks
// gRPC to connect again (from a goroutine: gRPC holds a lock while it calls
// HandleConn when a connection goes idle), so that a restarted plugin is
// seen.
func (m *connMonitor) HandleConn(_ context.Context, s stats.ConnStats) {
	var connected bool
	switch s.(type) {
	case *stats.ConnBegin:
		connected = true
	case *stats.ConnEnd:
	default:
		return
	}
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	if m.r.plugins[m.p.driver] != m.p {
		return // replaced or deregistered: its connection no longer counts
	}
	if !connected {
		go m.p.conn.Connect()
	}
	m.p.connected = connected
	m.r.sync(m.p.driver)
}

func (r *registry) get(driver string) *draPlugin {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.plugins[driver]
}

// waitFor waits until driver has been registered at or after since.
func (r *registry) waitFor(ctx context.Context, driver string, since time.Time) error {
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if p := r.plugins[driver]; p != nil && !p.registeredAt.Before(since) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waiting for DRA plugin %s to register in %s: %w", driver, r.dir, err)
		}
		r.cond.Wait()
	}
}
