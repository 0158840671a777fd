package report_test

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/pretrain"
	"github.com/micrograph/micrograph/trainer/report"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// motifRun pre-trains a tiny model (two short epochs) on the shared synthetic
// dataset into a run folder whose name needs escaping in HTML.
func motifRun(t *testing.T) (run string, cfg runfolder.Config, cache string) {
	t.Helper()
	dir := t.TempDir()
	cache = filepath.Join(dir, "cache")
	cfg = runfolder.DefaultConfig()
	cfg.Data = filepath.Join(dir, "synth")
	if _, err := synthetic.Write(cfg.Data, synthetic.Options{Molecules: 300, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	cfg.Model.Encoder.Hidden, cfg.Model.Encoder.Layers, cfg.Model.Motifs = 32, 2, 8
	cfg.BatchSize, cfg.Epochs, cfg.CheckpointEvery = 32, 2, 1000
	cfg.Seed = 3
	run = filepath.Join(dir, `run <b>&"x"`)
	if _, err := pretrain.Run(run, cfg, cpuEnv(cache), pretrain.Options{}); err != nil {
		t.Fatal(err)
	}
	return run, cfg, cache
}

// The report's numbers agree with each other and with an independent pass
// of the same model (AtomMotifs): the histogram is the count of atoms per
// motif, the subgraphs are exactly the (molecule, motif) groups of at least
// η atoms, each motif's closest subgraphs are its top ones by P, and the
// planted-group figures follow from the dataset's groups.
func TestMotifReport(t *testing.T) {
	run, cfg, cache := motifRun(t)
	const molecules, perMotif, batch = 200, 5, 48
	r, err := report.BuildMotifReport(report.MotifReportOptions{
		Run: run, Molecules: molecules, PerMotif: perMotif, BatchSize: batch,
	}, cpuEnv(cache))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := data.Open(cfg.Data, data.OpenOptions{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	usable, _ := data.PretrainFilter(ds, ds.All(), cfg.Model.Eta)
	graphs := usable[:molecules]
	atoms := 0
	for _, g := range graphs {
		atoms += ds.NumAtoms(int(g))
	}
	records, err := runfolder.ReadLog(run)
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Model.Motifs
	if r.Step != records[len(records)-1].Step || r.Data != cfg.Data || r.Usable != len(usable) || r.Molecules != molecules ||
		r.Atoms != atoms || r.BatchSize != batch || len(r.Motifs) != k || !r.SMILES || r.Groups == nil {
		t.Fatalf("report header: step %d, data %s, %d usable (want %d), %d molecules, %d atoms (want %d), batch %d, %d motifs, SMILES %v, groups %v",
			r.Step, r.Data, r.Usable, len(usable), r.Molecules, r.Atoms, atoms, r.BatchSize, len(r.Motifs), r.SMILES, r.Groups)
	}

	// The same checkpoint's motifs, computed by another path (the paper
	// objective's assignment alone), over the same batches.
	ck, _, err := runfolder.LatestCheckpoint(run)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Free()
	m, err := ck.NewModel(torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	atomMotifs := assignedMotifs(t, m, ds, graphs, batch)

	histogram := make([]int, k)
	groupAtoms := map[[2]int][]int{} // (molecule, motif) → local atoms
	var groupedMotifs, plantedGroups []int
	i := 0
	for _, g := range graphs {
		for a := 0; a < ds.NumAtoms(int(g)); a++ {
			mo := atomMotifs[i]
			histogram[mo]++
			groupAtoms[[2]int{int(g), mo}] = append(groupAtoms[[2]int{int(g), mo}], a)
			if pg := ds.AtomGroup[ds.NodePtr[g]+int64(a)]; pg >= 0 {
				groupedMotifs, plantedGroups = append(groupedMotifs, mo), append(plantedGroups, int(pg))
			}
			i++
		}
	}
	sum, subgraphs := 0, 0
	for mo, s := range r.Motifs {
		if s.Motif != mo || s.Atoms != histogram[mo] {
			t.Errorf("motif %d: summary of motif %d with %d atoms, want %d", mo, s.Motif, s.Atoms, histogram[mo])
		}
		sum += s.Atoms
		subgraphs += s.Subgraphs
	}
	if sum != r.Atoms || subgraphs != len(r.Subgraphs) {
		t.Errorf("histogram sums to %d of %d atoms; subgraph counts to %d of %d", sum, r.Atoms, subgraphs, len(r.Subgraphs))
	}

	// Subgraphs: exactly the groups of at least η atoms, each once.
	want := 0
	for _, members := range groupAtoms {
		if len(members) >= cfg.Model.Eta {
			want++
		}
	}
	if len(r.Subgraphs) != want || want == 0 {
		t.Errorf("%d subgraphs, want %d", len(r.Subgraphs), want)
	}
	seen := map[[2]int]bool{}
	perMotifCount, perMotifSize := make([]int, k), make([]int, k)
	for _, sg := range r.Subgraphs {
		key := [2]int{sg.Molecule, sg.Motif}
		if seen[key] || !slices.Equal(sg.Atoms, groupAtoms[key]) {
			t.Fatalf("subgraph of molecule %d, motif %d: atoms %v (seen before: %v), want %v", sg.Molecule, sg.Motif, sg.Atoms, seen[key], groupAtoms[key])
		}
		seen[key] = true
		if sg.SMILES != ds.SMILES[sg.Molecule] || !(sg.LogP <= 0) || math.Abs(sg.Cosine) > 1+1e-5 {
			t.Errorf("subgraph %v: SMILES %q, log P %g, cosine %g", key, sg.SMILES, sg.LogP, sg.Cosine)
		}
		perMotifCount[sg.Motif]++
		perMotifSize[sg.Motif] += len(sg.Atoms)
	}

	checkMotifSummaries(t, r, perMotif, perMotifCount, perMotifSize)

	// Planted groups: NMI over grouped atoms, dominant group per motif.
	if nmi := metrics.NMI(groupedMotifs, plantedGroups); math.Abs(r.NMI-nmi) > 1e-12 {
		t.Errorf("NMI %g, want %g", r.NMI, nmi)
	}
	untrained := untrainedNMI(t, cfg, ds, graphs, batch, plantedGroups)
	t.Logf("NMI with planted groups: %.4f after pre-training, %.4f untrained", r.NMI, untrained)
	if math.Abs(r.UntrainedNMI-untrained) > 1e-12 || untrained == r.NMI || !(untrained > 0 && untrained < 1) {
		t.Errorf("untrained NMI %g, want %g (and not the trained %g)", r.UntrainedNMI, untrained, r.NMI)
	}
	checkDominantGroups(t, r, groupedMotifs, plantedGroups)

	t.Run("html", func(t *testing.T) { checkReportHTML(t, r, run) })
}

// assignedMotifs is the paper objective's motif of every atom of graphs,
// from its assignment alone (Sinkhorn over each batch), in evaluation mode.
func assignedMotifs(t *testing.T, m *model.MicroGraph, ds *data.Dataset, graphs []int32, batch int) []int {
	t.Helper()
	paper, ok := m.Objective.(*model.PaperObjective)
	if !ok {
		t.Fatalf("the run trains the %s objective, not the paper's", m.Objective.Name())
	}
	var motifs []int
	var b feed.Batch
	for lo := 0; lo < len(graphs); lo += batch {
		if err := feed.Collate(ds, graphs[lo:min(lo+batch, len(graphs))], &b); err != nil {
			t.Fatal(err)
		}
		s := torch.NewScope()
		a := torch.NoGradValue(func() model.Assignment { return paper.Assign(b.Graph(torch.CPU), false) })
		for _, k := range torch.ToSlice[int64](a.Motif) {
			motifs = append(motifs, int(k))
		}
		s.Close()
	}
	return motifs
}

// untrainedNMI is the NMI with the planted groups of the model pre-training
// started from: the run's architecture initialised from its seed, built
// here independently and assigned by assignedMotifs.
func untrainedNMI(t *testing.T, cfg runfolder.Config, ds *data.Dataset, graphs []int32, batch int, plantedGroups []int) float64 {
	t.Helper()
	torch.ManualSeed(cfg.Seed)
	initial, err := model.New(cfg.Model, torch.CPU, torch.Float32)
	if err != nil {
		t.Fatal(err)
	}
	defer initial.Free()
	initialMotifs := assignedMotifs(t, initial, ds, graphs, batch)
	var initialGrouped []int
	i := 0
	for _, g := range graphs {
		for a := ds.NodePtr[g]; a < ds.NodePtr[g+1]; a++ {
			if ds.AtomGroup[a] >= 0 {
				initialGrouped = append(initialGrouped, initialMotifs[i])
			}
			i++
		}
	}
	return metrics.NMI(initialGrouped, plantedGroups)
}

// checkMotifSummaries checks each motif's summary against the subgraphs
// counted by hand: counts, mean size, and the closest subgraphs are its best
// by P.
func checkMotifSummaries(t *testing.T, r *report.MotifReport, perMotif int, perMotifCount, perMotifSize []int) {
	t.Helper()
	for mo, s := range r.Motifs {
		if s.Subgraphs != perMotifCount[mo] || s.Subgraphs > 0 && math.Abs(s.MeanSize-float64(perMotifSize[mo])/float64(s.Subgraphs)) > 1e-12 {
			t.Errorf("motif %d: %d subgraphs of mean size %g, want %d of %d atoms", mo, s.Subgraphs, s.MeanSize, perMotifCount[mo], perMotifSize[mo])
		}
		if len(s.Closest) != min(perMotif, s.Subgraphs) {
			t.Errorf("motif %d: %d closest subgraphs of %d", mo, len(s.Closest), s.Subgraphs)
		}
		for j, c := range s.Closest {
			if c.Motif != mo || j > 0 && c.LogP > s.Closest[j-1].LogP {
				t.Errorf("motif %d: closest subgraph %d is of motif %d, log P %g after %g", mo, j, c.Motif, c.LogP, s.Closest[j-1].LogP)
			}
		}
		if len(s.Closest) == 0 {
			continue
		}
		worst := s.Closest[len(s.Closest)-1].LogP
		for _, sg := range r.Subgraphs {
			if sg.Motif == mo && sg.LogP > worst && !slices.ContainsFunc(s.Closest, func(c report.MotifSubgraph) bool { return c.Molecule == sg.Molecule }) {
				t.Errorf("motif %d: subgraph of molecule %d (log P %g) is closer than the closest listed (%g)", mo, sg.Molecule, sg.LogP, worst)
			}
		}
	}
}

// checkDominantGroups checks each motif's dominant planted group, its share
// and the linker share against the grouped atoms' motifs.
func checkDominantGroups(t *testing.T, r *report.MotifReport, groupedMotifs, plantedGroups []int) {
	t.Helper()
	for mo, s := range r.Motifs {
		counts := map[int]int{}
		grouped := 0
		for j, gm := range groupedMotifs {
			if gm == mo {
				counts[plantedGroups[j]]++
				grouped++
			}
		}
		best := -1
		for g := range synthetic.Groups {
			if counts[g] > 0 && (best < 0 || counts[g] > counts[best]) {
				best = g
			}
		}
		if s.DominantGroup != best || grouped > 0 && math.Abs(s.DominantShare-float64(counts[best])/float64(grouped)) > 1e-12 ||
			s.Atoms > 0 && math.Abs(s.LinkerShare-float64(s.Atoms-grouped)/float64(s.Atoms)) > 1e-12 {
			t.Errorf("motif %d: dominant group %d (%g), linkers %g; want %d of %d grouped atoms (%v)", mo, s.DominantGroup, s.DominantShare, s.LinkerShare, best, grouped, counts)
		}
	}
}

// checkReportHTML checks the page of r: the histogram's bars, the sections
// largest first, each motif's figures, the NMI line and the escaped run
// name.
func checkReportHTML(t *testing.T, r *report.MotifReport, run string) {
	k := len(r.Motifs)
	var buf bytes.Buffer
	if err := r.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	page := checkMotifHTML(t, buf.Bytes())
	var drawn []int
	for _, s := range r.Motifs {
		if s.Subgraphs > 0 {
			drawn = append(drawn, s.Motif)
		}
	}
	slices.SortStableFunc(drawn, func(a, b int) int { return r.Motifs[b].Atoms - r.Motifs[a].Atoms })
	// Bars in motif order, heights in proportion to the atoms, the
	// tallest the plot's full height.
	most, tallest := 0, 0.0
	for j, s := range r.Motifs {
		most = max(most, s.Atoms)
		if j < len(page.bars) {
			tallest = max(tallest, page.bars[j].height)
		}
	}
	if len(page.bars) != k || tallest < 100 {
		t.Fatalf("%d histogram bars, the tallest %g px, want %d", len(page.bars), tallest, k)
	}
	for j, s := range r.Motifs {
		b := page.bars[j]
		if math.Abs(b.height/tallest-float64(s.Atoms)/float64(most)) > 1e-3 || b.empty != (s.Subgraphs == 0) {
			t.Errorf("motif %d (%d atoms of at most %d, %d subgraphs): bar %+v, tallest %g", j, s.Atoms, most, s.Subgraphs, b, tallest)
		}
	}
	if !slices.Equal(page.sections, drawn) {
		t.Errorf("sections for motifs %v, want %v (largest first)", page.sections, drawn)
	}
	var figures []htmlFigureSeen
	for _, mo := range drawn {
		for _, c := range r.Motifs[mo].Closest {
			figures = append(figures, htmlFigureSeen{motif: mo, molecule: c.Molecule, caption: c.Atoms, highlighted: c.Atoms})
		}
	}
	if !slices.EqualFunc(page.figures, figures, htmlFigureSeen.equal) {
		t.Errorf("figures (motif, molecule, caption atoms, highlighted atoms):\n got %v\nwant %v", page.figures, figures)
	}
	if nmi := fmt.Sprintf("%.3f; before pre-training (the run's initial model) %.3f", r.NMI, r.UntrainedNMI); !strings.Contains(page.text, nmi) {
		t.Errorf("page text lacks %q", nmi)
	}
	if !strings.Contains(page.title, run) || !strings.Contains(page.text, run) || bytes.Contains(buf.Bytes(), []byte(`<b>&"x"`)) {
		t.Errorf("run name %q not shown escaped: title %q", run, page.title)
	}
}

// A report built by hand: a motif without subgraphs is listed briefly at
// the end instead of getting a section, and without SMILES the page says so
// and draws nothing.
func TestMotifReportHTMLWithoutSMILES(t *testing.T) {
	sg := report.MotifSubgraph{Molecule: 3, Motif: 2, Atoms: []int{0, 1, 2, 5}, LogP: math.Log(0.75), Cosine: 0.5}
	r := &report.MotifReport{
		Run: "runs/<script>alert(1)</script>", Checkpoint: "c.pt", Step: 7, Data: "d & e", Dataset: "d",
		Model: model.DefaultConfig(), BatchSize: 4, Usable: 9, Molecules: 9, Atoms: 30, NMI: math.NaN(),
		Subgraphs: []report.MotifSubgraph{sg},
		Motifs: []report.MotifSummary{
			{Motif: 0, Atoms: 10, DominantGroup: -1},
			{Motif: 1, Atoms: 0, DominantGroup: -1},
			{Motif: 2, Atoms: 20, Subgraphs: 1, MeanSize: 4, Closest: []report.MotifSubgraph{sg}, DominantGroup: -1},
		},
	}
	var buf bytes.Buffer
	if err := r.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	page := checkMotifHTML(t, buf.Bytes())
	if !slices.Equal(page.sections, []int{2}) {
		t.Errorf("sections %v, want motif 2 only", page.sections)
	}
	if bars := []htmlBarSeen{{110, true}, {0, true}, {220, false}}; !slices.Equal(page.bars, bars) {
		t.Errorf("histogram bars %v, want %v", page.bars, bars)
	}
	want := []htmlFigureSeen{{motif: 2, molecule: 3, caption: []int{0, 1, 2, 5}}}
	if !slices.EqualFunc(page.figures, want, htmlFigureSeen.equal) {
		t.Errorf("figures %v, want %v undrawn", page.figures, want)
	}
	for _, s := range []string{"Motifs without subgraphs", "motif 0 (10 atoms), motif 1 (0 atoms)", "no SMILES", "P = 0.750", "d & e"} {
		if !strings.Contains(page.text, s) {
			t.Errorf("page text lacks %q", s)
		}
	}
	if strings.Contains(buf.String(), "<script") {
		t.Error("the run's name reached the page unescaped")
	}
}

// BuildMotifReport rejects settings that cannot work before loading anything.
func TestMotifReportErrors(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		opt  report.MotifReportOptions
		want string
	}{
		{report.MotifReportOptions{Run: empty, PerMotif: -1}, "per_motif -1 must not be negative"},
		{report.MotifReportOptions{Run: empty, Molecules: -2}, "molecules -2 must not be negative"},
		{report.MotifReportOptions{Run: empty, BatchSize: -3}, "batch_size -3 must not be negative"},
		{report.MotifReportOptions{Run: empty}, "has no checkpoints"},
	} {
		if _, err := report.BuildMotifReport(tc.opt, cpuEnv(t.TempDir())); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.opt, err, tc.want)
		}
	}
}

// htmlFigureSeen is one figure of a motif page: its section's motif, the
// molecule and atoms its caption names, and the atoms its drawing highlights.
type htmlFigureSeen struct {
	motif, molecule      int
	caption, highlighted []int
}

func (a htmlFigureSeen) equal(b htmlFigureSeen) bool {
	return a.motif == b.motif && a.molecule == b.molecule && slices.Equal(a.caption, b.caption) && slices.Equal(a.highlighted, b.highlighted)
}

// motifPage is what checkMotifHTML reads off a motif report.
type motifPage struct {
	title    string
	text     string // all text, tags removed
	sections []int  // motif of each section, in order
	figures  []htmlFigureSeen
	bars     []htmlBarSeen // the histogram's bars, in order
}

// htmlBarSeen is one bar of the atoms-per-motif histogram.
type htmlBarSeen struct {
	height float64
	empty  bool // drawn as a motif without subgraphs
}

// htmlVoid are the HTML elements that have no end tag.
var htmlVoid = map[string]bool{"meta": true, "br": true, "hr": true, "img": true, "input": true, "link": true, "wbr": true}

// checkMotifHTML tokenises a motif report, checks that every element is
// closed in order and that nothing refers outside the page, and reads off
// its sections and figures.
func checkMotifHTML(t *testing.T, doc []byte) motifPage {
	t.Helper()
	var page motifPage
	var stack []string
	var text strings.Builder
	var fig *htmlFigureSeen
	inCaption := false
	z := html.NewTokenizer(bytes.NewReader(doc))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if z.Err() != io.EOF {
				t.Fatal(z.Err())
			}
			break
		}
		tok := z.Token()
		attr := func(key string) string {
			for _, a := range tok.Attr {
				if a.Key == key {
					return a.Val
				}
			}
			return ""
		}
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken:
			switch tok.Data {
			case "script", "link", "img", "iframe", "object", "embed", "base", "form":
				t.Errorf("element <%s> in a self-contained page", tok.Data)
			}
			for _, a := range tok.Attr {
				external := a.Key == "src" || a.Key == "srcset" || a.Key == "action" ||
					strings.HasSuffix(a.Key, "href") && !strings.HasPrefix(a.Val, "#") ||
					!strings.HasPrefix(a.Key, "xmlns") && strings.Contains(a.Val, "://") ||
					strings.Contains(a.Val, "url(") || strings.HasPrefix(a.Key, "on")
				if external {
					t.Errorf("<%s %s=%q> refers outside the page", tok.Data, a.Key, a.Val)
				}
			}
			if tt == html.StartTagToken && !htmlVoid[tok.Data] {
				stack = append(stack, tok.Data)
			}
			switch {
			case tok.Data == "section" && attr("class") == "motif":
				mo, err := strconv.Atoi(strings.TrimPrefix(attr("id"), "motif-"))
				if err != nil {
					t.Fatalf("section id %q", attr("id"))
				}
				page.sections = append(page.sections, mo)
			case tok.Data == "figure":
				page.figures = append(page.figures, htmlFigureSeen{motif: page.sections[len(page.sections)-1]})
				fig = &page.figures[len(page.figures)-1]
			case tok.Data == "ellipse" && fig != nil:
				// RDKit marks each highlighted atom with an ellipse of class atom-N.
				n, err := strconv.Atoi(strings.TrimPrefix(attr("class"), "atom-"))
				if err != nil {
					t.Fatalf("highlight ellipse of class %q", attr("class"))
				}
				fig.highlighted = append(fig.highlighted, n)
				slices.Sort(fig.highlighted)
			case tok.Data == "figcaption":
				inCaption = true
			case tok.Data == "rect" && strings.HasPrefix(attr("class"), "bar"):
				h, err := strconv.ParseFloat(attr("height"), 64)
				if err != nil {
					t.Fatalf("bar height %q", attr("height"))
				}
				page.bars = append(page.bars, htmlBarSeen{height: h, empty: attr("class") == "bar empty"})
			}
		case html.EndTagToken:
			if len(stack) == 0 || stack[len(stack)-1] != tok.Data {
				t.Fatalf("</%s> closes %v", tok.Data, stack)
			}
			stack = stack[:len(stack)-1]
			switch tok.Data {
			case "figcaption":
				inCaption = false
			case "figure":
				fig = nil
			}
		case html.TextToken:
			text.WriteString(tok.Data)
			if len(stack) > 0 && stack[len(stack)-1] == "title" && !slices.Contains(stack, "svg") {
				page.title += tok.Data
			}
			if strings.Contains(tok.Data, "url(") || strings.Contains(tok.Data, "@import") {
				t.Errorf("text %q refers outside the page", tok.Data)
			}
			if inCaption && fig != nil {
				readCaption(t, tok.Data, fig)
			}
		}
	}
	if len(stack) > 0 {
		t.Errorf("unclosed elements %v", stack)
	}
	page.text = text.String()
	return page
}

