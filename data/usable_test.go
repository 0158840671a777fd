package data

import (
	"fmt"
	"math"
)

// usable checks, independently of validate, that every index a consumer of
// the dataset follows stays in range and every offset and length agrees:
// what FuzzReadOGB asks of each dataset ReadOGB accepts. (Asking validate
// itself could never fail there: ReadOGB returns validate's error.)
func usable(d *Dataset) error {
	g := len(d.NodePtr) - 1
	if g < 1 || len(d.BondPtr) != g+1 || d.NodePtr[0] != 0 || d.BondPtr[0] != 0 {
		return fmt.Errorf("%d atom and %d bond offsets", len(d.NodePtr), len(d.BondPtr))
	}
	if len(d.Labels) != g*len(d.Tasks) {
		return fmt.Errorf("%d labels for %d molecules × %d tasks", len(d.Labels), g, len(d.Tasks))
	}
	for m := range g {
		a0, a1, b0, b1 := d.NodePtr[m], d.NodePtr[m+1], d.BondPtr[m], d.BondPtr[m+1]
		if a1 < a0 || b1 < b0 || a1*NumAtomFeatures > int64(len(d.AtomFeat)) ||
			b1*NumBondFeatures > int64(len(d.BondFeat)) || 2*b1 > int64(len(d.BondAtoms)) {
			return fmt.Errorf("molecule %d: atoms %d..%d, bonds %d..%d out of the arrays", m, a0, a1, b0, b1)
		}
		for _, v := range d.BondAtoms[2*b0 : 2*b1] {
			if int64(v) < 0 || int64(v) >= a1-a0 {
				return fmt.Errorf("molecule %d: bond endpoint %d of %d atoms", m, v, a1-a0)
			}
		}
		for i, v := range d.AtomFeat[a0*NumAtomFeatures : a1*NumAtomFeatures] {
			if int(v) >= AtomFeatureDims[i%NumAtomFeatures] {
				return fmt.Errorf("molecule %d: atom feature %d = %d", m, i%NumAtomFeatures, v)
			}
		}
		for i, v := range d.BondFeat[b0*NumBondFeatures : b1*NumBondFeatures] {
			if int(v) >= BondFeatureDims[i%NumBondFeatures] {
				return fmt.Errorf("molecule %d: bond feature %d = %d", m, i%NumBondFeatures, v)
			}
		}
	}
	last := len(d.NodePtr) - 1
	if d.NodePtr[last]*NumAtomFeatures != int64(len(d.AtomFeat)) || d.BondPtr[last]*NumBondFeatures != int64(len(d.BondFeat)) {
		return fmt.Errorf("features beyond the last molecule")
	}
	for _, v := range d.Labels {
		if math.IsInf(float64(v), 0) {
			return fmt.Errorf("label %v", v)
		}
	}
	if d.Split != nil {
		part := map[int32]int{}
		for p, idx := range [][]int32{d.Split.Train, d.Split.Valid, d.Split.Test} {
			for _, i := range idx {
				if i < 0 || int(i) >= g {
					return fmt.Errorf("split index %d of %d molecules", i, g)
				}
				if q, ok := part[i]; ok {
					return fmt.Errorf("molecule %d in split parts %d and %d", i, q, p)
				}
				part[i] = p
			}
		}
	}
	return nil
}
