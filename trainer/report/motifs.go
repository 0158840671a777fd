package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/data/rdkit"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// MotifReportOptions say which run and molecules a motif report covers.
type MotifReportOptions struct {
	Run       string // run folder: its newest readable checkpoint is analysed
	Data      string // dataset; "" means the run's own
	Molecules int    // the first Molecules molecules pre-training can use; 0 means all
	PerMotif  int    // closest subgraphs kept per motif
	BatchSize int    // molecules per forward pass; 0 means the run's batch size
}

// Validate reports the first setting that cannot work, naming its field.
func (o MotifReportOptions) Validate() error {
	switch {
	case o.Molecules < 0:
		return field.Errorf("molecules", o.Molecules, "must not be negative")
	case o.PerMotif < 0:
		return field.Errorf("per_motif", o.PerMotif, "must not be negative")
	case o.BatchSize < 0:
		return field.Errorf("batch_size", o.BatchSize, "must not be negative")
	}
	return nil
}

// MotifReport is what a pre-trained model makes of a dataset's molecules
// (docs/method.md §3–§4): every atom's motif, the motif-like subgraphs, and how
// close each subgraph's embedding lies to its motif. The numbers live here;
// WriteHTML draws them.
type MotifReport struct {
	Run        string
	Checkpoint string       // the checkpoint file analysed
	Step       int64        // its optimiser step
	Data       string       // the dataset's path
	Dataset    string       // its name
	Model      model.Config // K is Model.Motifs; η, τ
	BatchSize  int          // molecules per batch: Sinkhorn balances motifs over each batch

	Usable    int // molecules of the dataset pre-training can use (docs/method.md §4's filter)
	Molecules int // of those, the first ones analysed
	Atoms     int // atoms of the molecules analysed

	// SMILES says whether the dataset has SMILES; without them no molecule
	// can be drawn.
	SMILES bool
	// Groups names the planted functional groups of a synthetic dataset; nil
	// for any other dataset.
	Groups []string
	// NMI is the normalised mutual information between the atoms' motifs and
	// their planted groups, over the atoms of a planted group (linker atoms
	// belong to none); NaN without Groups.
	NMI float64
	// UntrainedNMI is the same for the model the run started from: its
	// configuration initialised from its seed, as Pretrain builds it, before
	// any step. It is what NMI would be without pre-training; NaN without
	// Groups.
	UntrainedNMI float64

	Subgraphs []MotifSubgraph // every subgraph, by molecule, then motif
	Motifs    []MotifSummary  // one per motif, by motif index
}

// MotifSubgraph is one motif-like subgraph: the atoms of one molecule that
// Sinkhorn assigned to one motif, when they are at least η (§4), or under
// the released objective one of its spectral clusters (§12.6).
type MotifSubgraph struct {
	Molecule int    // index in the dataset
	SMILES   string // the molecule's SMILES; "" when the dataset has none
	Motif    int
	Atoms    []int // members, as atom indices within the molecule (RDKit's order), increasing
	// LogP is log P[j, motif], the log-probability the model gives the
	// subgraph's own motif: softmax over motifs of cos(W_s s, M)/τ (the
	// released objective's projection head in place of W_s).
	LogP float64
	// Cosine is cos(W_s s, M_motif) (or the head's), which still separates
	// subgraphs whose P is 1 to float precision.
	Cosine float64
}

// closer orders subgraphs closest to their motif first: by P, then by cosine.
func closer(a, b MotifSubgraph) int {
	if c := cmp.Compare(b.LogP, a.LogP); c != 0 {
		return c
	}
	return cmp.Compare(b.Cosine, a.Cosine)
}

// MotifSummary is one motif's share of the molecules analysed.
type MotifSummary struct {
	Motif     int
	Atoms     int     // atoms assigned to it
	Subgraphs int     // subgraphs it forms
	MeanSize  float64 // mean atoms per subgraph; 0 without subgraphs
	// Closest are its subgraphs closest to it, closest first.
	Closest []MotifSubgraph
	// Fragments are its subgraphs' most frequent fragments, as canonical
	// SMILES of the subgraph's atoms and the bonds between them, most
	// frequent first (at most topFragments); nil without SMILES or RDKit.
	Fragments []FragmentCount

	// With planted groups only: the group most of its atoms come from (-1
	// when none of its atoms is in a group), that group's share of its atoms
	// in a group, and the share of its atoms that are linkers.
	DominantGroup int
	DominantShare float64
	LinkerShare   float64
}

