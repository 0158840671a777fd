package infer

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/runenv"
)

// featurized is the molecules smiles, featurised by RDKit, and their host
// batch.
func featurized(t *testing.T, smiles ...string) (*data.Dataset, *feed.Batch) {
	t.Helper()
	var rows []data.Row
	for i, s := range smiles {
		rows = append(rows, data.Row{Index: i, Line: i + 2, SMILES: s})
	}
	ds, kept, _, err := data.FeaturizeRows(rows, 1, data.Limits{})
	if err != nil || len(kept) != len(smiles) {
		t.Fatalf("featurising %q: %v (kept %v)", smiles, err, kept)
	}
	var b feed.Batch
	if err := feed.Collate(ds, ds.All(), &b); err != nil {
		t.Fatal(err)
	}
	return ds, &b
}

// A hand-computed case: ethyl methyl ether CCOC (atoms 0–1–2–3 in a chain)
// and methanol CO, K = 2, τ = 0.5, with cosines chosen so that the atoms'
// motifs are 1 1 0 1 and 0 0 (methanol's carbon by a tie). Each atom's motif is its largest
// cosine (the lower index on a tie), its confidence softmax(c/τ) there, the
// pieces the chain's runs of one motif (atoms 0–1 and 3 are both motif 1 but
// not joined), and the profile the mean of the softmaxes.
func TestExplainBatchHandComputed(t *testing.T) {
	ds, _ := featurized(t, "CCOC", "CO")
	cos := []float32{
		0.1, 0.5, // atom 0: motif 1
		0.2, 0.25, // atom 1: motif 1
		0.9, 0.3, // atom 2: motif 0
		-0.4, 0.6, // atom 3: motif 1
		0.7, 0.7, // CO atom 0: a tie, motif 0
		0.3, -0.3, // CO atom 1: motif 0
	}
	got := []Explanation{
		explainMolecule(cos[:8], 2, 0.5, ds.MoleculeBonds(0)),
		explainMolecule(cos[8:], 2, 0.5, ds.MoleculeBonds(1)),
	}
	softmax := func(c0, c1 float64) (float64, float64) {
		e0, e1 := math.Exp(c0/0.5), math.Exp(c1/0.5)
		return e0 / (e0 + e1), e1 / (e0 + e1)
	}
	type want struct {
		motifs []int
		pieces [][]int // motif, then atoms
	}
	wants := []want{
		{[]int{1, 1, 0, 1}, [][]int{{1, 0, 1}, {0, 2}, {1, 3}}},
		{[]int{0, 0}, [][]int{{0, 0, 1}}},
	}
	first := 0
	for g, w := range wants {
		e := got[g]
		if !slices.Equal(e.Motifs, w.motifs) {
			t.Errorf("molecule %d: motifs %v, want %v", g, e.Motifs, w.motifs)
		}
		var pieces [][]int
		for _, p := range e.Pieces {
			pieces = append(pieces, append([]int{p.Motif}, p.Atoms...))
		}
		if !slices.EqualFunc(pieces, w.pieces, slices.Equal[[]int]) {
			t.Errorf("molecule %d: pieces %v, want %v", g, pieces, w.pieces)
		}
		var profile [2]float64
		n := len(w.motifs)
		for i := range n {
			q0, q1 := softmax(float64(cos[2*(first+i)]), float64(cos[2*(first+i)+1]))
			profile[0] += q0 / float64(n)
			profile[1] += q1 / float64(n)
			conf := []float64{q0, q1}[w.motifs[i]]
			if math.Abs(e.Confidence[i]-conf) > 1e-12 {
				t.Errorf("molecule %d atom %d: confidence %v, want %v", g, i, e.Confidence[i], conf)
			}
		}
		for k := range 2 {
			if math.Abs(e.Profile[k]-profile[k]) > 1e-12 {
				t.Errorf("molecule %d: profile %v, want %v", g, e.Profile, profile)
			}
		}
		first += n
	}
}

