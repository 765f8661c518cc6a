package harness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options configures Start. The zero value is usable.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-scheduler, kube-controller-manager.
	// Default: BinDir().
	BinDir string
	// StateDir receives pki/, etcd/, the kubeconfig files and the pids file. Default: a new
	// temporary directory, removed by Stop. A given StateDir is kept; its etcd data is wiped
	// at Start (every Start is a fresh cluster).
	StateDir string
	// LogDir receives one <component>.log per process. Default: StateDir/logs (so with a
	// temporary StateDir the logs go with it; print them with DumpLogs before Stop).
	LogDir string
	// Timeout bounds Start (on top of ctx). Default 3 minutes.
	Timeout time.Duration
	// FeatureGates is passed as --feature-gates to the apiserver, scheduler and
	// controller-manager (e.g. "DRAConsumableCapacity=false"). Default: the 1.37 defaults.
	FeatureGates string
	// Extra flags per component, appended last (a repeated flag overrides ours).
	EtcdArgs, APIServerArgs, SchedulerArgs, ControllerManagerArgs []string
	// Progress, when set, receives one line per step ("apiserver ready after 4.1s").
	Progress io.Writer
}

// Component names, also the log file names (LogDir/<name>.log).
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	Scheduler         = "kube-scheduler"
	ControllerManager = "kube-controller-manager"
)

// Identities the harness authenticates with static tokens.
const (
	AdminUser             = "miglayout-admin" // group system:masters
	SchedulerUser         = "system:kube-scheduler"
	ControllerManagerUser = "system:kube-controller-manager"
)

// PidsFile is the name, inside StateDir, of the "component pid" lines of a running plane.
const PidsFile = "pids"

// ControlPlane is a running control plane. Stop it when done.
type ControlPlane struct {
	opts      Options
	stateDir  string
	logDir    string
	tempState bool
	pki       *pki
	apiURL    string
	ports     map[string]int
	token     string // admin bearer token
	spawner   *Spawner
	procs     []*Process
	started   time.Duration

	stopOnce sync.Once
	stopErr  error
}