// FragmentCount is how many of a motif's subgraphs are one fragment.
type FragmentCount struct {
	SMILES string
	Count  int
	Share  float64 // of the motif's subgraphs
}

// topFragments is how many fragments a motif's summary lists.
const topFragments = 5

// countFragments fills each motif's Fragments: what its subgraphs are, as
// chemistry, so that a reader can see whether a motif is a functional group
// (a benzene ring, a carboxyl) or an arbitrary piece of molecule.
func (r *MotifReport) countFragments() error {
	counts := make([]map[string]int, len(r.Motifs))
	for i := range counts {
		counts[i] = map[string]int{}
	}
	for _, sg := range r.Subgraphs {
		smi, err := rdkit.FragmentSMILES(sg.SMILES, sg.Atoms)
		if err != nil {
			return fmt.Errorf("molecule %d: %w", sg.Molecule, err)
		}
		counts[sg.Motif][smi]++
	}
	for i, c := range counts {
		s := &r.Motifs[i]
		s.Fragments = nil
		for smi, n := range c {
			s.Fragments = append(s.Fragments, FragmentCount{SMILES: smi, Count: n, Share: float64(n) / float64(s.Subgraphs)})
		}
		slices.SortFunc(s.Fragments, func(a, b FragmentCount) int {
			if c := cmp.Compare(b.Count, a.Count); c != 0 {
				return c
			}
			return cmp.Compare(a.SMILES, b.SMILES)
		})
		s.Fragments = s.Fragments[:min(topFragments, len(s.Fragments))]
	}
	return nil
}

// BuildMotifReport analyses the newest readable checkpoint of opt.Run on the
// first opt.Molecules usable molecules of its dataset: each batch runs
// through the model in evaluation mode without the subgraph perturbation, so
// the subgraphs are exactly the (molecule, motif) groups of at least η atoms.
// The model runs where env says.
func BuildMotifReport(opt MotifReportOptions, env runenv.Env) (*MotifReport, error) {
	return runenv.Run(env, opt.Validate, func() (*MotifReport, error) { return buildMotifReport(opt, env) })
}