// testMotifModel is a randomly initialised paper-objective motif model of
// width 8, 2 layers, K = 3.
func testMotifModel(t *testing.T) *model.MotifModel {
	t.Helper()
	cfg := model.DefaultConfig()
	cfg.Encoder.Hidden, cfg.Encoder.Layers, cfg.Motifs = 8, 2, 3
	torch.ManualSeed(4)
	pre, err := model.New(cfg, torch.CPU, torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	defer pre.Free()
	m, err := model.NewMotifModel(cfg, torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Free)
	if err := m.Load(pre.Store.State()); err != nil {
		t.Fatal(err)
	}
	return m
}

// Explanations stream in input order whatever the chunk and batch sizes:
// one per row, invalid rows kept with RDKit's reason, each valid row what
// the molecule gets alone; the .csv and the .jsonl say the same; the usage
// counts every atom once and names the pieces by their SMILES.
func TestExplainKeepsRowOrderAcrossChunks(t *testing.T) {
	m := testMotifModel(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte(streamCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(streamCSV), "\n")[1:]
	valid := []int{0, 3, 4, 5}
	alone := map[int]Explanation{}
	atoms := int64(0)
	for _, i := range valid {
		ds, b := featurized(t, lines[i])
		var cos []float32
		torch.NoGrad(func() { cos = torch.ToSlice[float32](m.Cosines(b.Graph(torch.CPU))) })
		alone[i] = explainMolecule(cos, 3, m.Config.Tau, ds.MoleculeBonds(0))
		atoms += int64(b.NumAtoms())
	}
	for _, size := range []struct{ chunk, batch int }{{2, 1}, {3, 2}, {0, 0}} {
		jsonl := filepath.Join(dir, "e.jsonl")
		rep, err := Explain(m, ExplainOptions{Options: Options{Data: in, Chunk: size.chunk, BatchSize: size.batch, RDKitWorkers: 1}, PageMolecules: 5}, runenv.Default(), jsonl)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Rows != 7 || rep.Written != 7 || rep.Invalid != 3 || len(rep.Page) != 5 || !rep.Fragments {
			t.Fatalf("chunk %d: report rows %d written %d invalid %d page %d fragments %v", size.chunk, rep.Rows, rep.Written, rep.Invalid, len(rep.Page), rep.Fragments)
		}
		var counted int64
		for _, u := range rep.Usage {
			counted += u.Atoms
		}
		if counted != atoms {
			t.Errorf("chunk %d: usage counts %d atoms, want %d", size.chunk, counted, atoms)
		}
		f, err := os.Open(jsonl)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		row := 0
		for sc.Scan() {
			var e Explanation
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatal(err)
			}
			if e.Row != row || e.SMILES != lines[row] {
				t.Errorf("chunk %d: line %d is row %d %q, want row %d %q", size.chunk, row, e.Row, e.SMILES, row, lines[row])
			}
			want, ok := alone[row]
			switch {
			case !ok && (e.Error == "" || e.Motifs != nil):
				t.Errorf("chunk %d: invalid row %d: %+v, want only its reason", size.chunk, row, e)
			case ok && !slices.Equal(e.Motifs, want.Motifs):
				t.Errorf("chunk %d: row %d motifs %v, alone %v", size.chunk, row, e.Motifs, want.Motifs)
			case ok && !slices.EqualFunc(e.Profile, want.Profile, func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }):
				t.Errorf("chunk %d: row %d profile %v, alone %v", size.chunk, row, e.Profile, want.Profile)
			case ok && slices.ContainsFunc(e.Pieces, func(p Piece) bool { return p.Fragment == "" }):
				t.Errorf("chunk %d: row %d has an unnamed piece: %+v", size.chunk, row, e.Pieces)
			}
			row++
		}
		f.Close()
		if row != 7 {
			t.Errorf("chunk %d: %d lines, want 7", size.chunk, row)
		}
	}
	// The CSV form of the same explanations.
	out := filepath.Join(dir, "e.csv")
	if _, err := Explain(m, ExplainOptions{Options: Options{Data: in, RDKitWorkers: 1}}, runenv.Default(), out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	header := strings.Join(records[0], ",")
	if header != "row,smiles,atom_motifs,pieces,fragments,p_0,p_1,p_2,error" || len(records) != 8 {
		t.Fatalf("header %q, %d records", header, len(records))
	}
	for _, r := range records[1:] {
		i, _ := strconv.Atoi(r[0])
		want, ok := alone[i]
		if !ok {
			if r[8] == "" || r[2] != "" {
				t.Errorf("invalid row %d: %q", i, r)
			}
			continue
		}
		var motifs []int
		for _, f := range strings.Fields(r[2]) {
			k, _ := strconv.Atoi(f)
			motifs = append(motifs, k)
		}
		if !slices.Equal(motifs, want.Motifs) || len(strings.Split(r[3], ";")) != len(want.Pieces) {
			t.Errorf("row %d: %q, want motifs %v and %d pieces", i, r, want.Motifs, len(want.Pieces))
		}
		for k := range 3 {
			if p, _ := strconv.ParseFloat(r[5+k], 64); math.Abs(p-want.Profile[k]) > 1e-5 {
				t.Errorf("row %d: p_%d %v, want %v", i, k, p, want.Profile[k])
			}
		}
	}
}

// piecesByBFS is pieces' definition computed another way: a breadth-first
// walk from each atom not yet reached, along the bonds between atoms of its
// motif, the pieces ordered by their first atom.
func piecesByBFS(motifs []int, bonds []int32) [][]int {
	adj := make([][]int, len(motifs))
	for b := 0; b+1 < len(bonds); b += 2 {
		u, v := int(bonds[b]), int(bonds[b+1])
		adj[u], adj[v] = append(adj[u], v), append(adj[v], u)
	}
	seen := make([]bool, len(motifs))
	var out [][]int
	for a := range motifs {
		if seen[a] {
			continue
		}
		piece, queue := []int{}, []int{a}
		seen[a] = true
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			piece = append(piece, u)
			for _, v := range adj[u] {
				if !seen[v] && motifs[v] == motifs[a] {
					seen[v] = true
					queue = append(queue, v)
				}
			}
		}
		slices.Sort(piece)
		out = append(out, append([]int{motifs[a]}, piece...))
	}
	return out
}

