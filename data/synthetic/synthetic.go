// Package synthetic is the program's built-in dataset: molecules assembled
// from known functional groups joined by short carbon linkers, with tasks
// defined by which groups are present. Because every atom records the
// group it came from, it is the ground truth for motif recovery.
package synthetic

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/micrograph/micrograph/data"
)

// synthGroup is a functional group as a SMILES template whose first atom
// bonds to the rest of the molecule. exits are the template's atoms that may
// carry one further substituent.
type synthGroup struct {
	name   string
	smiles string
	exits  []int
	ring   bool
}

// synthGroups are the planted groups; a group's index is its id in
// Dataset.AtomGroup and Batch.AtomGroup.
var synthGroups = []synthGroup{
	{"benzene", "c1ccccc1", []int{2, 3, 4}, true},
	{"pyridine", "c1ccncc1", []int{2, 4}, true},
	{"thiophene", "c1cccs1", []int{2, 3}, true},
	{"cyclohexane", "C1CCCCC1", []int{2, 3, 4}, true},
	{"chlorobenzene", "c1ccc(Cl)cc1", []int{1, 2, 5}, true},
	{"difluorobenzene", "c1cc(F)cc(F)c1", []int{1, 4}, true},
	{"morpholine", "N1CCOCC1", []int{2}, true},
	{"nitro", "[N+](=O)[O-]", nil, false},
	{"carboxyl", "C(=O)O", nil, false},
	{"amine", "N", []int{0}, false},
	{"amide", "C(=O)N", []int{2}, false},
	{"hydroxyl", "O", nil, false},
	{"methylsulfonyl", "S(=O)(=O)C", []int{3}, false},
	{"methyl ester", "C(=O)OC", nil, false},
	{"nitrile", "C#N", nil, false},
	{"ketone", "C(=O)C", []int{2}, false},
}

// Groups names the planted groups in id order.
var Groups = func() []string {
	names := make([]string, len(synthGroups))
	for i, g := range synthGroups {
		names[i] = g.name
	}
	return names
}()

// synthTask is a label defined by group counts.
type synthTask struct {
	name string
	rule func(count []int) bool
}

const (
	gBenzene = iota
	gPyridine
	gThiophene
	gCyclohexane
	gChlorobenzene
	gDifluorobenzene
	gMorpholine
	gNitro
	gCarboxyl
	gAmine
	gAmide
	gHydroxyl
	gSulfonyl
	gEster
	gNitrile
	gKetone
)

// synthTasks are the tasks of the synthetic dataset: presence, absence and
// count rules over the planted groups.
var synthTasks = []synthTask{
	{"nitro_on_aromatic", func(c []int) bool {
		return c[gNitro] > 0 && c[gBenzene]+c[gPyridine]+c[gThiophene]+c[gChlorobenzene]+c[gDifluorobenzene] > 0
	}},
	{"acid_without_amine", func(c []int) bool { return c[gCarboxyl] > 0 && c[gAmine] == 0 }},
	{"halogenated_and_sulfonyl", func(c []int) bool {
		return c[gChlorobenzene]+c[gDifluorobenzene] > 0 && c[gSulfonyl] > 0
	}},
	{"amide_or_ester", func(c []int) bool { return c[gAmide] > 0 || c[gEster] > 0 }},
	{"two_saturated_or_hetero_rings", func(c []int) bool { return c[gCyclohexane]+c[gMorpholine]+c[gPyridine]+c[gThiophene] >= 2 }},
}

// Tasks names the synthetic dataset's tasks in column order.
var Tasks = func() []string {
	names := make([]string, len(synthTasks))
	for i, t := range synthTasks {
		names[i] = t.name
	}
	return names
}()

// Options control the synthetic dataset.
type Options struct {
	Molecules int     // number of molecules; 0 means 2000
	Seed      uint64  // the same seed gives the same dataset
	Noise     float64 // probability that a label is flipped; 0 means 0.07, negative means none
}