// buildMotifReport is BuildMotifReport after runenv's prologue.
func buildMotifReport(opt MotifReportOptions, env runenv.Env) (_ *MotifReport, err error) {
	dev := env.Device
	ck, _, err := runfolder.LatestCheckpoint(opt.Run)
	if err != nil {
		return nil, err
	}
	defer ck.Free()
	r := &MotifReport{
		Run: opt.Run, Checkpoint: ck.Path, Step: ck.Step, Data: opt.Data,
		Model: ck.Config.Model, BatchSize: opt.BatchSize, NMI: math.NaN(), UntrainedNMI: math.NaN(),
	}
	if r.Data == "" {
		r.Data = ck.Config.Data
	}
	if r.BatchSize == 0 {
		r.BatchSize = ck.Config.BatchSize
	}
	ds, err := data.Open(r.Data, env.OpenOptions())
	if err != nil && opt.Data == "" {
		return nil, field.Errorf("data", r.Data, "(the run's dataset) cannot be opened: %v; give the dataset's path", err)
	}
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", r.Data, err)
	}
	r.Dataset, r.SMILES = ds.Name, ds.SMILES != nil
	if ds.AtomGroup != nil {
		r.Groups = synthetic.Groups
	}
	graphs, _ := data.PretrainFilter(ds, ds.All(), r.Model.Eta)
	r.Usable = len(graphs)
	if opt.Molecules > 0 && len(graphs) > opt.Molecules {
		graphs = graphs[:opt.Molecules]
	}
	if len(graphs) == 0 {
		return nil, fmt.Errorf("dataset %s: no molecule of at least η=%d atoms with bonds to analyse", r.Data, r.Model.Eta)
	}
	r.Molecules = len(graphs)

	m, err := ck.NewModel(dev)
	if err != nil {
		return nil, err
	}
	defer m.Free()

	atomMotifs, err := r.collect(m, ds, graphs, dev)
	if err != nil {
		return nil, err
	}
	r.summarise(ds, graphs, atomMotifs, opt.PerMotif)
	if r.SMILES && rdkit.Load() == nil {
		if err := r.countFragments(); err != nil {
			return nil, err
		}
	}
	if ds.AtomGroup != nil {
		if r.UntrainedNMI, err = untrainedNMI(ck.Config, ds, graphs, r.BatchSize, dev); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// untrainedNMI is groupNMI for the model a run of cfg starts from: cfg's
// model initialised from cfg's seed, as Pretrain builds it.
func untrainedNMI(cfg runfolder.Config, ds *data.Dataset, graphs []int32, batchSize int, dev torch.Device) (float64, error) {
	torch.ManualSeed(cfg.Seed)
	m, err := model.New(cfg.Model, dev, torch.Float32)
	if err != nil {
		return 0, err
	}
	defer m.Free()
	atomMotifs, err := AtomMotifs(m, ds, graphs, batchSize, dev)
	if err != nil {
		return 0, err
	}
	return groupNMI(ds, graphs, atomMotifs), nil
}

// groupNMI is the NMI between the motifs of the atoms of graphs (atomMotifs,
// in molecule order) and their planted groups, over the atoms of a group
// that have a motif (not -1); NaN when there are none.
func groupNMI(ds *data.Dataset, graphs []int32, atomMotifs []int) float64 {
	var motifs, groups []int
	i := 0
	for _, g := range graphs {
		for a := ds.NodePtr[g]; a < ds.NodePtr[g+1]; a++ {
			if group := int(ds.AtomGroup[a]); group >= 0 && atomMotifs[i] >= 0 {
				motifs, groups = append(motifs, atomMotifs[i]), append(groups, group)
			}
			i++
		}
	}
	if len(motifs) == 0 {
		return math.NaN()
	}
	return metrics.NMI(motifs, groups)
}

// collect runs the model over graphs in batches, fills r.Subgraphs and
// r.Atoms, and returns the motif of every atom analysed, in molecule order.
func (r *MotifReport) collect(m *model.MicroGraph, ds *data.Dataset, graphs []int32, dev torch.Device) ([]int, error) {
	reader, err := model.AsMotifReader(m.Objective)
	if err != nil {
		return nil, err
	}
	var atomMotifs []int
	var b feed.Batch
	for lo := 0; lo < len(graphs); lo += r.BatchSize {
		if err := feed.Collate(ds, graphs[lo:min(lo+r.BatchSize, len(graphs))], &b); err != nil {
			return nil, err
		}
		motifs, err := r.collectBatch(m.Config.Motifs, reader, ds, &b, dev)
		if err != nil {
			return nil, err
		}
		atomMotifs = append(atomMotifs, motifs...)
	}
	r.Atoms = len(atomMotifs)
	return atomMotifs, nil
}

// collectBatch analyses one batch as the model's objective, of k motifs,
// reads its motifs (model.MotifReader: motif-like subgraphs, whichever
// sampler trained the model): it appends the batch's subgraphs to
// r.Subgraphs and returns its atoms' motifs.
func (r *MotifReport) collectBatch(k int, reader model.MotifReader, ds *data.Dataset, b *feed.Batch, dev torch.Device) ([]int, error) {
	s := torch.NewScope()
	defer s.Close()
	read := reader.ReadMotifs(b.Graph(dev))
	sub := read.Subgraphs
	node := torch.ToSlice[int64](sub.Node)
	slot := torch.ToSlice[int64](sub.Slot)
	weight := torch.ToSlice[float32](sub.Weight.ToDType(torch.Float32))
	live := torch.ToSlice[bool](sub.Live)
	logP := torch.ToSlice[float32](read.LogP.ToDType(torch.Float32))
	cos := torch.ToSlice[float32](read.Cosine.ToDType(torch.Float32))
	if len(read.AtomMotif) != b.NumAtoms() || len(live) != b.NumGraphs()*int(sub.PerGraph) {
		return nil, fmt.Errorf("model output: %d motifs for %d atoms, %d slots for %d molecules and %d slots each",
			len(read.AtomMotif), b.NumAtoms(), len(live), b.NumGraphs(), sub.PerGraph)
	}

	// Slot j belongs to molecule j / PerGraph; its members are the
	// memberships of weight 1.
	members := make([][]int, len(live))
	for i, j := range slot {
		if weight[i] > 0 && live[j] {
			mol := j / sub.PerGraph
			members[j] = append(members[j], int(node[i]-b.GraphPtr[mol]))
		}
	}
	row := -1 // j's row of the subgraph tensors, which have the live slots only
	for j, atoms := range members {
		if !live[j] {
			continue
		}
		row++
		if len(atoms) == 0 {
			return nil, fmt.Errorf("model output: subgraph in slot %d has no members", j)
		}
		slices.Sort(atoms)
		g := int(b.Graphs[int64(j)/sub.PerGraph])
		motif := read.SubgraphMotif[row]
		sg := MotifSubgraph{
			Molecule: g, Motif: motif, Atoms: atoms,
			LogP: float64(logP[row*k+motif]), Cosine: float64(cos[row*k+motif]),
		}
		if ds.SMILES != nil {
			sg.SMILES = ds.SMILES[g]
		}
		r.Subgraphs = append(r.Subgraphs, sg)
	}
	return read.AtomMotif, nil
}

// summarise fills r.Motifs and r.NMI from the subgraphs and atomMotifs, the
// motif of every atom of graphs in order.
func (r *MotifReport) summarise(ds *data.Dataset, graphs []int32, atomMotifs []int, perMotif int) {
	k := r.Model.Motifs
	r.Motifs = make([]MotifSummary, k)
	for i := range r.Motifs {
		r.Motifs[i] = MotifSummary{Motif: i, DominantGroup: -1}
	}
	for _, mo := range atomMotifs {
		if mo >= 0 { // -1: an atom in no subgraph (released objective)
			r.Motifs[mo].Atoms++
		}
	}
	byMotif := make([][]MotifSubgraph, k)
	for _, sg := range r.Subgraphs {
		byMotif[sg.Motif] = append(byMotif[sg.Motif], sg)
	}
	for i, subs := range byMotif {
		s := &r.Motifs[i]
		s.Subgraphs = len(subs)
		size := 0
		for _, sg := range subs {
			size += len(sg.Atoms)
		}
		if len(subs) > 0 {
			s.MeanSize = float64(size) / float64(len(subs))
		}
		slices.SortStableFunc(subs, closer)
		s.Closest = subs[:min(perMotif, len(subs))]
	}
	if ds.AtomGroup != nil {
		r.summariseGroups(ds, graphs, atomMotifs)
	}
}

// summariseGroups compares the motifs with a synthetic dataset's planted
// groups: each motif's dominant group, and the NMI over grouped atoms.
func (r *MotifReport) summariseGroups(ds *data.Dataset, graphs []int32, atomMotifs []int) {
	counts := make([]map[int]int, len(r.Motifs)) // motif → group (-1: linker) → atoms
	for i := range counts {
		counts[i] = map[int]int{}
	}
	i := 0
	for _, g := range graphs {
		for a := ds.NodePtr[g]; a < ds.NodePtr[g+1]; a++ {
			if mo := atomMotifs[i]; mo >= 0 {
				counts[mo][int(ds.AtomGroup[a])]++
			}
			i++
		}
	}
	for mo, c := range counts {
		s := &r.Motifs[mo]
		if s.Atoms == 0 {
			continue
		}
		grouped := s.Atoms - c[-1]
		s.LinkerShare = float64(c[-1]) / float64(s.Atoms)
		for group, n := range c {
			best := s.DominantGroup
			if group >= 0 && (best < 0 || n > c[best] || n == c[best] && group < best) {
				s.DominantGroup = group
			}
		}
		if grouped > 0 {
			s.DominantShare = float64(c[s.DominantGroup]) / float64(grouped)
		}
	}
	r.NMI = groupNMI(ds, graphs, atomMotifs)
}