// Start starts etcd, kube-apiserver, kube-scheduler and kube-controller-manager on free
// 127.0.0.1 ports and waits until the apiserver is ready, the scheduler and
// controller-manager are healthy, and the default ServiceAccount exists (pods are refused
// before). On failure everything already started is stopped and the error carries the tail
// of the failing component's log.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	if opts.BinDir == "" {
		d, err := BinDir()
		if err != nil {
			return nil, err
		}
		opts.BinDir = d
	} else if err := checkBinaries(opts.BinDir); err != nil {
		return nil, err
	}
	if opts.Timeout == 0 {
		opts.Timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	// Free ports are chosen before binding; another process may take one in between.
	// That is rare, and shows as "address already in use": retry with new ports.
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		var cp *ControlPlane
		cp, err = start(ctx, opts)
		if err == nil {
			return cp, nil
		}
		if !errors.Is(err, errPortConflict) || ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

func start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	t0 := time.Now()
	cp := &ControlPlane{opts: opts, stateDir: opts.StateDir, logDir: opts.LogDir}
	if cp.stateDir == "" {
		sweepStaleTempDirs()
		d, err := os.MkdirTemp("", tempPrefix)
		if err != nil {
			return nil, err
		}
		cp.stateDir, cp.tempState = d, true
	}
	if cp.stateDir, err = filepath.Abs(cp.stateDir); err != nil {
		return nil, err
	}
	if cp.logDir == "" {
		cp.logDir = filepath.Join(cp.stateDir, "logs")
	}
	if cp.logDir, err = filepath.Abs(cp.logDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cp.stateDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cp.logDir, 0o755); err != nil {
		return nil, err
	}
	if live := LivePids(cp.stateDir); len(live) > 0 {
		return nil, StillRunningError("a control plane", cp.stateDir, live)
	}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	cp.spawner = NewSpawner()

	if cp.pki, err = newPKI(filepath.Join(cp.stateDir, "pki")); err != nil {
		return nil, fmt.Errorf("generating keys: %w", err)
	}
	names := []string{"etcd", "etcd-peer", APIServer, Scheduler, ControllerManager}
	ports, err := freePorts(len(names))
	if err != nil {
		return nil, err
	}
	cp.ports = map[string]int{}
	for i, n := range names {
		cp.ports[n] = ports[i]
	}
	cp.apiURL = "https://127.0.0.1:" + strconv.Itoa(cp.ports[APIServer])

	// Static bearer tokens. The scheduler and the controller-manager have their real
	// identities and bootstrap RBAC roles; only the admin is in system:masters.
	cp.token = randomToken()
	schedToken, cmToken := randomToken(), randomToken()
	tokens := filepath.Join(cp.pki.dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(fmt.Sprintf(
		"%s,%s,uid-admin,\"system:masters\"\n%s,%s,uid-kube-scheduler\n%s,%s,uid-kube-controller-manager\n",
		cp.token, AdminUser, schedToken, SchedulerUser, cmToken, ControllerManagerUser)), 0o600); err != nil {
		return nil, err
	}
	for file, tok := range map[string]string{
		cp.Kubeconfig(): cp.token,
		filepath.Join(cp.stateDir, "scheduler.kubeconfig"):          schedToken,
		filepath.Join(cp.stateDir, "controller-manager.kubeconfig"): cmToken,
	} {
		if err := cp.writeKubeconfig(file, tok); err != nil {
			return nil, err
		}
	}

	// etcd: loopback only, fresh data, no fsync (test data).
	etcdDir := filepath.Join(cp.stateDir, "etcd")
	if err := os.RemoveAll(etcdDir); err != nil {
		return nil, err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", cp.ports["etcd"])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", cp.ports["etcd-peer"])
	etcd, err := cp.run(Etcd, append([]string{
		"--name=testbin", "--data-dir=" + etcdDir,
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=testbin=" + peerURL,
		"--unsafe-no-fsync", "--log-level=warn",
	}, opts.EtcdArgs...))
	if err != nil {
		return nil, err
	}
	plain := &http.Client{Timeout: 2 * time.Second}
	if err := cp.waitFor(ctx, etcd, func(ctx context.Context) error {
		return ownsPort(etcd, cp.ports["etcd"], func() error { return httpOK(ctx, plain, etcdURL+"/health", "") })
	}); err != nil {
		return nil, err
	}
	cp.progress("etcd ready after %.1fs", time.Since(t0).Seconds())

	p := cp.pki
	apiArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(cp.ports[APIServer]),
		"--cert-dir=" + p.dir,
		"--tls-cert-file=" + p.srvCrt, "--tls-private-key-file=" + p.srvKey,
		"--client-ca-file=" + p.caFile,
		// Front-proxy (request header) auth with the same CA, so that the components' own
		// authentication delegation finds a complete extension-apiserver-authentication
		// ConfigMap (else they log an error every second). Only CN=front-proxy-client may
		// assert these headers; ConfigForUser certificates are ordinary client certificates.
		"--requestheader-client-ca-file=" + p.caFile,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--token-auth-file=" + tokens,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		// TaintNodesByCondition puts node.kubernetes.io/not-ready:NoSchedule on every new
		// Node, and only the node-lifecycle controller (off, below) would remove it.
		"--disable-admission-plugins=TaintNodesByCondition",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPub,
		"--service-account-signing-key-file=" + p.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// 1.37 refuses a loopback advertise address with the default "lease" reconciler.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
	if opts.FeatureGates != "" {
		apiArgs = append(apiArgs, "--feature-gates="+opts.FeatureGates)
	}
	api, err := cp.run(APIServer, append(apiArgs, opts.APIServerArgs...))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	apiHTTP := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	if err := cp.waitFor(ctx, api, func(ctx context.Context) error {
		return httpOK(ctx, apiHTTP, cp.apiURL+"/readyz", cp.token)
	}); err != nil {
		return nil, err
	}
	cp.progress("kube-apiserver ready after %.1fs", time.Since(t0).Seconds())

	k := filepath.Join(cp.stateDir, "scheduler.kubeconfig")
	schedArgs := []string{
		"--kubeconfig=" + k, "--authentication-kubeconfig=" + k, "--authorization-kubeconfig=" + k,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(cp.ports[Scheduler]),
		"--leader-elect=false", "-v=2",
	}
	if opts.FeatureGates != "" {
		schedArgs = append(schedArgs, "--feature-gates="+opts.FeatureGates)
	}
	sched, err := cp.run(Scheduler, append(schedArgs, opts.SchedulerArgs...))
	if err != nil {
		return nil, err
	}
	k = filepath.Join(cp.stateDir, "controller-manager.kubeconfig")
	cmArgs := []string{
		"--kubeconfig=" + k, "--authentication-kubeconfig=" + k, "--authorization-kubeconfig=" + k,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(cp.ports[ControllerManager]),
		"--leader-elect=false", "-v=2",
		// No kubelets: the node-lifecycle controller would mark every Node unreachable.
		"--controllers=*,-node-lifecycle-controller",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p.saKey,
		"--root-ca-file=" + p.caFile, // the CA alone (ClusterTrustBundle publisher rejects leaves)
		"--cluster-signing-cert-file=" + p.caFile, "--cluster-signing-key-file=" + p.caKeyF,
		"--service-cluster-ip-range=10.0.0.0/24",
		// The quota controller may write back a count from informers
		// that lag behind admission's; nothing but its full recount
		// (every 5 min by default) corrects it: recount every 10 s.
		"--resource-quota-sync-period=10s",
	}
	if opts.FeatureGates != "" {
		cmArgs = append(cmArgs, "--feature-gates="+opts.FeatureGates)
	}
	cm, err := cp.run(ControllerManager, append(cmArgs, opts.ControllerManagerArgs...))
	if err != nil {
		return nil, err
	}
	// Their serving certificates are self-signed in memory; /healthz is open to anyone.
	insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health probe only
	if err := cp.waitFor(ctx, sched, func(ctx context.Context) error {
		return ownsPort(sched, cp.ports[Scheduler], func() error {
			return httpOK(ctx, insecure, fmt.Sprintf("https://127.0.0.1:%d/healthz", cp.ports[Scheduler]), "")
		})
	}); err != nil {
		return nil, err
	}
	if err := cp.waitFor(ctx, cm, func(ctx context.Context) error {
		return ownsPort(cm, cp.ports[ControllerManager], func() error {
			return httpOK(ctx, insecure, fmt.Sprintf("https://127.0.0.1:%d/healthz", cp.ports[ControllerManager]), "")
		})
	}); err != nil {
		return nil, err
	}
	cp.progress("scheduler and controller-manager healthy after %.1fs", time.Since(t0).Seconds())

	// Pods are refused (ServiceAccount admission) until the serviceaccount controller has
	// made default/default.
	client, err := kubernetes.NewForConfig(cp.Config())
	if err != nil {
		return nil, err
	}
	if err := cp.waitFor(ctx, cm, func(ctx context.Context) error {
		_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return nil, fmt.Errorf("waiting for ServiceAccount default/default: %w", err)
	}
	cp.started = time.Since(t0)
	cp.progress("control plane up in %.1fs; KUBECONFIG=%s", cp.started.Seconds(), cp.Kubeconfig())
	return cp, nil
}

func (cp *ControlPlane) run(name string, args []string) (*Process, error) {
	p, err := cp.spawner.Run(name, filepath.Join(cp.opts.BinDir, name), filepath.Join(cp.logDir, name+".log"), args,
		RunOptions{Env: componentEnv()})
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, p)
	if err := cp.writePids(); err != nil {
		return nil, err
	}
	return p, nil
}

