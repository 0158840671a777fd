package rdkit

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Expected values are OGB's smiles2graph rules (docs/method.md §8) applied by hand
// to each molecule; RDKit's Python MolFromSmiles agrees on every entry.
func TestSmilesToGraph(t *testing.T) {
	type bond struct{ u, v, typ, stereo, conj int }
	tests := []struct {
		smiles string
		atoms  [][NumAtomFeatures]int
		bonds  []bond
	}{
		{
			// Acetic acid: both oxygens are sp2 (the C-O(H) bond is conjugated with C=O).
			"CC(=O)O",
			[][NumAtomFeatures]int{
				{5, 0, 4, 5, 3, 0, 2, 0, 0},
				{5, 0, 3, 5, 0, 0, 1, 0, 0},
				{7, 0, 1, 5, 0, 0, 1, 0, 0},
				{7, 0, 2, 5, 1, 0, 1, 0, 0},
			},
			[]bond{{0, 1, 0, 0, 0}, {1, 2, 1, 0, 1}, {1, 3, 0, 0, 1}},
		},
		{
			// Chirality tag CCW (@) is index 2.
			"C[C@H](N)O",
			[][NumAtomFeatures]int{
				{5, 0, 4, 5, 3, 0, 2, 0, 0},
				{5, 2, 4, 5, 1, 0, 2, 0, 0},
				{6, 0, 3, 5, 2, 0, 2, 0, 0},
				{7, 0, 2, 5, 1, 0, 2, 0, 0},
			},
			[]bond{{0, 1, 0, 0, 0}, {1, 2, 0, 0, 0}, {1, 3, 0, 0, 0}},
		},
		{
			// Trans double bond: RDKit's STEREOE is OGB's index 2.
			"C/C=C/C",
			[][NumAtomFeatures]int{
				{5, 0, 4, 5, 3, 0, 2, 0, 0},
				{5, 0, 3, 5, 1, 0, 1, 0, 0},
				{5, 0, 3, 5, 1, 0, 1, 0, 0},
				{5, 0, 4, 5, 3, 0, 2, 0, 0},
			},
			[]bond{{0, 1, 0, 0, 0}, {1, 2, 1, 2, 0}, {2, 3, 0, 0, 0}},
		},
		{
			// Dummy atom: atomic number 0 is "misc" (118); unspecified hybridisation is misc (5).
			"*C",
			[][NumAtomFeatures]int{
				{118, 0, 1, 5, 0, 0, 5, 0, 0},
				{5, 0, 4, 5, 3, 0, 2, 0, 0},
			},
			[]bond{{0, 1, 0, 0, 0}},
		},
		{
			// Charge +1 is index 6; four hydrogens; no bonds.
			"[NH4+]",
			[][NumAtomFeatures]int{{6, 0, 4, 6, 4, 0, 2, 0, 0}},
			nil,
		},
		{
			// Aromatic ring: aromatic bonds (3), ring closure bond listed last.
			"c1ccccn1",
			[][NumAtomFeatures]int{
				{5, 0, 3, 5, 1, 0, 1, 1, 1},
				{5, 0, 3, 5, 1, 0, 1, 1, 1},
				{5, 0, 3, 5, 1, 0, 1, 1, 1},
				{5, 0, 3, 5, 1, 0, 1, 1, 1},
				{5, 0, 3, 5, 1, 0, 1, 1, 1},
				{6, 0, 2, 5, 0, 0, 1, 1, 1},
			},
			[]bond{{0, 1, 3, 0, 1}, {1, 2, 3, 0, 1}, {2, 3, 3, 0, 1}, {3, 4, 3, 0, 1}, {4, 5, 3, 0, 1}, {5, 0, 3, 0, 1}},
		},
		{
			// Triple bond and sp carbon/nitrogen (hybridisation index 0).
			"C#N",
			[][NumAtomFeatures]int{
				{5, 0, 2, 5, 1, 0, 0, 0, 0},
				{6, 0, 1, 5, 0, 0, 0, 0, 0},
			},
			[]bond{{0, 1, 2, 0, 0}},
		},
		{
			// Radical carbon: one radical electron.
			"[CH2]C",
			[][NumAtomFeatures]int{
				{5, 0, 3, 5, 2, 1, 2, 0, 0},
				{5, 0, 4, 5, 3, 0, 2, 0, 0},
			},
			[]bond{{0, 1, 0, 0, 0}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.smiles, func(t *testing.T) {
			g, err := SmilesToGraph(tc.smiles, false)
			if err != nil {
				t.Fatal(err)
			}
			if g.NumAtoms() != len(tc.atoms) || g.NumBonds() != len(tc.bonds) {
				t.Fatalf("%d atoms, %d bonds; want %d, %d", g.NumAtoms(), g.NumBonds(), len(tc.atoms), len(tc.bonds))
			}
			for i, want := range tc.atoms {
				var got [NumAtomFeatures]int
				for j := range got {
					got[j] = int(g.AtomFeatures[i*NumAtomFeatures+j])
				}
				if got != want {
					t.Errorf("atom %d: %v, want %v", i, got, want)
				}
			}
			for i, want := range tc.bonds {
				got := bond{int(g.BondAtoms[2*i]), int(g.BondAtoms[2*i+1]),
					int(g.BondFeatures[3*i]), int(g.BondFeatures[3*i+1]), int(g.BondFeatures[3*i+2])}
				if got != want {
					t.Errorf("bond %d: %v, want %v", i, got, want)
				}
			}
			if g.Scaffold != "" {
				t.Errorf("scaffold %q computed although not asked for", g.Scaffold)
			}
		})
	}
}

func TestSmilesToGraphRejects(t *testing.T) {
	tests := []struct{ smiles, reason string }{
		{"C1CC", "unclosed ring"},
		{"C(C)(C)(C)(C)C", "Explicit valence for atom # 0 C, 5"},
		{"", "empty SMILES"},
		{"CC)", "Parse Error"},
	}
	for _, tc := range tests {
		_, err := SmilesToGraph(tc.smiles, true)
		if err == nil || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("SmilesToGraph(%q): error %v, want one containing %q", tc.smiles, err, tc.reason)
		}
	}
}

