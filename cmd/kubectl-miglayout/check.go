package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func newCheckCommand(e *env) *cobra.Command {
	var files, drivers, classes []string
	var offline, fix bool
	cmd := &cobra.Command{
		Use:   "check -f MANIFESTS [--offline] [--fix]",
		Short: "Explain the mistakes of DRA manifests before the API server refuses them",
		Long: `Check ResourceClaims, ResourceClaimTemplates, DeviceClasses and workloads
(Pods, Deployments, Jobs, ..., and the pod templates other kinds hold, such
as JobSets and LeaderWorkerSets) for the mistakes that DRA snippets written
for older API versions carry, and say how to fix each:

  - allocationMode: Count            the modes are ExactCount and All
  - resourceClaims[].source.*        removed: resourceClaimName or
                                     resourceClaimTemplateName sit on the entry
  - claims under pod-level resources claims belong to containers
  - request fields beside exactly:   in resource.k8s.io/v1 they sit under exactly
  - a CEL selector or matchAttribute naming an attribute no device publishes
  - a deviceClassName that names no DeviceClass
  - what else the API server refuses in these fields: a CEL selector that
    does not compile to a bool (or is too costly), a count beside
    allocationMode All, a constraint naming no request, a pod claim entry
    without a valid name or without exactly one of resourceClaimName and
    resourceClaimTemplateName (a key given as "" counts, and is refused),
    a pod claim or container claim given twice

Attributes and DeviceClasses are those of the cluster (its DeviceClasses and
published ResourceSlices) unless --offline is given or the cluster cannot be
reached; offline, they are miglayout's device model under --driver and the
--class names, plus the DeviceClasses of the manifests themselves.

With --fix the manifests are printed with the mechanical mistakes corrected
(the report then goes to standard error). The command fails when it finds a
problem.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs, err := e.readManifests(files)
			if err != nil {
				return err
			}
			world, note := checkWorld(cmd.Context(), e, offline, drivers, classes)
			report := io.Writer(printable{cmd.OutOrStdout()})
			if fix {
				report = printable{cmd.ErrOrStderr()}
			}
			if note != "" {
				fmt.Fprintf(report, "note: %s\n", note)
			}
			for _, n := range world.notes {
				fmt.Fprintf(report, "note: %s\n", n)
			}
			findings := checkDocuments(docs, world)
			writeFindings(report, docs, findings)
			if fix {
				if err := writeYAML(cmd.OutOrStdout(), fixDocuments(docs, findings)); err != nil {
					return err
				}
			}
			if len(findings) > 0 {
				return fmt.Errorf("%s found", plural(len(findings), "problem"))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifest file (YAML or JSON, several documents allowed; - for standard input); repeatable")
	cmd.Flags().BoolVar(&offline, "offline", false, "do not read the cluster: check against miglayout's device model")
	cmd.Flags().BoolVar(&fix, "fix", false, "print the manifests with the mechanical mistakes fixed")
	cmd.Flags().StringSliceVar(&drivers, "driver", defaultDrivers, "DRA driver names miglayout publishes under (their attributes are known offline)")
	cmd.Flags().StringSliceVar(&classes, "class", defaultClasses, "DeviceClass names known offline")
	return cmd
}

// checkWorld reads the cluster, or falls back to the offline model with a note.
func checkWorld(ctx context.Context, e *env, offline bool, drivers, classes []string) (*deviceWorld, string) {
	if offline {
		return offlineWorld(drivers, classes), ""
	}
	c, err := e.client()
	if err == nil {
		var w *deviceWorld
		if w, err = clusterWorld(ctx, c, drivers); err == nil {
			return w, ""
		}
	}
	return offlineWorld(drivers, classes), fmt.Sprintf("not reading the cluster (%v): checking against %s", err, offlineWorld(drivers, classes).source)
}

// finding is one mistake in one document.
type finding struct {
	doc     *document
	path    string
	problem string
	fix     string
	// apply, when set, corrects the mistake in the document's copy.
	apply func(obj map[string]any)
}

type checker struct {
	world    *deviceWorld
	findings []finding
	doc      *document
}

func (c *checker) add(path, problem, fix string, apply func(map[string]any)) {
	c.findings = append(c.findings, finding{doc: c.doc, path: path, problem: problem, fix: fix, apply: apply})
}

// checkDocuments returns the findings in document order.
func checkDocuments(docs []*document, world *deviceWorld) []finding {
	// DeviceClasses defined alongside count as existing.
	for _, d := range docs {
		if d.kind() == "DeviceClass" && d.name() != "" {
			world.classes[d.name()] = true
		}
	}
	c := &checker{world: world}
	for _, d := range docs {
		c.doc = d
		if v, _ := d.Object["apiVersion"].(string); v == "resource.k8s.io/v1alpha2" {
			c.add("apiVersion", "resource.k8s.io/v1alpha2 is classic DRA (Kubernetes 1.26 to 1.30): no API server serves it since 1.31",
				"write it for resource.k8s.io/v1: a claim asks for devices by DeviceClass and CEL selectors (spec.devices.requests), not for a ResourceClass", nil)
		}
		switch d.kind() {
		case "ResourceClaim":
			c.claimSpec(d.Object, []string{"spec"})
		case "ResourceClaimTemplate":
			c.claimSpec(d.Object, []string{"spec", "spec"})
		case "DeviceClass":
			for i, s := range listAt(d.Object, "spec", "selectors") {
				if sel, ok := s.(map[string]any); ok {
					c.cel(fmt.Sprintf("spec.selectors[%d].cel.expression", i), stringAt(sel, "cel", "expression"), "")
				}
			}
		default:
			if p := podSpecPath(d); p != nil {
				if mapAt(d.Object, p...) != nil {
					c.podSpec(d.Object, p)
				}
				continue
			}
			// Another kind (a JobSet, a LeaderWorkerSet, a training
			// job): the pod templates it holds, wherever they are.
			for _, p := range nestedPodSpecs(d.Object) {
				c.podSpec(d.Object, p)
			}
		}
	}
	return c.findings
}

func pathOf(keys []string) string { return strings.Join(keys, ".") }

// flatRequestVersions are the DRA API versions whose requests carry
// deviceClassName, allocationMode and count directly: v1alpha3
// (Kubernetes 1.31 and 1.32; no longer served for claims) and v1beta1.
var flatRequestVersions = map[string]bool{"resource.k8s.io/v1alpha3": true, "resource.k8s.io/v1beta1": true}

// claimSpec checks a ResourceClaimSpec at keys.
func (c *checker) claimSpec(obj map[string]any, keys []string) {
	spec := mapAt(obj, keys...)
	if spec == nil {
		return
	}
	if _, ok := spec["resourceClassName"]; ok {
		c.add(pathOf(keys)+".resourceClassName", "resourceClassName is classic DRA's (resource.k8s.io/v1alpha2); resource.k8s.io/v1 has no such field",
			"ask for devices: devices.requests[].exactly.deviceClassName", nil)
	}
	base := pathOf(keys) + ".devices"
	for i, r := range listAt(spec, "devices", "requests") {
		req, ok := r.(map[string]any)
		if !ok {
			continue
		}
		rp := fmt.Sprintf("%s.requests[%d]", base, i)
		name, _ := req["name"].(string)
		if ex, ok := req["exactly"].(map[string]any); ok {
			c.deviceRequest(rp+".exactly", ex, name, keys, i, "exactly")
		}
		for j, s := range listAt(req, "firstAvailable") {
			if sub, ok := s.(map[string]any); ok {
				c.deviceRequest(fmt.Sprintf("%s.firstAvailable[%d]", rp, j), sub, name, keys, i, "firstAvailable", j)
			}
		}
		var flat []string
		for _, k := range []string{"deviceClassName", "allocationMode", "count", "selectors", "adminAccess", "tolerations", "capacity"} {
			if _, ok := req[k]; ok {
				flat = append(flat, k)
			}
		}
		if len(flat) > 0 {
			what := fmt.Sprintf("%s sit directly on the request, as in resource.k8s.io/v1beta1; in resource.k8s.io/v1 they belong under exactly: (the API server refuses them as unknown fields)", strings.Join(flat, ", "))
			hint := "move them under exactly:\n- name: " + name + "\n  exactly:\n    deviceClassName: ..."
			if v, _ := obj["apiVersion"].(string); flatRequestVersions[v] {
				what = fmt.Sprintf("%s sit directly on the request of a %s object, which is right for that version; but an API server serves it only where its runtime config turns it on (beta APIs are off by default; v1beta1 is deprecated from 1.35 and removed in 1.38, v1alpha3 claims are no longer served), while resource.k8s.io/v1, served from 1.34 on and the only version this driver is tested with, has them under exactly:", strings.Join(flat, ", "), v)
				hint = "make it apiVersion: resource.k8s.io/v1 and move them under exactly:\n- name: " + name + "\n  exactly:\n    deviceClassName: ..."
			}
			// exactly: giving other values for them leaves which were
			// meant to the user: no fix overwrites one.
			var clash []string
			if ex, ok := req["exactly"].(map[string]any); ok {
				for _, k := range flat {
					if v, set := ex[k]; set && !equality.Semantic.DeepEqual(v, req[k]) {
						clash = append(clash, k)
					}
				}
			}
			if len(clash) > 0 {
				c.add(rp, what+fmt.Sprintf("; exactly: gives other values for %s, so no fix is offered", strings.Join(clash, ", ")),
					"keep the values meant under exactly: and delete the others from the request", nil)
				// Checked, with no fix: which values are meant is the
				// user's to say.
				c.deviceRequest(rp, req, name, keys, i, "unfixed")
				continue
			}
			c.add(rp, what, hint,
				func(o map[string]any) {
					req := requestAt(o, keys, i)
					if req == nil {
						return
					}
					// exactly: exists from resource.k8s.io/v1beta2 on.
					if v, _ := o["apiVersion"].(string); flatRequestVersions[v] {
						o["apiVersion"] = "resource.k8s.io/v1"
					}
					ex, _ := req["exactly"].(map[string]any)
					if ex == nil {
						ex = map[string]any{}
						req["exactly"] = ex
					}
					for _, k := range flat {
						ex[k] = req[k]
						delete(req, k)
					}
					if m, _ := ex["allocationMode"].(string); allocationMode(m) != "" {
						ex["allocationMode"] = allocationMode(m)
					}
				})
			// The moved fields are checked too.
			c.deviceRequest(rp, req, name, keys, i, "")
		}
	}
	c.constraintRequests(base, spec)
	for i, k := range listAt(spec, "devices", "constraints") {
		con, ok := k.(map[string]any)
		if !ok {
			continue
		}
		if ma, _ := con["matchAttribute"].(string); ma != "" {
			domain, attr, found := strings.Cut(ma, "/")
			p := fmt.Sprintf("%s.constraints[%d].matchAttribute", base, i)
			if !found {
				c.add(p, fmt.Sprintf("%q is not fully qualified: matchAttribute names DOMAIN/ATTRIBUTE", ma),
					"e.g. matchAttribute: "+defaultDrivers[0]+"/parentUUID (devices of one GPU)", nil)
				continue
			}
			c.attribute(p, "attributes", domain, attr)
		}
	}
}

// allocationMode is the allocation mode a misspelt one means: ExactCount
// for "Count" (resource.k8s.io/v1alpha3's name) or a case variant of
// ExactCount, All for a case variant of All; "" where the meaning is not
// clear, or mode is right already.
func allocationMode(mode string) string {
	switch {
	case mode == "ExactCount" || mode == "All":
		return ""
	case strings.EqualFold(mode, "Count") || strings.EqualFold(mode, "ExactCount"):
		return "ExactCount"
	case strings.EqualFold(mode, "All"):
		return "All"
	}
	return ""
}

// requestAt finds requests[i] of the claim spec at keys in obj.
func requestAt(obj map[string]any, keys []string, i int) map[string]any {
	reqs := listAt(mapAt(obj, keys...), "devices", "requests")
	if i >= len(reqs) {
		return nil
	}
	r, _ := reqs[i].(map[string]any)
	return r
}

// deviceRequest checks an ExactDeviceRequest or DeviceSubRequest: the
// allocation mode, the class and the selectors. where locates it again for a
// fix: "exactly", "firstAvailable" with its index, or "" (flat); "unfixed"
// applies no fix (the flat request's values clash with exactly:'s).
func (c *checker) deviceRequest(p string, r map[string]any, reqName string, keys []string, i int, where string, sub ...int) {
	locate := func(o map[string]any) map[string]any {
		req := requestAt(o, keys, i)
		switch where {
		case "exactly":
			m, _ := req["exactly"].(map[string]any)
			return m
		case "firstAvailable":
			l, _ := req["firstAvailable"].([]any)
			if len(sub) == 1 && sub[0] < len(l) {
				m, _ := l[sub[0]].(map[string]any)
				return m
			}
			return nil
		case "unfixed":
			return nil
		}
		if ex, ok := req["exactly"].(map[string]any); ok {
			return ex // fields moved there by the fix of the flat request
		}
		return req
	}
	if mode, ok := r["allocationMode"].(string); ok && mode != "ExactCount" && mode != "All" {
		count := "count: 1"
		if n, ok := r["count"]; ok {
			count = fmt.Sprintf("count: %v", n)
		}
		problem := fmt.Sprintf("%q is not an allocation mode: the modes are ExactCount (count devices) and All (every matching device); the API server refuses it (Unsupported value: %q)", mode, mode)
		fix := "allocationMode: ExactCount\n" + count + "\n(or leave both out: ExactCount with count 1 is the default)"
		fixed := allocationMode(mode)
		if _, counted := r["count"]; fixed == "All" && counted {
			// All takes no count (the API server refuses one): which
			// was meant is the user's to say.
			fixed = ""
		}
		switch {
		case mode == "Count":
			problem = `"Count" is not an allocation mode: a fixed number of devices is ExactCount (All takes every matching device); the API server refuses it (Unsupported value: "Count")`
		case fixed != "":
			problem = fmt.Sprintf("%q is not an allocation mode: the modes are case-sensitive, %s is meant; the API server refuses it (Unsupported value: %q)", mode, fixed, mode)
			fix = "allocationMode: " + fixed
		default:
			fix += " or allocationMode: All; which one is meant is left to you"
		}
		var apply func(map[string]any)
		if fixed != "" {
			apply = func(o map[string]any) {
				if m := locate(o); m != nil && m["allocationMode"] != nil {
					m["allocationMode"] = fixed
				}
			}
		}
		c.add(p+".allocationMode", problem, fix, apply)
	}
	c.requestCount(p, r)
	if class, ok := r["deviceClassName"].(string); ok && class != "" && !c.world.classes[class] {
		known := sortedKeys(c.world.classes)
		fix := "deviceClassName: one of " + strings.Join(known, ", ")
		if n := nearest(class, known); n != "" {
			fix = "deviceClassName: " + n + " (closest name); the classes are " + strings.Join(known, ", ")
		}
		if len(known) == 0 {
			fix = "install the DRA driver's DeviceClasses (miglayout's chart installs mig.miglayout.io and gpu.miglayout.io)"
		}
		c.add(p+".deviceClassName", fmt.Sprintf("no DeviceClass %q exists (%s): the claim would never be allocated", class, c.classSource()), fix, nil)
	}
	for j, s := range listAt(r, "selectors") {
		if sel, ok := s.(map[string]any); ok {
			c.cel(fmt.Sprintf("%s.selectors[%d].cel.expression", p, j), stringAt(sel, "cel", "expression"), reqName)
		}
	}
}

func (c *checker) classSource() string {
	if strings.HasPrefix(c.world.source, "the devices published") {
		return "in the cluster"
	}
	return "among " + strings.Join(sortedKeys(c.world.classes), ", ")
}

// attrRE finds device.attributes['domain'].name (or ["name"], or .?name)
// and device.capacity[...] references in CEL.
var attrRE = regexp.MustCompile(`device\.(attributes|capacity)\[\s*(?:'([^']*)'|"([^"]*)")\s*\](?:\s*\.\s*\??\s*([A-Za-z_][A-Za-z0-9_]*)|\s*\[\s*(?:'([^']*)'|"([^"]*)")\s*\])`)

// hasRE ends where a has() macro opens: a reference right after it is
// tested for presence, not read.
var hasRE = regexp.MustCompile(`\bhas\(\s*$`)

// cel checks the attribute and capacity names a CEL selector reads. One the
// expression also tests with has() is left alone: a selector written for
// several drivers guards the attributes only some publish (has() of an
// absent key is false, not an error).
func (c *checker) cel(p, expr, _ string) {
	if !c.celCompiles(p, expr) {
		return
	}
	seen, guarded := map[string]bool{}, map[string]bool{}
	matches := attrRE.FindAllStringSubmatchIndex(expr, -1)
	for _, m := range matches {
		if hasRE.MatchString(expr[:m[0]]) {
			guarded[celRef(expr, m)] = true
		}
	}
	for _, m := range matches {
		ref := celRef(expr, m)
		if seen[ref] {
			continue
		}
		seen[ref] = true
		kind, domain, name := celPart(expr, m, 1), celPart(expr, m, 2)+celPart(expr, m, 3), celPart(expr, m, 4)+celPart(expr, m, 5)+celPart(expr, m, 6)
		if guarded[ref] {
			c.guardedAttribute(p, kind, domain, name)
			continue
		}
		c.attribute(p, kind, domain, name)
	}
}

// guardedAttribute reports an attribute (or capacity) the selector tests
// with has() that no device has, only where it looks like a misspelling of
// one of the domain's (nearest): has() is then false on every device, and
// the part of the selector it guards never holds. Another driver's name
// in a selector written for several is left alone.
func (c *checker) guardedAttribute(p, kind, domain, name string) {
	table, noun := c.world.attrs, "attribute"
	if kind == "capacity" {
		table, noun = c.world.caps, "capacity"
	}
	names, ok := table[domain]
	if !ok || names[name] {
		return
	}
	if n := nearest(name, sortedKeys(names)); n != "" {
		c.add(p, fmt.Sprintf("no device has the %s %s/%s (%s): has() of it is false on every device, so what it guards never holds", noun, domain, name, c.world.source),
			fmt.Sprintf("device.%s['%s'].%s", kind, domain, n), nil)
	}
}

// celPart is submatch i of attrRE's match m (indices) in expr, "" where it
// did not take part.
func celPart(expr string, m []int, i int) string {
	if m[2*i] < 0 {
		return ""
	}
	return expr[m[2*i]:m[2*i+1]]
}

// celRef names the attribute or capacity attrRE's match m refers to.
func celRef(expr string, m []int) string {
	return celPart(expr, m, 1) + "/" + celPart(expr, m, 2) + celPart(expr, m, 3) + "/" + celPart(expr, m, 4) + celPart(expr, m, 5) + celPart(expr, m, 6)
}

// attribute reports an attribute (or capacity) no device has.
func (c *checker) attribute(p, kind, domain, name string) {
	table := c.world.attrs
	noun := "attribute"
	if kind == "capacity" {
		table, noun = c.world.caps, "capacity"
	}
	names, ok := table[domain]
	if ok && names[name] {
		return
	}
	if !ok {
		var domains []string
		for d := range table {
			domains = append(domains, d)
		}
		slices.Sort(domains)
		fix := "use the domain of the driver that publishes the devices: " + strings.Join(domains, ", ")
		if n := nearest(domain, domains); n != "" {
			fix = fmt.Sprintf("device.%s['%s'].%s", kind, n, name)
		}
		c.add(p, fmt.Sprintf("no device has %ss in domain %q (%s): the expression fails on every device and the claim is never allocated", noun, domain, c.world.source), fix, nil)
		return
	}
	known := sortedKeys(names)
	fix := fmt.Sprintf("the %ss in %s are: %s", noun, domain, strings.Join(known, ", "))
	if n := nearest(name, known); n != "" {
		fix = fmt.Sprintf("device.%s['%s'].%s (the %ss in %s are: %s)", kind, domain, n, noun, domain, strings.Join(known, ", "))
	} else if in := domainsWith(table, name); len(in) > 0 {
		// Another domain's name, as the standard topology attributes
		// (resource.kubernetes.io/pcieRoot, numaNode) read under the
		// driver's.
		fix = fmt.Sprintf("%s is in domain %s: device.%s['%s'].%s, or %s/%s in a matchAttribute", name, in[0], kind, in[0], name, in[0], name)
	}
	c.add(p, fmt.Sprintf("no device has the %s %s/%s (%s): reading it is a CEL error on every device, so the claim is never allocated", noun, domain, name, c.world.source), fix, nil)
}

// domainsWith returns, sorted, the domains of table that have name.
func domainsWith(table map[string]map[string]bool, name string) []string {
	var out []string
	for d, names := range table {
		if names[name] {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// podSpec checks the resource claims of a pod spec at keys.
func (c *checker) podSpec(obj map[string]any, keys []string) {
	spec := mapAt(obj, keys...)
	base := pathOf(keys)
	c.podClaimEntries(base, spec)
	defined := map[string]bool{}
	for i, r := range listAt(spec, "resourceClaims") {
		rc, ok := r.(map[string]any)
		if !ok {
			continue
		}
		name, _ := rc["name"].(string)
		defined[name] = true
		src, ok := rc["source"].(map[string]any)
		if !ok {
			continue
		}
		var fields []string
		for _, k := range []string{"resourceClaimName", "resourceClaimTemplateName"} {
			if v, ok := src[k].(string); ok {
				if v == "" {
					v = `""` // an empty name, written so; the entry's finding says it is refused
				}
				fields = append(fields, k+": "+v)
			}
		}
		fix := "resourceClaims:\n- name: " + name
		for _, f := range fields {
			fix += "\n  " + f
		}
		problem := "source was removed from pod resource claims (Kubernetes 1.31): the API server refuses it as an unknown field, or drops it and then refuses the entry (must specify one of: `resourceClaimName`, `resourceClaimTemplateName`)"
		_, topClaim := rc["resourceClaimName"]
		_, topTemplate := rc["resourceClaimTemplateName"]
		if len(fields) > 1 || ((topClaim || topTemplate) && len(fields) > 0) {
			// Which one is meant is the user's to say (podClaimEntries
			// tells it too).
			c.add(fmt.Sprintf("%s.resourceClaims[%d].source", base, i), problem, fix+"\n(keeping only the one meant)", nil)
			continue
		}
		c.add(fmt.Sprintf("%s.resourceClaims[%d].source", base, i), problem,
			fix, func(o map[string]any) {
				l := listAt(o, append(keys, "resourceClaims")...)
				if i >= len(l) {
					return
				}
				rc, _ := l[i].(map[string]any)
				src, _ := rc["source"].(map[string]any)
				for k, v := range src {
					rc[k] = v
				}
				delete(rc, "source")
			})
	}
	containers := map[string][]string{}
	var names []string
	for _, group := range []string{"initContainers", "containers"} {
		for i, ct := range listAt(spec, group) {
			m, ok := ct.(map[string]any)
			if !ok {
				continue
			}
			if group == "containers" {
				n, _ := m["name"].(string)
				names = append(names, n)
			}
			c.containerClaimsTwice(fmt.Sprintf("%s.%s[%d]", base, group, i), m)
			for j, cl := range listAt(m, "resources", "claims") {
				cm, _ := cl.(map[string]any)
				n, _ := cm["name"].(string)
				containers[n] = append(containers[n], fmt.Sprintf("%s[%d]", group, i))
				if !defined[n] {
					c.add(fmt.Sprintf("%s.%s[%d].resources.claims[%d].name", base, group, i, j),
						fmt.Sprintf("%q names no entry of %s.resourceClaims: the API server refuses the pod", n, base),
						fmt.Sprintf("add it to %s.resourceClaims:\nresourceClaims:\n- name: %s\n  resourceClaimTemplateName: ...   (or resourceClaimName)", base, n), nil)
				}
			}
		}
	}
	podClaims := listAt(spec, "resources", "claims")
	if len(podClaims) == 0 {
		return
	}
	var claimNames []string
	for _, cl := range podClaims {
		if cm, ok := cl.(map[string]any); ok {
			if n, ok := cm["name"].(string); ok {
				claimNames = append(claimNames, n)
			}
		}
	}
	var fix strings.Builder
	fix.WriteString("containers:")
	for _, n := range names {
		fmt.Fprintf(&fix, "\n- name: %s\n  resources:\n    claims:", n)
		for _, cn := range claimNames {
			fmt.Fprintf(&fix, "\n    - name: %s", cn)
		}
	}
	fix.WriteString("\n(only in the containers that use the devices)")
	c.add(base+".resources.claims",
		"claims belong to containers, not to pod-level resources: the API server refuses them there (claims may not be set for Resources at pod-level), and no container would see the devices",
		fix.String(), func(o map[string]any) {
			s := mapAt(o, keys...)
			res := mapAt(s, "resources")
			claims, _ := res["claims"].([]any)
			delete(res, "claims")
			if len(res) == 0 {
				delete(s, "resources")
			}
			for _, ct := range listAt(s, "containers") {
				m, ok := ct.(map[string]any)
				if !ok {
					continue
				}
				r, _ := m["resources"].(map[string]any)
				if r == nil {
					r = map[string]any{}
					m["resources"] = r
				}
				have, _ := r["claims"].([]any)
				for _, cl := range claims {
					cm, _ := cl.(map[string]any)
					dup := false
					for _, h := range have {
						if hm, _ := h.(map[string]any); hm["name"] == cm["name"] && hm["request"] == cm["request"] {
							dup = true
						}
					}
					if !dup {
						moved := map[string]any{"name": cm["name"]}
						if req, ok := cm["request"]; ok {
							moved["request"] = req
						}
						have = append(have, moved)
					}
				}
				r["claims"] = have
			}
		})
}

func writeFindings(w io.Writer, docs []*document, findings []finding) {
	if len(findings) == 0 {
		fmt.Fprintf(w, "No problems found in %s.\n", plural(len(docs), "object"))
		return
	}
	var last *document
	objects := 0
	for _, f := range findings {
		if f.doc != last {
			if last != nil {
				fmt.Fprintln(w)
			}
			fmt.Fprintln(w, f.doc.describe())
			last = f.doc
			objects++
		}
		fmt.Fprintf(w, "  %s\n", f.path)
		fmt.Fprintf(w, "    problem: %s\n", f.problem)
		lines := strings.Split(f.fix, "\n")
		fmt.Fprintf(w, "    fix:     %s\n", lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "             %s\n", l)
		}
	}
	fmt.Fprintf(w, "\n%s in %s.\n", plural(len(findings), "problem"), plural(objects, "object"))
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// fixDocuments returns copies of the documents with the fixable findings
// applied.
func fixDocuments(docs []*document, findings []finding) []map[string]any {
	out := make([]map[string]any, len(docs))
	index := map[*document]int{}
	for i, d := range docs {
		out[i] = deepCopy(d.Object)
		index[d] = i
	}
	for _, f := range findings {
		if f.apply != nil {
			f.apply(out[index[f.doc]])
		}
	}
	return out
}

// deepCopy copies a document read by readManifests (JSON values, whole
// numbers as int64) keeping every number as it is.
func deepCopy(m map[string]any) map[string]any {
	return runtime.DeepCopyJSON(m)
}

// writeYAML prints objects as a YAML stream.
func writeYAML(w io.Writer, objs []map[string]any) error {
	for i, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}
