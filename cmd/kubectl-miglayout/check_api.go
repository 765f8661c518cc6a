package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/ptr"

	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// The checks of this file find what the API server's validation of
// resource.k8s.io/v1 and core/v1 refuses in fields the mistakes of older
// snippets do not touch: a selector that does not compile, a count beside
// allocationMode All, a constraint naming no request, a pod claim entry
// without exactly one source, names given twice. None has a mechanical fix.

// celCompiles reports a CEL selector the API server refuses: one that does
// not compile in the environment of new expressions (k8s.io/dynamic-
// resource-allocation/cel, as the API server's validation of DeviceClasses
// and claims), does not yield a bool, or whose estimated cost exceeds
// resourceapi.CELSelectorExpressionMaxCost.
func (c *checker) celCompiles(p, expr string) bool {
	if strings.TrimSpace(expr) == "" {
		c.add(p, "the expression is empty: the API server refuses it (Required value)", "write a CEL expression that yields a bool, e.g. device.driver == '"+defaultDrivers[0]+"'", nil)
		return false
	}
	// Features the API server of 1.37 may have on: with them on, no
	// selector it accepts is refused here.
	compiler := dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true})
	res := compiler.CompileCELExpression(expr, dracel.Options{EnvType: ptr.To(environment.NewExpressions)})
	switch {
	case res.Error != nil:
		c.add(p, "the CEL expression is no valid selector: the API server refuses it ("+res.Error.Detail+")",
			"correct the expression; it reads device.driver, device.attributes['DOMAIN'].NAME and device.capacity['DOMAIN'].NAME and yields a bool", nil)
		return false
	case res.MaxCost > resourceapi.CELSelectorExpressionMaxCost:
		c.add(p, fmt.Sprintf("the CEL expression's estimated cost, %d, exceeds the %d the API server allows: it refuses the expression as too complex", res.MaxCost, resourceapi.CELSelectorExpressionMaxCost),
			"simplify the expression (fewer comprehensions over lists or maps)", nil)
		return false
	}
	return true
}

// requestCount reports a count the API server refuses beside the request's
// allocation mode: one other than 0 with All, a negative one with
// ExactCount (the default mode). A count of 0 is the field left out: the
// API server makes it 1 under ExactCount.
func (c *checker) requestCount(p string, r map[string]any) {
	var v float64
	switch n := r["count"].(type) {
	case int64:
		v = float64(n)
	case float64:
		v = n
	default:
		return
	}
	switch mode, _ := r["allocationMode"].(string); mode {
	case "All":
		if v != 0 {
			c.add(p+".count", "count is set beside allocationMode: All, which takes every matching device: the API server refuses it (must not be specified when allocationMode is 'All')",
				"delete count (every matching device), or make it allocationMode: ExactCount to get that many", nil)
		}
	case "ExactCount", "":
		if v < 0 {
			c.add(p+".count", fmt.Sprintf("count is %v: the API server refuses a negative count (must be greater than zero)", v), "count: 1 or more", nil)
		}
	}
}

// constraintRequests reports the requests a constraint of the claim spec
// names that are not requests of the claim (or subrequests of a
// firstAvailable request, as REQUEST/SUBREQUEST): the API server refuses
// them.
func (c *checker) constraintRequests(base string, spec map[string]any) {
	subs := map[string]map[string]bool{} // subrequest names by request
	for _, r := range listAt(spec, "devices", "requests") {
		req, _ := r.(map[string]any)
		name, _ := req["name"].(string)
		subs[name] = map[string]bool{}
		for _, s := range listAt(req, "firstAvailable") {
			if sub, ok := s.(map[string]any); ok {
				if n, ok := sub["name"].(string); ok {
					subs[name][n] = true
				}
			}
		}
	}
	for i, k := range listAt(spec, "devices", "constraints") {
		con, _ := k.(map[string]any)
		for j, r := range listAt(con, "requests") {
			name, _ := r.(string)
			req, sub, nested := strings.Cut(name, "/")
			known, ok := subs[req]
			if ok && (!nested || known[sub]) {
				continue
			}
			c.add(fmt.Sprintf("%s.constraints[%d].requests[%d]", base, i, j),
				fmt.Sprintf("%q names no request of the claim: the API server refuses it (must be the name of a request in the claim, or of a subrequest as REQUEST/SUBREQUEST)", name),
				"name one of the claim's requests: "+strings.Join(slices.Sorted(maps.Keys(subs)), ", "), nil)
		}
	}
}