// Atoms per synthetic molecule, and groups per molecule.
const (
	synthMinAtoms, synthMaxAtoms   = 10, 50
	synthMinGroups, synthMaxGroups = 2, 6
)

// Table generates the synthetic molecules as a data.Table: SMILES, one
// label per task (a rule over the groups present, flipped with probability
// Noise), and the planted group of every atom in SMILES atom order.
func Table(opt Options) *data.Table {
	n := opt.Molecules
	if n <= 0 {
		n = 2000
	}
	noise := opt.Noise
	switch {
	case noise == 0:
		noise = 0.07
	case noise < 0:
		noise = 0
	}
	r := rand.New(rand.NewPCG(opt.Seed, 0x73796e7468)) // "synth"
	t := &data.Table{Source: "synthetic (seed " + strconv.FormatUint(opt.Seed, 10) + ")", Tasks: Tasks}
	for i := 0; i < n; i++ {
		m := synthMolecule(r)
		t.SMILES = append(t.SMILES, m.smiles)
		t.Lines = append(t.Lines, i+2)
		t.AtomGroups = append(t.AtomGroups, m.groups)
		count := make([]int, len(synthGroups))
		for _, g := range m.planted {
			count[g]++
		}
		for _, task := range synthTasks {
			y := task.rule(count)
			if r.Float64() < noise {
				y = !y
			}
			label := float32(0)
			if y {
				label = 1
			}
			t.Labels = append(t.Labels, label)
		}
	}
	return t
}

// Write generates the synthetic dataset and featurises it into the
// new folder out with a scaffold split; raw/node_group.csv.gz records each
// atom's planted group (-1 for linker carbons).
func Write(out string, opt Options) (*data.FeaturizeReport, error) {
	t := Table(opt)
	rep, err := data.Featurize(t, out, data.FeaturizeOptions{Split: "scaffold"})
	if err != nil {
		return rep, err
	}
	if len(rep.Rejected) > 0 {
		return rep, fmt.Errorf("synthetic molecule %q rejected by RDKit: %s", rep.Rejected[0].SMILES, rep.Rejected[0].Reason)
	}
	return rep, nil
}

// synthMol is one generated molecule.
type synthMol struct {
	smiles  string
	groups  []int32 // planted group per atom, SMILES order; -1 for linkers
	planted []int   // group id of every planted instance
}

// synthNode is a placed group instance and the instances hanging off it.
type synthNode struct {
	group    int
	children map[int][]synthEdge // template atom -> substituents
}

type synthEdge struct {
	linker int // carbons between the two groups
	child  *synthNode
}

// synthMolecule draws group trees until one has an acceptable size.
func synthMolecule(r *rand.Rand) synthMol {
	for {
		root := &synthNode{group: synthRingGroup(r), children: map[int][]synthEdge{}}
		type site struct {
			node *synthNode
			atom int
		}
		var open []site
		addSites := func(n *synthNode) {
			for _, a := range synthGroups[n.group].exits {
				open = append(open, site{n, a})
			}
		}
		addSites(root)
		want := synthMinGroups + r.IntN(synthMaxGroups-synthMinGroups+1)
		for placed := 1; placed < want && len(open) > 0; placed++ {
			k := r.IntN(len(open))
			s := open[k]
			open = append(open[:k], open[k+1:]...)
			g := r.IntN(len(synthGroups))
			linker := r.IntN(4)
			// Two heteroatoms bonded directly (N-O, S-N, ...) are rare in
			// real molecules; put at least one carbon between them.
			if linker == 0 && !synthCarbon(s.node.group, s.atom) && !synthCarbon(g, 0) {
				linker = 1
			}
			child := &synthNode{group: g, children: map[int][]synthEdge{}}
			s.node.children[s.atom] = append(s.node.children[s.atom], synthEdge{linker, child})
			addSites(child)
		}
		var m synthMol
		var w synthWriter
		w.write(&m, root)
		if n := len(m.groups); n >= synthMinAtoms && n <= synthMaxAtoms {
			m.smiles = w.sb.String()
			return m
		}
	}
}