// waitFor polls check until it succeeds, p exits, or ctx ends.
func (cp *ControlPlane) waitFor(ctx context.Context, p *Process, check func(context.Context) error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := check(cctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return exitError(p)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last check: %v); last lines of %s:\n%s",
				p.Name(), ctx.Err(), err, p.LogPath(), TailFile(p.LogPath(), 30))
		case <-tick.C:
		}
	}
}

func (cp *ControlPlane) progress(format string, args ...any) {
	if cp.opts.Progress != nil {
		fmt.Fprintf(cp.opts.Progress, "harness: "+format+"\n", args...)
	}
}

func (cp *ControlPlane) writePids() error {
	var b strings.Builder
	// The process that started the plane first: stopping it (a demo left
	// up, a test) stops what it started beside the plane too.
	fmt.Fprintf(&b, "%s%s %d\n", ownerPrefix, filepath.Base(os.Args[0]), os.Getpid())
	for _, p := range cp.procs {
		fmt.Fprintf(&b, "%s %d\n", p.Name(), p.Pid())
	}
	return os.WriteFile(filepath.Join(cp.stateDir, PidsFile), []byte(b.String()), 0o644)
}

func (cp *ControlPlane) writeKubeconfig(path, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testbin"] = &clientcmdapi.Cluster{Server: cp.apiURL, CertificateAuthorityData: cp.pki.caPEM}
	cfg.AuthInfos["testbin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["testbin"] = &clientcmdapi.Context{Cluster: "testbin", AuthInfo: "testbin", Namespace: "default"}
	cfg.CurrentContext = "testbin"
	return clientcmd.WriteToFile(*cfg, path)
}

// Config returns a new admin (system:masters) client configuration.
func (cp *ControlPlane) Config() *rest.Config {
	return &rest.Config{
		Host:            cp.apiURL,
		BearerToken:     cp.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.pki.caPEM},
		QPS:             200,
		Burst:           400,
	}
}