// Scaffolds as RDKit's Python MurckoScaffoldSmiles(includeChirality=True)
// gives them; the chiral ones come from ogbg-molbace.
func TestMurckoScaffold(t *testing.T) {
	tests := []struct{ smiles, scaffold string }{
		{"CCO", ""},
		{"[O-][N+](=O)c1ccc(Cl)cc1", "c1ccccc1"},
		{"C[C@H]1CC[C@@H](c2ccccc2)CC1", "c1ccc(C2CCCCC2)cc1"},
		{"Brc1cc2c(OC(C[C@@]23N=C(N)N(C)C3=O)(C)C)cc1", "O=C1NC=N[C@@]12CCOc1ccccc12"},
		{"O=C1N(C)C(=NC(C1)(C)[C@H]1C[C@@H]1c1ccccc1)N", "O=C1CC([C@H]2C[C@@H]2c2ccccc2)N=CN1"},
	}
	for _, tc := range tests {
		got, err := MurckoScaffold(tc.smiles)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.scaffold {
			t.Errorf("MurckoScaffold(%q) = %q, want %q", tc.smiles, got, tc.scaffold)
		}
		g, err := SmilesToGraph(tc.smiles, true)
		if err != nil {
			t.Fatal(err)
		}
		if g.Scaffold != tc.scaffold {
			t.Errorf("SmilesToGraph(%q).Scaffold = %q, want %q", tc.smiles, g.Scaffold, tc.scaffold)
		}
	}
	if _, err := MurckoScaffold("C1CC"); err == nil {
		t.Error("MurckoScaffold accepted an invalid SMILES")
	}
}