// readCaption reads "molecule N" and "atoms a, b, c" from caption text.
func readCaption(t *testing.T, s string, fig *htmlFigureSeen) {
	t.Helper()
	if n, ok := strings.CutPrefix(strings.TrimSpace(s), "molecule "); ok {
		if _, err := fmt.Sscan(n, &fig.molecule); err != nil {
			t.Fatalf("caption %q: %v", s, err)
		}
	}
	if list, ok := strings.CutPrefix(strings.TrimSpace(s), "atoms "); ok {
		for _, f := range strings.Split(list, ", ") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("caption %q: %v", s, err)
			}
			fig.caption = append(fig.caption, n)
		}
	}
}

// A released-objective run's report: its subgraphs are the spectral
// sampler's connected pieces (disjoint within a molecule, each at least η
// atoms or a molecule's one fallback cluster), each under its closest motif
// (the largest cosine, so log P is the row's largest too), and the atoms'
// histogram counts exactly the atoms in a subgraph, as AtomMotifs gives them.
func TestMotifReportReleased(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	cfg, err := runfolder.DefaultConfigOf(model.ObjectiveReleased)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Data = filepath.Join(dir, "synth")
	if _, err := synthetic.Write(cfg.Data, synthetic.Options{Molecules: 200, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	cfg.Model.Encoder.Hidden, cfg.Model.Encoder.Layers, cfg.Model.Motifs = 32, 2, 8
	cfg.BatchSize, cfg.Epochs, cfg.CheckpointEvery = 32, 1, 1000
	cfg.Seed = 3
	run := filepath.Join(dir, "run")
	if _, err := pretrain.Run(run, cfg, cpuEnv(cache), pretrain.Options{}); err != nil {
		t.Fatal(err)
	}
	const molecules, batch = 120, 40
	r, err := report.BuildMotifReport(report.MotifReportOptions{
		Run: run, Molecules: molecules, PerMotif: 3, BatchSize: batch,
	}, cpuEnv(cache))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Subgraphs) < molecules {
		t.Fatalf("%d subgraphs for %d molecules", len(r.Subgraphs), molecules)
	}
	inSubgraph := 0
	seen := map[[2]int]bool{}
	perMolecule := map[int]int{}
	for _, sg := range r.Subgraphs {
		perMolecule[sg.Molecule]++
		for _, a := range sg.Atoms {
			if seen[[2]int{sg.Molecule, a}] {
				t.Fatalf("atom %d of molecule %d in two spectral subgraphs", a, sg.Molecule)
			}
			seen[[2]int{sg.Molecule, a}] = true
		}
		inSubgraph += len(sg.Atoms)
		if sg.LogP > 0 || math.IsNaN(sg.LogP) {
			t.Fatalf("log P %v", sg.LogP)
		}
	}
	for _, sg := range r.Subgraphs {
		if len(sg.Atoms) < cfg.Model.Eta && perMolecule[sg.Molecule] != 1 {
			t.Errorf("molecule %d: a subgraph of %d atoms beside others", sg.Molecule, len(sg.Atoms))
		}
	}
	histogram := 0
	for _, s := range r.Motifs {
		histogram += s.Atoms
	}
	if histogram != inSubgraph {
		t.Errorf("histogram counts %d atoms, the subgraphs hold %d", histogram, inSubgraph)
	}
	if math.IsNaN(r.NMI) || r.NMI < 0 || r.NMI > 1 {
		t.Errorf("NMI %v", r.NMI)
	}
}

// cpuEnv runs on the CPU with one libtorch thread, two collating goroutines
// and the dataset cache cache.
func cpuEnv(cache string) runenv.Env {
	return runenv.Env{Device: torch.CPU, Threads: 1, Workers: 2, Dataset: data.OpenOptions{CacheDir: cache}}
}