// ConfigForUser returns a client configuration that authenticates as user name in groups,
// with a client certificate signed by the cluster CA (CN=name, O=groups): a real
// authentication, so RBAC, the Node authorizer and NodeRestriction see exactly this user.
// For a node agent use ("system:node:<node>", []string{"system:nodes"}).
func (cp *ControlPlane) ConfigForUser(name string, groups []string) *rest.Config {
	crt, key, err := cp.pki.clientCert(name, groups)
	if err != nil {
		panic(fmt.Sprintf("harness: issuing client certificate for %q: %v", name, err))
	}
	return &rest.Config{
		Host:            cp.apiURL,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.pki.caPEM, CertData: crt, KeyData: key},
		QPS:             200,
		Burst:           400,
	}
}

// ConfigForServiceAccount returns a client configuration with a fresh token (TokenRequest,
// one hour) of the ServiceAccount namespace/name, which must exist.
func (cp *ControlPlane) ConfigForServiceAccount(ctx context.Context, namespace, name string) (*rest.Config, error) {
	client, err := kubernetes.NewForConfig(cp.Config())
	if err != nil {
		return nil, err
	}
	exp := int64(3600)
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}},
		metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for serviceaccount %s/%s: %w", namespace, name, err)
	}
	return &rest.Config{
		Host:            cp.apiURL,
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.pki.caPEM},
		QPS:             200,
		Burst:           400,
	}, nil
}

// Kubeconfig is the path of the admin kubeconfig file (StateDir/kubeconfig).
func (cp *ControlPlane) Kubeconfig() string { return filepath.Join(cp.stateDir, "kubeconfig") }

// Host is the apiserver URL (https://127.0.0.1:PORT).
func (cp *ControlPlane) Host() string { return cp.apiURL }

// CAPEM is the cluster CA certificate (PEM), which signed the apiserver's serving certificate.
func (cp *ControlPlane) CAPEM() []byte { return append([]byte(nil), cp.pki.caPEM...) }

// StateDir and LogDir are the directories in use.
func (cp *ControlPlane) StateDir() string { return cp.stateDir }
func (cp *ControlPlane) LogDir() string   { return cp.logDir }

// StartupTime is how long Start took (last attempt).
func (cp *ControlPlane) StartupTime() time.Duration { return cp.started }

// Pids maps each component to its process id.
func (cp *ControlPlane) Pids() map[string]int {
	m := map[string]int{}
	for _, p := range cp.procs {
		m[p.Name()] = p.Pid()
	}
	return m
}

// Exited reports the first component that has died since Start, with its log tail, or nil.
func (cp *ControlPlane) Exited() error {
	for _, p := range cp.procs {
		if p.Exited() {
			return exitError(p)
		}
	}
	return nil
}

// DumpLogs writes the last lines of every component's log to w (for a failing test).
func (cp *ControlPlane) DumpLogs(w io.Writer, lines int) {
	for _, p := range cp.procs {
		fmt.Fprintf(w, "==== last %d lines of %s\n%s\n", lines, p.LogPath(), TailFile(p.LogPath(), lines))
	}
}