// synthRingGroup draws a ring group with exits, the core of a molecule.
func synthRingGroup(r *rand.Rand) int {
	for {
		g := r.IntN(len(synthGroups))
		if synthGroups[g].ring && len(synthGroups[g].exits) > 0 {
			return g
		}
	}
}

// synthCarbon reports whether template atom a of group g is a carbon.
func synthCarbon(g, a int) bool {
	el := synthAtoms(synthGroups[g].smiles)[a].element
	return el == "C" || el == "c"
}

// synthAtom is an atom of a template: its SMILES text, element, the ring
// labels following it, and the literal text (bonds, branches) after it.
type synthAtom struct {
	text, element string
	rings         []byte
	after         string
}

// synthAtoms splits one of the templates above (or a SMILES written from
// them) into atoms. The templates use only bracket atoms, the organic subset
// and single-digit ring labels.
func synthAtoms(smiles string) []synthAtom {
	var atoms []synthAtom
	var lead string // text before the first atom (none in the templates)
	for i := 0; i < len(smiles); {
		c := smiles[i]
		switch {
		case c == '[':
			end := strings.IndexByte(smiles[i:], ']') + i + 1
			text := smiles[i:end]
			el := strings.TrimLeft(text[1:len(text)-1], "0123456789")
			el = strings.TrimRight(el, "+-0123456789H@]")
			atoms = append(atoms, synthAtom{text: text, element: el})
			i = end
		case strings.HasPrefix(smiles[i:], "Cl"), strings.HasPrefix(smiles[i:], "Br"):
			atoms = append(atoms, synthAtom{text: smiles[i : i+2], element: smiles[i : i+2]})
			i += 2
		case strings.IndexByte("BCNOPSFIbcnops", c) >= 0:
			atoms = append(atoms, synthAtom{text: smiles[i : i+1], element: smiles[i : i+1]})
			i++
		case c >= '1' && c <= '9':
			atoms[len(atoms)-1].rings = append(atoms[len(atoms)-1].rings, c)
			i++
		default:
			if len(atoms) == 0 {
				lead += string(c)
			} else {
				atoms[len(atoms)-1].after += string(c)
			}
			i++
		}
	}
	if lead != "" {
		panic("synthetic group template starts with " + lead)
	}
	return atoms
}

// synthWriter writes a group tree as SMILES, atom by atom, so that the atom
// order RDKit will use is known. Ring labels of templates are renumbered so
// that a ring still open around a substituent branch keeps its own number.
type synthWriter struct {
	sb    strings.Builder
	inUse [100]bool
}

func (w *synthWriter) write(m *synthMol, n *synthNode) {
	m.planted = append(m.planted, n.group)
	label := map[byte]int{}
	for i, a := range synthAtoms(synthGroups[n.group].smiles) {
		w.sb.WriteString(a.text)
		m.groups = append(m.groups, int32(n.group))
		for _, r := range a.rings {
			if num, ok := label[r]; ok {
				w.ring(num)
				w.inUse[num] = false
				delete(label, r)
				continue
			}
			num := 1
			for w.inUse[num] {
				num++
			}
			w.inUse[num] = true
			label[r] = num
			w.ring(num)
		}
		for _, e := range n.children[i] {
			w.sb.WriteByte('(')
			for range e.linker {
				w.sb.WriteByte('C')
				m.groups = append(m.groups, -1)
			}
			w.write(m, e.child)
			w.sb.WriteByte(')')
		}
		w.sb.WriteString(a.after)
	}
}

func (w *synthWriter) ring(num int) {
	if num > 9 {
		w.sb.WriteString("%" + strconv.Itoa(num))
	} else {
		w.sb.WriteString(strconv.Itoa(num))
	}
}
