package data

import (
	"reflect"
	"testing"

	"github.com/micrograph/micrograph/internal/testenv"
)

func TestPretrainFilter(t *testing.T) {
	// 0: chain of 5 atoms; 1: 3 atoms; 2: 4 atoms without bonds; 3: chain of 4
	// atoms plus an isolated ion; 4: ring of 4 atoms.
	d := &Dataset{
		NodePtr:   []int64{0, 5, 8, 12, 17, 21},
		BondPtr:   []int64{0, 4, 6, 6, 9, 13},
		BondAtoms: []int32{0, 1, 1, 2, 2, 3, 3, 4, 0, 1, 1, 2, 0, 1, 1, 2, 2, 3, 0, 1, 1, 2, 2, 3, 3, 0},
	}
	d.AtomFeat = make([]uint8, 21*NumAtomFeatures)
	d.BondFeat = make([]uint8, 13*NumBondFeatures)
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	kept, st := PretrainFilter(d, d.All(), 4)
	if !reflect.DeepEqual(kept, []int32{0, 4}) {
		t.Errorf("kept %v, want [0 4]", kept)
	}
	if want := (FilterStats{Kept: 2, TooSmall: 1, NoBonds: 1, IsolatedAtoms: 1}); st != want || st.Removed() != 3 {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	// η applies as given: with η = 6 the chain of five is too small as well.
	if kept, st := PretrainFilter(d, []int32{4, 0}, 6); len(kept) != 0 || st.TooSmall != 2 {
		t.Errorf("η=6: kept %v, stats %+v", kept, st)
	}
}

// The counts on ogbg-molhiv with η = 4, computed independently from the raw
// files: 4 molecules have fewer than 4 atoms, none has 4 or more atoms and no
// bond, and 2273 contain an atom without bonds (salts and complexes).
func TestPretrainFilterMolHIV(t *testing.T) {
	d, _, err := Load(testenv.SharedData(t, "ogb/ogbg_molhiv"), LoadOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, st := PretrainFilter(d, d.All(), 4)
	if want := (FilterStats{Kept: 38850, TooSmall: 4, NoBonds: 0, IsolatedAtoms: 2273}); st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
}
