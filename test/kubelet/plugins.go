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
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// draPlugin is one registered DRA kubelet plugin.
type draPlugin struct {
	driver       string
	endpoint     string
	conn         *grpc.ClientConn
	client       drapb.DRAPluginClient
	registeredAt time.Time
	socketID     socketID // the registration socket it came from
}

// socketID tells a re-created registration socket from the old one.
type socketID struct {
	ino   uint64
	mtime time.Time
}

// registry watches the registrar directory the way the kubelet's plugin
// watcher does: for each new "*-reg.sock" socket it calls GetInfo, connects
// to the DRA endpoint the plugin names, and calls NotifyRegistrationStatus.
// A socket that is re-created (the agent restarted) is registered again.
type registry struct {
	dir string
	log func(format string, args ...any)

	mu      sync.Mutex
	cond    *sync.Cond
	plugins map[string]*draPlugin // by driver name
	seen    map[string]socketID   // registration socket path → the socket last registered
	failed  map[string]time.Time  // registration socket path → last failure (retried after a second)
}

func newRegistry(dir string, log func(string, ...any)) *registry {
	r := &registry{dir: dir, log: log, plugins: map[string]*draPlugin{}, seen: map[string]socketID{}, failed: map[string]time.Time{}}
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
			for _, p := range r.plugins {
				_ = p.conn.Close()
			}
			r.plugins = map[string]*draPlugin{}
			r.cond.Broadcast()
			r.mu.Unlock()
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
	conn, err := grpc.NewClient("unix://"+info.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return notify(fmt.Errorf("connecting to %s: %w", info.Endpoint, err))
	}
	if err := notify(nil); err != nil {
		conn.Close()
		return err
	}
	p := &draPlugin{driver: info.Name, endpoint: info.Endpoint, conn: conn, client: drapb.NewDRAPluginClient(conn),
		registeredAt: time.Now(), socketID: id}
	r.mu.Lock()
	if old := r.plugins[p.driver]; old != nil {
		_ = old.conn.Close()
	}
	r.plugins[p.driver] = p
	r.seen[path] = id
	delete(r.failed, path)
	r.cond.Broadcast()
	r.mu.Unlock()
	r.log("registered DRA plugin %s at %s", p.driver, p.endpoint)
	return nil
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
