package mig

import (
	"slices"
	"strings"
)

// MaximalLayouts returns every valid layout of model m to which no further GPU
// instance can be added, each once, in canonical text order. On an A100 this
// includes layouts such as "7g.80gb@0" and "4g.40gb@0,2g.20gb@4,1g.10gb@6".
func (m *Model) MaximalLayouts() []Layout {
	type cand struct {
		p    *Profile
		pl   Placement
		mask uint64
	}
	var cands []cand
	for i := range m.Profiles {
		p := &m.Profiles[i]
		for _, pl := range p.Placements {
			cands = append(cands, cand{p, pl, placementMask(pl)})
		}
	}
	var out []Layout
	seen := map[string]bool{}
	counts := map[*Profile]int{}
	var cur Layout
	var occ uint64
	compute := 0
	var engines mediaEngines
	fits := func(c cand) bool {
		return occ&c.mask == 0 && counts[c.p] < c.p.MaxCount &&
			compute+c.p.ComputeSlices <= m.ComputeSlices && len(cur) < m.MaxInstances && m.enginesFit(engines.plus(c.p))
	}
	var rec func(from int)
	rec = func(from int) {
		maximal := true
		for _, c := range cands {
			if fits(c) {
				maximal = false
				break
			}
		}
		if maximal {
			if k := cur.String(); !seen[k] {
				seen[k] = true
				out = append(out, cur.Canonical())
			}
			return
		}
		for i := from; i < len(cands); i++ {
			c := cands[i]
			if !fits(c) {
				continue
			}
			occ |= c.mask
			compute += c.p.ComputeSlices
			engines = engines.plus(c.p)
			counts[c.p]++
			cur = append(cur, Device{Profile: c.p.Name, Start: c.pl.Start})
			rec(i + 1)
			cur = cur[:len(cur)-1]
			counts[c.p]--
			engines = engines.minus(c.p)
			compute -= c.p.ComputeSlices
			occ &^= c.mask
		}
	}
	rec(0)
	sortLayouts(out)
	return out
}

func sortLayouts(ls []Layout) {
	slices.SortFunc(ls, func(a, b Layout) int { return strings.Compare(a.String(), b.String()) })
}