// podClaimEntries reports what the API server refuses in the resourceClaims
// of the pod spec at path base beyond a source: field: an entry without a
// name, a name given twice, an entry with neither or both of
// resourceClaimName and resourceClaimTemplateName (on the entry or under
// source:, which the source: finding moves up; a key given as "" counts as
// given, as in the API server's validatePodResourceClaim), and a source
// given as "".
func (c *checker) podClaimEntries(base string, spec map[string]any) {
	seen := map[string]bool{}
	for i, r := range listAt(spec, "resourceClaims") {
		rc, ok := r.(map[string]any)
		if !ok {
			continue
		}
		p := fmt.Sprintf("%s.resourceClaims[%d]", base, i)
		name, _ := rc["name"].(string)
		switch {
		case name == "":
			c.add(p+".name", "the entry has no name: the API server refuses the pod (Required value)",
				"name: NAME (what the containers' resources.claims name)", nil)
		case seen[name]:
			c.add(p+".name", fmt.Sprintf("%q names another entry already: the API server refuses the pod (Duplicate value)", name), "give each entry its own name", nil)
		default:
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				c.add(p+".name", fmt.Sprintf("%q: the API server refuses the pod (%s)", name, strings.Join(errs, "; ")),
					"a DNS label: lower-case letters, digits and '-', at most 63 characters", nil)
			}
		}
		seen[name] = true
		src, _ := rc["source"].(map[string]any)
		sources := 0
		for _, k := range []string{"resourceClaimName", "resourceClaimTemplateName"} {
			top, onEntry := rc[k].(string)
			under, underSource := src[k].(string)
			if onEntry || underSource {
				sources++
			}
			// A name under source: is checked as the entry's, where the
			// source: finding's fix would move it there.
			named, at := top, p+"."+k
			if !onEntry {
				named, at = under, p+".source."+k
			}
			if (onEntry || underSource) && named != "" {
				if errs := validation.IsDNS1123Subdomain(named); len(errs) > 0 {
					c.add(at, fmt.Sprintf("%q: the API server refuses the pod (%s)", named, strings.Join(errs, "; ")),
						"the name of a "+map[bool]string{true: "ResourceClaim", false: "ResourceClaimTemplate"}[k == "resourceClaimName"]+" of the namespace", nil)
				}
			}
			if onEntry && top == "" {
				c.add(p+"."+k, k+` is "": the API server refuses the pod (an empty name is invalid, and counts as given beside the other source)`,
					"remove the key, or give the name meant", nil)
			} else if underSource && under == "" && !onEntry {
				c.add(p+".source."+k, k+` is "": moved onto the entry, the API server refuses it (an empty name is invalid)`,
					"remove the key, or give the name meant", nil)
			}
		}
		switch sources {
		case 0:
			c.add(p, "the entry names no claim: the API server refuses it (must specify one of: `resourceClaimName`, `resourceClaimTemplateName`)",
				"resourceClaimName: NAME (a ResourceClaim of the namespace) or resourceClaimTemplateName: NAME (a claim made per pod)", nil)
		case 2:
			c.add(p, "the entry gives both resourceClaimName and resourceClaimTemplateName: the API server refuses it (at most one of them may be given, even as \"\")",
				"keep the one meant: resourceClaimName (a claim pods share) or resourceClaimTemplateName (a claim per pod)", nil)
		}
	}
}

// containerClaimsTwice reports a container's resources.claims entry that
// repeats an earlier one (the same name and request) or names a claim the
// container also lists whole and by request: the API server refuses the
// pod (validateResourceClaimNames: Duplicate value).
func (c *checker) containerClaimsTwice(p string, container map[string]any) {
	seen := map[string]bool{}
	whole, byRequest := map[string]bool{}, map[string]bool{}
	for j, cl := range listAt(container, "resources", "claims") {
		cm, _ := cl.(map[string]any)
		name, _ := cm["name"].(string)
		req, _ := cm["request"].(string)
		key := name + "/" + req
		problem := ""
		switch {
		case name == "":
		case seen[key]:
			problem = fmt.Sprintf("claim %q%s is listed twice: the API server refuses the pod (Duplicate value)", name, requestSuffix(req))
		case req == "" && byRequest[name], req != "" && whole[name]:
			problem = fmt.Sprintf("claim %q is listed whole and by request: the API server refuses the pod (Duplicate value)", name)
		}
		if problem != "" {
			c.add(fmt.Sprintf("%s.resources.claims[%d]", p, j), problem, "list each claim once: whole (every request) or by its requests", nil)
		}
		seen[key] = true
		if req == "" {
			whole[name] = true
		} else {
			byRequest[name] = true
		}
	}
}

// requestSuffix is ", request R" for a request name, "" for none.
func requestSuffix(req string) string {
	if req == "" {
		return ""
	}
	return ", request " + req
}
