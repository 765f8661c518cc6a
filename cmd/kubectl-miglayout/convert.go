package main

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miglayout/miglayout/pkg/mig"
	migslices "github.com/miglayout/miglayout/pkg/slices"
)

// Device-plugin resource names that convert rewrites.
const gpuResource = "nvidia.com/gpu"

var migResourceRE = regexp.MustCompile(`^nvidia\.com/mig-(.+)$`)

// devicePluginProfile is the MIG profile of the NVIDIA device plugin's
// resource nvidia.com/mig-<name>: the plugin writes a profile's "+" as "."
// (1g.10gb+me is nvidia.com/mig-1g.10gb.me, 1g.24gb+gfx
// nvidia.com/mig-1g.24gb.gfx).
func devicePluginProfile(name string) string {
	if m := devicePluginProfileRE.FindStringSubmatch(name); m != nil && m[2] != "" {
		return m[1] + "+" + m[2]
	}
	return name
}

var devicePluginProfileRE = regexp.MustCompile(`^([0-9]+g\.[0-9]+gb)(?:\.(.+))?$`)

type convertOptions struct {
	driver, migClass, gpuClass string
}

func newConvertCommand(e *env) *cobra.Command {
	var files []string
	o := convertOptions{}
	cmd := &cobra.Command{
		Use:   "convert -f WORKLOADS",
		Short: "Rewrite workloads that ask for nvidia.com/gpu or nvidia.com/mig-<profile> into DRA claims",
		Long: `Rewrite Pods, PodTemplates, Deployments, StatefulSets, DaemonSets,
ReplicaSets, ReplicationControllers, Jobs and CronJobs whose containers ask for the device plugin's extended resources
(nvidia.com/gpu, or nvidia.com/mig-<profile> as the device plugin's "mixed" MIG
strategy names them) in their limits: each such container resource becomes a
ResourceClaimTemplate for that many devices of the matching DeviceClass (a whole
GPU, or a MIG device of that profile), referenced from the pod's
resourceClaims and from the container's resources.claims. The extended
resource is removed from limits and requests. Every pod of the workload gets
its own claim. An init container uses the claims of the containers started
after it that do not run beside it, as the device plugin handed its devices on,
so a converted pod holds as many devices as Kubernetes counts for the original:
the most of its app containers and sidecars together and of each init
container with the sidecars started before it.

The ResourceClaimTemplates come first in the output, in the workload's
namespace (after the input's Namespaces, which they may be created in), then
every other input object (unchanged where there was nothing to rewrite).
Nothing is sent to the cluster. Objects of other kinds or API groups (a
Kubeflow PyTorchJob, a JobSet, a Volcano Job) are passed through as they
are; a note on standard error names each one that still asks for the device
plugin's resources.

Note that under the device plugin's "single" MIG strategy nvidia.com/gpu meant
a MIG device; the result asks for a whole GPU (--gpu-class): edit the template
to ask for a MIG device of the profile instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs, err := e.readManifests(files)
			if err != nil {
				return err
			}
			if err := migslices.ValidateDriverName(o.driver); err != nil {
				return err
			}
			objs, notes, err := convertDocuments(docs, o)
			if err != nil {
				return err
			}
			for _, n := range notes {
				fmt.Fprintln(cmd.ErrOrStderr(), "note:", n)
			}
			return writeYAML(cmd.OutOrStdout(), objs)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "workload manifests (YAML or JSON; - for standard input); repeatable")
	cmd.Flags().StringVar(&o.driver, "driver", migslices.DefaultDriverName, "DRA driver name whose attributes the MIG profile selector reads")
	cmd.Flags().StringVar(&o.migClass, "mig-class", "mig.miglayout.io", "DeviceClass of MIG devices")
	cmd.Flags().StringVar(&o.gpuClass, "gpu-class", "gpu.miglayout.io", "DeviceClass of whole GPUs")
	return cmd
}

// gpuAsk is one container's ask for one device-plugin resource.
type gpuAsk struct {
	container string
	resource  string
	profile   string // "" for a whole GPU
	count     int64
	// init: a container of initContainers that is not a sidecar
	// (restartPolicy Always): it ends before the app containers start.
	init bool
	// sidecar: a container of initContainers with restartPolicy Always:
	// it starts in its turn among the init containers and runs beside
	// the app containers.
	sidecar bool
	// order is the container's place in the pod: its index among the
	// init containers, after them for an app container.
	order int
}

func (a gpuAsk) token() string {
	if a.profile == "" {
		return "gpu"
	}
	return "mig-" + dnsToken(a.profile)
}

// dnsToken lower-cases s and turns every run of characters other than
// letters and digits into one "-".
func dnsToken(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// limitName cuts name to n characters, keeping it unique with a hash suffix.
func limitName(name string, n int) string {
	if len(name) <= n {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:])[:6]
	return strings.TrimSuffix(name[:n-7], "-") + "-" + h
}

func quantity(v any) (int64, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case int64:
		return x, nil
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		s = fmt.Sprint(x)
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, err
	}
	n, ok := q.AsInt64()
	if !ok {
		return 0, fmt.Errorf("%q is not a whole number of devices", s)
	}
	return n, nil
}

// convertDocuments returns the input's Namespaces, then the
// ResourceClaimTemplates (which may be created in one of them: kubectl
// applies in order), then every other document (rewritten where it asked for
// device-plugin GPUs), each group in input order.
func convertDocuments(docs []*document, o convertOptions) ([]map[string]any, []string, error) {
	var templates, objects []map[string]any
	var notes []string
	// Template names given so far, or in the input, by namespace: two
	// workloads of one name (a Pod and a Deployment "app") get distinct
	// templates, and none replaces a template of the input.
	// A workload without a namespace may be created in "default", as
	// one naming it: they count as one namespace here.
	taken := map[string]bool{}
	takenKey := func(d *document, name string) string {
		ns := d.namespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		return ns + "/" + name
	}
	for _, d := range docs {
		if d.kind() == "ResourceClaimTemplate" {
			taken[takenKey(d, d.name())] = true
		}
	}
	var namespaces []map[string]any
	for _, d := range docs {
		obj := deepCopy(d.Object)
		keys := podSpecPath(d)
		spec := mapAt(obj, keys...)
		if group, _ := d.group(); d.kind() == "Namespace" && group == "" {
			namespaces = append(namespaces, obj)
			continue
		}
		if keys == nil || spec == nil {
			if asked := devicePluginKeys(obj); len(asked) > 0 {
				notes = append(notes, fmt.Sprintf("%s: left as it is, though it asks for %s: convert rewrites only Pods, PodTemplates and the built-in workloads (apps/v1, batch/v1, ReplicationController); move the requests of its pod templates to ResourceClaimTemplates by hand (convert a Pod of the same containers for the claims to copy)", d.describe(), strings.Join(asked, ", ")))
			}
			objects = append(objects, obj)
			continue
		}
		asks, err := collectAsks(spec, d)
		if err != nil {
			return nil, nil, err
		}
		if len(asks) == 0 {
			objects = append(objects, obj)
			continue
		}
		// Name each pod claim after its resource, prefixed with the
		// container where several containers ask for the same resource.
		perResource := map[string]int{}
		for _, a := range asks {
			perResource[a.resource]++
		}
		existing := map[string]bool{}
		for _, rc := range listAt(spec, "resourceClaims") {
			if m, ok := rc.(map[string]any); ok {
				existing[fmt.Sprint(m["name"])] = true
			}
		}
		claims := listAt(spec, "resourceClaims")
		// The device plugin hands an init container's devices on to the
		// containers started after it (the pod needs the most of them, not
		// the sum): an init container whose resource an app container asks
		// for as many of or more uses that container's claim, made first
		// (reusable); one that asks for more uses the claims of the
		// containers that do not run beside it (covering), and the missing
		// devices are added to one claim every init container may use: an
		// app container's, or else one made for an init container. The
		// pod then holds what Kubernetes counts for it: the most of the
		// app containers and sidecars together and of each init container
		// with the sidecars started before it.
		// The order is total (init containers by their resource's first
		// ask, then largest first), so that a resource's largest init
		// container comes first among its init containers even where
		// those of another resource come between them.
		firstAsk := map[string]int{}
		for i, a := range asks {
			if _, ok := firstAsk[a.resource]; a.init && !ok {
				firstAsk[a.resource] = i
			}
		}
		slices.SortStableFunc(asks, func(x, y gpuAsk) int {
			switch {
			case x.init != y.init && y.init:
				return -1
			case x.init != y.init:
				return 1
			case !x.init:
				return 0
			case x.resource != y.resource:
				return cmp.Compare(firstAsk[x.resource], firstAsk[y.resource])
			}
			return cmp.Compare(y.count, x.count)
		})
		byResource := map[string][]*madeClaim{}
		// makeClaim makes a pod claim of a.count devices for a's
		// container and a ResourceClaimTemplate for it.
		makeClaim := func(a gpuAsk) *madeClaim {
			entry := a.token()
			if perResource[a.resource] > 1 {
				entry = dnsToken(a.container) + "-" + entry
			}
			entry = limitName(entry, 63)
			for existing[entry] {
				entry = limitName(entry+"-x", 63)
			}
			existing[entry] = true
			tmplName := limitName(dnsToken(templateBase(d))+"-"+entry, 253)
			for n := 2; taken[takenKey(d, tmplName)]; n++ {
				tmplName = limitName(fmt.Sprintf("%s-%s-%d", dnsToken(templateBase(d)), entry, n), 253)
			}
			taken[takenKey(d, tmplName)] = true
			tmpl := claimTemplate(tmplName, d.namespace(), entry, a, o)
			templates = append(templates, tmpl)
			claims = append(claims, map[string]any{"name": entry, "resourceClaimTemplateName": tmplName})
			use := addContainerClaim(spec, a.container, entry)
			m := &madeClaim{entry: entry, tmplName: tmplName, ask: a, template: tmpl, use: use}
			byResource[a.resource] = append(byResource[a.resource], m)
			return m
		}
		for _, a := range asks {
			if m, ok := reusable(byResource[a.resource], a); ok {
				addContainerClaim(spec, a.container, m.entry)
				notes = append(notes, fmt.Sprintf("%s: init container %s: %s: %d -> the claim %s of container %s (the device plugin gave it the same devices)", d.describe(), a.container, a.resource, a.count, m.entry, m.ask.container))
				continue
			}
			if shared, more, ok := covering(byResource[a.resource], a); ok {
				// The device plugin gave the init container's devices
				// on to the containers started after it: it uses their
				// claims, and the devices they miss are added to one
				// claim every init container may use (its own container
				// then uses its first request only), or made as a claim
				// of its own.
				var names []string
				for _, m := range shared {
					addContainerClaim(spec, a.container, m.entry)
					names = append(names, m.entry)
				}
				how := "their containers use some of the same devices under the device plugin"
				if more > 0 {
					if t := growable(shared); t != nil {
						how = t.grow(more)
					} else {
						rest := a
						rest.count = more
						m := makeClaim(rest)
						names = append(names, m.entry)
						how = fmt.Sprintf("their containers run before it or after it; ResourceClaimTemplate %s holds the %d more it needs", m.tmplName, more)
					}
				}
				notes = append(notes, fmt.Sprintf("%s: init container %s: %s: %d -> the claims %s (%s)", d.describe(), a.container, a.resource, a.count, strings.Join(names, ", "), how))
				continue
			}
			m := makeClaim(a)
			notes = append(notes, fmt.Sprintf("%s: container %s: %s: %d -> ResourceClaimTemplate %s", d.describe(), a.container, a.resource, a.count, m.tmplName))
		}
		spec["resourceClaims"] = claims
		objects = append(objects, obj)
	}
	return slices.Concat(namespaces, templates, objects), notes, nil
}

// devicePluginKeys are the device-plugin GPU resources (nvidia.com/gpu,
// nvidia.com/mig-*) found as keys anywhere in v, sorted.
func devicePluginKeys(v any) []string {
	found := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == gpuResource || migResourceRE.MatchString(k) {
					found[k] = true
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return slices.Sorted(maps.Keys(found))
}

// madeClaim is a pod claim convert made for one container's ask: its
// ResourceClaimTemplate, and the container's entry of resources.claims
// that names it (ask.count is the devices the claim holds).
type madeClaim struct {
	entry    string
	tmplName string
	ask      gpuAsk
	template map[string]any
	use      map[string]any
}

// grow makes the claim hold more devices more, in a second request that
// its container does not use (it names its first request), and says so.
// A claim grown before gets the devices in the same second request.
func (m *madeClaim) grow(more int64) string {
	extra := limitName(m.entry+"-more", 63)
	devices := mapAt(m.template, "spec", "spec", "devices")
	requests, _ := devices["requests"].([]any)
	m.use["request"] = m.entry
	m.ask.count += more
	for _, r := range requests[1:] {
		if r := r.(map[string]any); r["name"] == extra {
			exactly := r["exactly"].(map[string]any)
			exactly["count"] = exactly["count"].(int64) + more
			return fmt.Sprintf("the claim %s is made %d larger (request %s, now %d), its container %s using request %s", m.entry, more, extra, exactly["count"], m.ask.container, m.entry)
		}
	}
	added := deepCopy(requests[0].(map[string]any))
	added["name"] = extra
	exactly := added["exactly"].(map[string]any)
	exactly["allocationMode"], exactly["count"] = "ExactCount", more
	devices["requests"] = append(requests, added)
	return fmt.Sprintf("the claim %s is made %d larger (request %s), its container %s using request %s", m.entry, more, extra, m.ask.container, m.entry)
}

// growable is the claim of shared that every init container may use (no
// sidecar's: an init container listed after the sidecar runs beside it):
// the first app container's or init container's claim, or nil.
func growable(shared []*madeClaim) *madeClaim {
	for _, m := range shared {
		if !m.ask.sidecar && m.use != nil {
			return m
		}
	}
	return nil
}

// reusable is the claim, among those made for a's resource, that init
// container a shares: the largest one (the first of equals) of at least
// a's count whose container does not run while a does. The device plugin
// hands the devices of init containers that have ended on to the
// containers started after them, and a sidecar keeps its own, so a
// sidecar's claim serves only init containers listed before it. ok is
// false where a is no init container or no claim qualifies.
func reusable(made []*madeClaim, a gpuAsk) (*madeClaim, bool) {
	return largest(made, a, func(m *madeClaim) bool { return m.ask.count >= a.count })
}

// covering is what init container a, which asks for more devices than
// any claim made for its resource holds, shares: the largest claims (the
// first of equals) whose containers do not run while a does, until they
// hold a's count together; more is how many devices a misses where all of
// them hold fewer. ok is false where a is no init container or no claim
// qualifies.
func covering(made []*madeClaim, a gpuAsk) (shared []*madeClaim, more int64, ok bool) {
	if !a.init {
		return nil, 0, false
	}
	var eligible []*madeClaim
	for _, m := range made {
		if !runsBeside(m, a) {
			eligible = append(eligible, m)
		}
	}
	slices.SortStableFunc(eligible, func(x, y *madeClaim) int { return cmp.Compare(y.ask.count, x.ask.count) })
	var sum int64
	for _, m := range eligible {
		shared = append(shared, m)
		if sum += m.ask.count; sum >= a.count {
			return shared, 0, true
		}
	}
	if len(shared) == 0 {
		return nil, 0, false
	}
	return shared, a.count - sum, true
}

// runsBeside reports whether m's container runs while init container a
// does: a sidecar listed before a (the device plugin keeps its devices
// out of those the init containers after it reuse).
func runsBeside(m *madeClaim, a gpuAsk) bool { return m.ask.sidecar && m.ask.order < a.order }

// largest is the largest claim of made (the first of equals) that init
// container a may share (runsBeside) and that fits.
func largest(made []*madeClaim, a gpuAsk, fits func(*madeClaim) bool) (*madeClaim, bool) {
	var best *madeClaim
	if !a.init {
		return nil, false
	}
	for _, m := range made {
		if !fits(m) || runsBeside(m, a) {
			continue
		}
		if best == nil || m.ask.count > best.ask.count {
			best = m
		}
	}
	return best, best != nil
}

// templateBase is what a workload's ResourceClaimTemplates are named after:
// its name, or for one named by the API server its generateName prefix, or
// its kind.
func templateBase(d *document) string {
	if n := d.name(); n != "" {
		return n
	}
	if m, ok := d.Object["metadata"].(map[string]any); ok {
		if g, ok := m["generateName"].(string); ok && strings.Trim(g, "-.") != "" {
			return strings.Trim(g, "-.")
		}
	}
	return strings.ToLower(d.kind())
}

// collectAsks removes the device-plugin GPU resources from the containers of
// spec and returns them.
func collectAsks(spec map[string]any, d *document) ([]gpuAsk, error) {
	var asks []gpuAsk
	inits := len(listAt(spec, "initContainers"))
	for _, group := range []string{"initContainers", "containers"} {
		for i, ct := range listAt(spec, group) {
			c, ok := ct.(map[string]any)
			if !ok {
				continue
			}
			name, _ := c["name"].(string)
			policy, _ := c["restartPolicy"].(string)
			sidecar := group == "initContainers" && policy == "Always"
			init := group == "initContainers" && !sidecar
			order := i
			if group == "containers" {
				order += inits
			}
			res := mapAt(c, "resources")
			if res == nil {
				continue
			}
			counts := map[string]int64{}
			for _, section := range []string{"limits", "requests"} {
				m := mapAt(res, section)
				for k, v := range m {
					if k != gpuResource && !migResourceRE.MatchString(k) {
						continue
					}
					n, err := quantity(v)
					if err != nil {
						return nil, fmt.Errorf("%s: container %s: %s: %w", d.describe(), name, k, err)
					}
					if section == "limits" || counts[k] == 0 {
						counts[k] = n // limits win; extended resources need limits = requests
					}
					delete(m, k)
				}
				if m != nil && len(m) == 0 {
					delete(res, section)
				}
			}
			for _, k := range slices.Sorted(maps.Keys(counts)) {
				if counts[k] <= 0 {
					continue
				}
				if counts[k] > resourceapi.AllocationResultsMaxSize {
					// The API server stores such a claim; kube-scheduler
					// never allocates it.
					return nil, fmt.Errorf("%s: container %s: %s: %d: a ResourceClaim holds at most %d devices (resource.k8s.io/v1 AllocationResultsMaxSize): split the container's devices by hand", d.describe(), name, k, counts[k], resourceapi.AllocationResultsMaxSize)
				}
				a := gpuAsk{container: name, resource: k, count: counts[k], init: init, sidecar: sidecar, order: order}
				if m := migResourceRE.FindStringSubmatch(k); m != nil {
					profile := devicePluginProfile(m[1])
					if _, err := mig.ParseProfileName(profile); err != nil {
						return nil, fmt.Errorf("%s: container %s: %s: %w", d.describe(), name, k, err)
					}
					a.profile = profile
				}
				asks = append(asks, a)
			}
		}
	}
	return asks, nil
}

// addContainerClaim adds the pod claim entry to the container's
// resources.claims and returns the entry added (nil where there is no
// such container).
func addContainerClaim(spec map[string]any, container, entry string) map[string]any {
	for _, group := range []string{"initContainers", "containers"} {
		for _, ct := range listAt(spec, group) {
			c, ok := ct.(map[string]any)
			if !ok || c["name"] != container {
				continue
			}
			res, _ := c["resources"].(map[string]any)
			if res == nil {
				res = map[string]any{}
				c["resources"] = res
			}
			claims, _ := res["claims"].([]any)
			use := map[string]any{"name": entry}
			res["claims"] = append(claims, use)
			return use
		}
	}
	return nil
}

// claimTemplate asks for count devices of the ask's class (and profile).
func claimTemplate(name, namespace, request string, a gpuAsk, o convertOptions) map[string]any {
	exactly := map[string]any{"deviceClassName": o.gpuClass}
	if a.profile != "" {
		exactly["deviceClassName"] = o.migClass
		exactly["selectors"] = []any{map[string]any{"cel": map[string]any{
			"expression": fmt.Sprintf("device.attributes['%s'].profile == '%s'", o.driver, a.profile),
		}}}
	}
	if a.count != 1 {
		exactly["allocationMode"] = "ExactCount"
		exactly["count"] = a.count
	}
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	return map[string]any{
		"apiVersion": "resource.k8s.io/v1",
		"kind":       "ResourceClaimTemplate",
		"metadata":   meta,
		"spec": map[string]any{"spec": map[string]any{"devices": map[string]any{"requests": []any{
			map[string]any{"name": request, "exactly": exactly},
		}}}},
	}
}