// Pieces are the connected atoms of one motif however the bonds are listed:
// branches and rings, whose bonds reach an atom already in a piece (a
// chain's never do), join pieces that a walk of each bond's ends alone
// would split. Hand-computed cases, then 300 random molecule-like graphs
// (trees with ring closures, bonds in random order, either direction)
// against a breadth-first walk.
func TestPiecesOfBranchesAndRings(t *testing.T) {
	both := func(pairs ...int32) []int32 {
		var out []int32
		for i := 0; i+1 < len(pairs); i += 2 {
			out = append(out, pairs[i], pairs[i+1], pairs[i+1], pairs[i])
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		motifs []int
		bonds  []int32
		want   [][]int // motif, then atoms
	}{
		// Atom 2 is bonded to 1, then to 0: one piece, not {0,2} and {1}.
		{"branch point listed last", []int{0, 0, 0}, both(1, 2, 0, 2), [][]int{{0, 0, 1, 2}}},
		// Cyclohexane with atom 2 in another motif: the ring closure 5–0
		// joins {0,1} and {3,4,5}.
		{"ring broken once", []int{1, 1, 0, 1, 1, 1}, both(0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 0), [][]int{{1, 0, 1, 3, 4, 5}, {0, 2}}},
		// Isobutane's centre (atom 1) in another motif: three pieces of one atom.
		{"branched, centre apart", []int{2, 1, 2, 2}, both(0, 1, 1, 2, 1, 3), [][]int{{2, 0}, {1, 1}, {2, 2}, {2, 3}}},
		// Naphthalene-like fused rings (0–5 and 4–9, sharing 4–5), the
		// shared bond's atoms in motif 0 and the rest in motif 1: the two
		// rings' motif-1 arcs stay apart, the shared atoms one piece.
		{"fused rings", []int{1, 1, 1, 1, 0, 0, 1, 1, 1, 1}, both(0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 0, 4, 6, 6, 7, 7, 8, 8, 9, 9, 5),
			[][]int{{1, 0, 1, 2, 3}, {0, 4, 5}, {1, 6, 7, 8, 9}}},
	} {
		var got [][]int
		for _, p := range pieces(tc.motifs, tc.bonds) {
			got = append(got, append([]int{p.Motif}, p.Atoms...))
		}
		if !slices.EqualFunc(got, tc.want, slices.Equal[[]int]) {
			t.Errorf("%s: pieces %v, want %v", tc.name, got, tc.want)
		}
		if bfs := piecesByBFS(tc.motifs, tc.bonds); !slices.EqualFunc(bfs, tc.want, slices.Equal[[]int]) {
			t.Fatalf("%s: the reference walk gives %v", tc.name, bfs)
		}
	}
	r := rand.New(rand.NewPCG(40, 1))
	for i := range 300 {
		n := 2 + r.IntN(25)
		motifs := make([]int, n)
		var pairs [][2]int32
		for a := range n {
			motifs[a] = r.IntN(3)
			if a > 0 {
				pairs = append(pairs, [2]int32{int32(r.IntN(a)), int32(a)})
			}
		}
		for range r.IntN(4) { // ring closures
			u, v := r.IntN(n), r.IntN(n)
			if u != v {
				pairs = append(pairs, [2]int32{int32(u), int32(v)})
			}
		}
		r.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
		var bonds []int32
		for _, p := range pairs {
			if r.IntN(2) == 0 {
				p[0], p[1] = p[1], p[0]
			}
			bonds = append(bonds, p[0], p[1], p[1], p[0])
		}
		var got [][]int
		for _, p := range pieces(motifs, bonds) {
			got = append(got, append([]int{p.Motif}, p.Atoms...))
		}
		if want := piecesByBFS(motifs, bonds); !slices.EqualFunc(got, want, slices.Equal[[]int]) {
			t.Fatalf("graph %d (motifs %v, bonds %v): pieces %v, want %v", i, motifs, bonds, got, want)
		}
	}
}

// An explanation's CSV row is quoted by the rule of every CSV the program
// writes (encoding/csv's, which matrixfile follows): a field with a comma,
// a quote, a line break or a leading space is quoted, quotes doubled, and
// the row reads back field for field.
func TestExplanationCSVQuoting(t *testing.T) {
	var b strings.Builder
	x := newExplanationWriter(&b, ".csv", 2)
	e := Explanation{Row: 3, SMILES: "C(=O)O", Motifs: []int{1, 0, 0},
		Pieces:  []Piece{{Motif: 1, Atoms: []int{0}, Fragment: "C"}, {Motif: 0, Atoms: []int{1, 2}, Fragment: `O"O`}},
		Profile: []float64{0.25, 0.75}}
	bad := Explanation{Row: 4, SMILES: " CC", Error: "RDKit: \"bad\"\nsecond line"}
	for _, err := range []error{x.header(), x.row(e), x.row(bad), x.flush()} {
		if err != nil {
			t.Fatal(err)
		}
	}
	want := "row,smiles,atom_motifs,pieces,fragments,p_0,p_1,error\n" +
		`3,C(=O)O,1 0 0,1:0;0:1 2,"C;O""O",0.25,0.75,` + "\n" +
		`4," CC",,,,,,"RDKit: ""bad""` + "\nsecond line\"\n"
	if b.String() != want {
		t.Errorf("CSV\n%s\nwant\n%s", b.String(), want)
	}
	recs, err := csv.NewReader(strings.NewReader(b.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := recs[2]; got[1] != bad.SMILES || got[7] != bad.Error || recs[1][4] != `C;O"O` {
		t.Errorf("read back %q and %q", recs[1], recs[2])
	}
}