// Stop stops every component (SIGTERM to its process group, SIGKILL after a few seconds),
// scheduler and controller-manager first, etcd last, and removes a temporary StateDir.
// Safe to call more than once.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		var wg sync.WaitGroup
		for i := len(cp.procs) - 1; i >= 0; i-- {
			p := cp.procs[i]
			if p.Name() == Scheduler || p.Name() == ControllerManager {
				wg.Add(1)
				go func() { defer wg.Done(); p.Stop(5 * time.Second) }()
			}
		}
		wg.Wait()
		for i := len(cp.procs) - 1; i >= 0; i-- {
			if p := cp.procs[i]; p.Name() != Scheduler && p.Name() != ControllerManager {
				p.Stop(5 * time.Second)
			}
		}
		for _, p := range cp.procs {
			if !p.Exited() {
				cp.stopErr = errors.Join(cp.stopErr, fmt.Errorf("%s (pid %d) did not exit", p.Name(), p.Pid()))
			}
		}
		if cp.spawner != nil {
			cp.spawner.Close()
		}
		if cp.stopErr == nil {
			_ = os.Remove(filepath.Join(cp.stateDir, PidsFile))
		}
		if cp.tempState {
			if err := os.RemoveAll(cp.stateDir); err != nil {
				cp.stopErr = errors.Join(cp.stopErr, err)
			}
		}
	})
	return cp.stopErr
}

const tempPrefix = "miglayout-cp-"

// sweepStaleTempDirs removes temporary state directories (~120 MB each, mostly etcd's
// preallocated WAL) left by test binaries that were killed before Stop: those whose
// pids file is over a minute old and names no live process.
func sweepStaleTempDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, d := range dirs {
		st, err := os.Stat(filepath.Join(d, PidsFile))
		if err != nil || time.Since(st.ModTime()) < time.Minute || len(LivePids(d)) > 0 {
			continue
		}
		_ = os.RemoveAll(d)
	}
}

// ownerPrefix marks, in the pids file, the process that started the plane
// ("owner:miglayout-demo 4242").
const ownerPrefix = "owner:"

// LivePids reads StateDir/pids and returns the processes listed there that are still
// running the component they were started as (guards against pid reuse). The process
// that started the plane, where it runs, is among them under "owner:<its name>".
func LivePids(stateDir string) map[string]int {
	b, err := os.ReadFile(filepath.Join(stateDir, PidsFile))
	if err != nil {
		return nil
	}
	live := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		name, pidStr, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 {
			continue
		}
		if procRuns(pid, strings.TrimPrefix(name, ownerPrefix)) {
			live[name] = pid
		}
	}
	return live
}

// StillRunningError is the error of starting where processes of an earlier
// start in the same state directory still run: it names them and how to
// stop them ("etcd (pid 21564), kube-apiserver (pid 21600) still run; stop
// them with Ctrl-C where they were started, or: kill 21564 21600").
//
// Where the process that started them runs (LivePids' "owner:" entry), it is
// the one to stop: it stops what it started beside the control plane (a
// demo's agents and controller) too.
func StillRunningError(what, stateDir string, live map[string]int) error {
	owner, ownerPid := "", 0
	var procs, pids []string
	for _, n := range slices.Sorted(maps.Keys(live)) {
		if name, ok := strings.CutPrefix(n, ownerPrefix); ok {
			owner, ownerPid = name, live[n]
			continue
		}
		procs = append(procs, fmt.Sprintf("%s (pid %d)", n, live[n]))
		pids = append(pids, strconv.Itoa(live[n]))
	}
	if owner != "" {
		return fmt.Errorf("%s from %s is still running: %s, started by %s (pid %d); stop it with Ctrl-C where it was started, or: kill %d",
			what, stateDir, strings.Join(procs, ", "), owner, ownerPid, ownerPid)
	}
	return fmt.Errorf("%s from %s is still running: %s; stop it with Ctrl-C where it was started, or: kill %s",
		what, stateDir, strings.Join(procs, ", "), strings.Join(pids, " "))
}

// procRuns reports whether pid is alive and its argv[0] ends in /name.
func procRuns(pid int, name string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv0, _, _ := strings.Cut(string(b), "\x00")
	return argv0 == name || strings.HasSuffix(argv0, "/"+name)
}

func httpOK(ctx context.Context, c *http.Client, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// freePorts returns n distinct free TCP ports on 127.0.0.1 (held open together while
// choosing, so they are distinct).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("choosing a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
