package mig

import "sort"

// Plan is the difference between a GPU's current and desired layouts.
type Plan struct {
	// Keep are devices present in both layouts (same profile, same start):
	// they are never touched.
	Keep Layout
	// Destroy are current devices absent from the desired layout, in the
	// order to destroy them (by placement start).
	Destroy Layout
	// Create are desired devices absent from the current layout, in the order
	// to create them: largest profile first, then by placement start, so that
	// a large placement is taken before small instances could fragment it.
	Create Layout
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool { return len(p.Destroy) == 0 && len(p.Create) == 0 }

// Diff returns the plan that turns current into desired while keeping every
// device both share. It does not validate either layout.
func (m *Model) Diff(current, desired Layout) Plan {
	var plan Plan
	cur, des := current.Canonical(), desired.Canonical()
	for _, d := range cur {
		if des.Contains(d) {
			plan.Keep = append(plan.Keep, d)
		} else {
			plan.Destroy = append(plan.Destroy, d)
		}
	}
	for _, d := range des {
		if !cur.Contains(d) {
			plan.Create = append(plan.Create, d)
		}
	}
	sort.SliceStable(plan.Create, func(i, j int) bool {
		a, b := plan.Create[i], plan.Create[j]
		if a.Profile != b.Profile {
			return profileLess(b.Profile, a.Profile)
		}
		return a.Start < b.Start
	})
	return plan
}