// The error of a failing call must be that call's own, also when other
// goroutines fail differently at the same time.
func TestConcurrentErrorsStayWithTheirCall(t *testing.T) {
	cases := []struct{ smiles, reason string }{
		{"C1CC", "unclosed ring"},
		{"C(C)(C)(C)(C)C", "Explicit valence"},
		{"c1ccccc1", ""},
	}
	var wg sync.WaitGroup
	errs := make(chan string, 300)
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				c := cases[(w+i)%len(cases)]
				_, err := SmilesToGraph(c.smiles, false)
				switch {
				case c.reason == "" && err != nil:
					errs <- c.smiles + ": " + err.Error()
				case c.reason != "" && (err == nil || !strings.Contains(err.Error(), c.reason)):
					errs <- c.smiles + ": wrong error " + strings.TrimSpace(errString(err))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestDepictSVG(t *testing.T) {
	plain, err := DepictSVG("c1ccccc1CC(=O)O", nil, 300, 200)
	if err != nil {
		t.Fatal(err)
	}
	marked, err := DepictSVG("c1ccccc1CC(=O)O", []int{0, 1, 2, 3, 4, 5}, 300, 200)
	if err != nil {
		t.Fatal(err)
	}
	for _, svg := range []string{plain, marked} {
		if !strings.Contains(svg, "<svg") || !strings.Contains(svg, "width='300px'") || !strings.HasSuffix(strings.TrimSpace(svg), "</svg>") {
			t.Fatalf("not a 300px-wide SVG document:\n%.300s", svg)
		}
	}
	// RDKit draws highlights as filled shapes in its default highlight colour (#FF7F7F).
	if strings.Contains(plain, "#FF7F7F") || !strings.Contains(marked, "#FF7F7F") {
		t.Errorf("highlight colour: plain %v, highlighted %v", strings.Contains(plain, "#FF7F7F"), strings.Contains(marked, "#FF7F7F"))
	}
	if _, err := DepictSVG("CCO", []int{3}, 300, 200); err == nil || !strings.Contains(err.Error(), "highlighted atom 3") {
		t.Errorf("out-of-range highlight: %v", err)
	}
	if _, err := DepictSVG("CCO", nil, 0, 200); err == nil {
		t.Error("zero width accepted")
	}
}

func TestLoadFromReportsEverySearchedPath(t *testing.T) {
	dir := t.TempDir()
	notLib := filepath.Join(dir, "libmgchem.so")
	if err := os.WriteFile(notLib, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "absent", "libmgchem.so")
	err := loadFrom([]string{missing, notLib})
	if err == nil {
		t.Fatal("loading a non-library succeeded")
	}
	for _, want := range []string{missing + " (absent)", notLib + " (", "run `make`", LibraryEnv} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestSearchPathStartsWithEnvironment(t *testing.T) {
	t.Setenv(LibraryEnv, "/opt/chem/libmgchem.so")
	paths := searchPath()
	if len(paths) < 2 || paths[0] != "/opt/chem/libmgchem.so" {
		t.Fatalf("search path %v does not start with $%s", paths, LibraryEnv)
	}
	last := paths[len(paths)-1]
	if filepath.Base(filepath.Dir(filepath.Dir(last))) != "build" {
		t.Errorf("last candidate %s is not the module's build/lib", last)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(last), "..", "..", "go.mod")); err != nil {
		t.Errorf("last candidate %s is not inside the module: %v", last, err)
	}
}

func TestRDKitVersion(t *testing.T) {
	v, err := RDKitVersion()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "20") || strings.Count(v, ".") != 2 {
		t.Errorf("RDKit version %q is not YYYY.MM.R", v)
	}
}

// FragmentSMILES cuts a fragment out of a molecule as RDKit writes it: the
// benzene ring of benzoic acid stays aromatic, its carboxyl comes out as
// the canonical O=CO, and out-of-range atoms are an error naming the atom.
func TestFragmentSMILES(t *testing.T) {
	const benzoic = "OC(=O)c1ccccc1" // atoms: O0 C1 O2 c3 … c8
	cases := []struct {
		atoms []int
		want  string
	}{
		{[]int{3, 4, 5, 6, 7, 8}, "c1ccccc1"},
		{[]int{0, 1, 2}, "O=CO"},
		{[]int{2, 1, 0}, "O=CO"},
		{[]int{1, 3}, "Cc"}, // the ring atom stays aromatic (lower case) without its ring
	}
	for _, c := range cases {
		got, err := FragmentSMILES(benzoic, c.atoms)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("atoms %v: %q, want %q", c.atoms, got, c.want)
		}
	}
	if _, err := FragmentSMILES(benzoic, []int{9}); err == nil || !strings.Contains(err.Error(), "atom 9") {
		t.Errorf("atom 9 of 9: %v", err)
	}
}

// Fragments names several pieces from one parse, each as FragmentSMILES
// names it alone, and refuses an empty piece.
func TestFragments(t *testing.T) {
	const benzoic = "OC(=O)c1ccccc1"
	pieces := [][]int{{3, 4, 5, 6, 7, 8}, {0, 1, 2}, {1, 3}, {6}}
	got, err := Fragments(benzoic, pieces)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"c1ccccc1", "O=CO", "Cc", "c"}; !slices.Equal(got, want) {
		t.Errorf("fragments %q, want %q", got, want)
	}
	if _, err := Fragments(benzoic, [][]int{{0}, {}}); err == nil {
		t.Error("an empty piece was named")
	}
}

// DepictSVGColoured fills each atom with its own colour and a bond between
// two atoms of one colour with that colour; a bond between atoms of two
// colours is not highlighted. (Colours no element is drawn in.)
func TestDepictSVGColoured(t *testing.T) {
	green, brown := Colour{0.2, 0.6, 0.4}, Colour{0.8, 0.4, 0}
	// highlightedBond is whether RDKit drew bond 0 (atoms 0–1) as a filled
	// highlight of colour hex.
	highlightedBond := func(svg, hex string) bool {
		for _, el := range strings.Split(svg, "<path ") {
			if strings.HasPrefix(el, "class='bond-0 ") && strings.Contains(el, "fill:"+hex) {
				return true
			}
		}
		return false
	}
	same, err := DepictSVGColoured("CCO", map[int]Colour{0: green, 1: green, 2: brown}, 300, 200)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(same, "#339966") || !strings.Contains(same, "#CC6600") || strings.Contains(same, "#FF7F7F") {
		t.Errorf("colours: green %v, brown %v, default %v", strings.Contains(same, "#339966"), strings.Contains(same, "#CC6600"), strings.Contains(same, "#FF7F7F"))
	}
	if !highlightedBond(same, "#339966") {
		t.Error("the bond between the two green atoms is not green")
	}
	two, err := DepictSVGColoured("CCO", map[int]Colour{0: green, 1: brown}, 300, 200)
	if err != nil {
		t.Fatal(err)
	}
	if highlightedBond(two, "#339966") || highlightedBond(two, "#CC6600") || !strings.Contains(two, "#CC6600") {
		t.Error("the bond between a green and a brown atom is highlighted, or the brown atom is not drawn")
	}
}
