package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/micrograph/micrograph/graph"
	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/ops"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// MotifModelFormat names the layout of motif model files.
const MotifModelFormat = "micrograph-motif-model/1"

// MotifModel is what a pre-trained MICRO-Graph model needs to say which of
// its motifs each atom of a molecule belongs to (docs/method.md §14): the
// encoder ("encoder.*"), the motif table M ("motif_embeddings", K×d) and the
// objective's assignment head, W_h ("W_h.weight") under the paper's objective,
// the projection head ("projection_head.*") under the released one. Its
// tensors keep the pre-training model's names, so a checkpoint's state loads
// into it; it drops what only training needs (W_s, W_e).
type MotifModel struct {
	Config  Config
	Store   *nn.Store
	Encoder *DeeperGCN
	Motifs  *torch.Tensor
	// Head maps node embeddings (N×d) to the space the motif table lives
	// in: the objective's assignment head.
	Head Projection
}

// NewMotifModel registers a motif model of cfg on dev, its tensors
// uninitialised until Load.
func NewMotifModel(cfg Config, dev torch.Device) (*MotifModel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	reader, err := AsMotifReader(cfg.NewObjective())
	if err != nil {
		return nil, err
	}
	s := nn.NewStore(dev, torch.Float32)
	root := s.Root()
	d := int64(cfg.Encoder.Hidden)
	m := &MotifModel{Config: cfg, Store: s}
	m.Encoder = NewDeeperGCN(root.Sub("encoder"), cfg.Encoder)
	m.Motifs = root.Param("motif_embeddings", torch.Empty([]int64{int64(cfg.Motifs), d}, root.Options()))
	m.Head = reader.AssignmentHead(root)
	return m, nil
}

// Load copies into m the tensors of state that m has, by name: state may be
// a pre-training model's whole state (a checkpoint's), or a motif model
// file's. Every tensor of m must be there with its shape.
func (m *MotifModel) Load(state []torch.Named) error {
	mine := m.Store.State()
	names := make(map[string]bool, len(mine))
	for _, n := range mine {
		names[n.Name] = true
	}
	var picked []torch.Named
	for _, n := range state {
		if names[n.Name] {
			picked = append(picked, n)
		}
	}
	return torch.LoadState(mine, picked)
}

// Free releases every tensor of the model.
func (m *MotifModel) Free() {
	m.Encoder.Free()
	m.Store.Free()
}

// Cosines encodes a batch in evaluation mode and returns, for every node,
// the cosine between its assignment head's projection and each motif
// (N×K): c_ik = cos(A h_i, M_k), with A = W_h or the projection head.
func (m *MotifModel) Cosines(g *graph.Graph) *torch.Tensor {
	h := m.Encoder.Forward(g, false)
	return ops.Cosine(m.Head.Forward(h), m.Motifs)
}

// EncoderState is the encoder's tensors named without the "encoder." prefix,
// as an exported encoder file holds them.
func (m *MotifModel) EncoderState() []torch.Named { return encoderState(m.Store) }

// MotifModelInfo is the .json written next to a motif model's .pt: what a
// reader needs to rebuild it, where it came from, and what its motifs are.
type MotifModelInfo struct {
	Format          string   `json:"format"`
	Name            string   `json:"name,omitempty"` // a shipped model's name
	Model           Config   `json:"model"`          // the pre-training model: encoder, objective, K, τ
	AtomFeatureDims []int64  `json:"atom_feature_dims"`
	BondFeatureDims []int64  `json:"bond_feature_dims"`
	Keys            []string `json:"keys"`
	Source          string   `json:"source,omitempty"` // checkpoint it came from
	Step            int64    `json:"step,omitempty"`
	// Data is the dataset pre-training read, and Legend each motif's
	// commonest fragments in its molecules (docs/method.md §14); empty when
	// that dataset was not at hand.
	Data   string       `json:"data,omitempty"`
	Legend []MotifUsage `json:"legend,omitempty"`
}

// LegendFragments is how many fragments per motif a legend lists, and all
// that a page draws of one read from a file.
const LegendFragments = 5

// MotifUsage is what one motif stands for in a set of molecules: how many
// of their atoms it takes and its commonest fragments, the connected pieces
// of atoms assigned to it, as canonical SMILES.
type MotifUsage struct {
	Motif     int             `json:"motif"`
	Atoms     int64           `json:"atoms"`
	Fragments []FragmentCount `json:"fragments"` // most frequent first
}

// FragmentCount is a fragment's canonical SMILES and how often it occurs.
type FragmentCount struct {
	SMILES string `json:"smiles"`
	Count  int64  `json:"count"`
}

// MotifModelInfoPath is the .json belonging to a motif model's .pt file.
func MotifModelInfoPath(path string) string { return EncoderInfoPath(path) }

// SaveMotifModel writes m's tensors to path and info, completed with the
// format, the feature vocabularies, the configuration and the keys, to
// MotifModelInfoPath(path), both atomically.
func SaveMotifModel(path string, m *MotifModel, info MotifModelInfo) (err error) {
	defer torch.Recover(&err)
	state := m.Store.State()
	info.Format, info.Model = MotifModelFormat, m.Config
	info.AtomFeatureDims, info.BondFeatureDims = AtomFeatureDims, BondFeatureDims
	info.Keys = nil
	for _, n := range state {
		info.Keys = append(info.Keys, n.Name)
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	if err := torch.Save(path, state, nil); err != nil {
		return err
	}
	return atomicfile.WriteFile(MotifModelInfoPath(path), append(b, '\n'), 0o644)
}

// LoadMotifModel reads the motif model ref names (Resolve), a shipped one
// or a file, onto dev.
func LoadMotifModel(ref string, dev torch.Device) (_ *MotifModel, _ MotifModelInfo, err error) {
	defer torch.Recover(&err)
	r, err := Resolve(ref)
	if err != nil {
		return nil, MotifModelInfo{}, err
	}
	src, err := openMotifModel(r)
	if err != nil {
		return nil, MotifModelInfo{}, err
	}
	state, _, err := src.state(torch.CPU)
	if err != nil {
		return nil, src.info, err
	}
	defer torch.FreeNamed(state)
	// Before the model the description asks for is built.
	if err := src.info.Model.CheckSizes(state); err != nil {
		return nil, src.info, fmt.Errorf("%s: %v (the weights: %s)", src.infoName, field.Within("model", err), src.name)
	}
	m, err := NewMotifModel(src.info.Model, dev)
	if err != nil {
		return nil, src.info, fmt.Errorf("%s: %w", src.infoName, err)
	}
	if err := m.Load(state); err != nil {
		m.Free()
		return nil, src.info, fmt.Errorf("%s: %w", src.name, err)
	}
	return m, src.info, nil
}

// motifModelSource is a motif model's description, read, and the way to its
// tensors: a file, or a shipped model's embedded bytes.
type motifModelSource struct {
	name, infoName string // for errors
	info           MotifModelInfo
	state          func(dev torch.Device) ([]torch.Named, map[string]string, error)
}

// openMotifModel reads and checks the description of the motif model r
// names.
func openMotifModel(r Ref) (*motifModelSource, error) {
	ref := r.Name
	if shipped, ok := shippedModel(ref); r.Shipped && ok {
		info, err := parseMotifModelInfo(shipped.infoName, shipped.info)
		if err != nil {
			return nil, err
		}
		return &motifModelSource{name: ref, infoName: shipped.infoName, info: info,
			state: func(dev torch.Device) ([]torch.Named, map[string]string, error) {
				return torch.LoadFrom(shipped.weightsName, bytes.NewReader(shipped.weights), int64(len(shipped.weights)), dev)
			}}, nil
	}
	infoPath := MotifModelInfoPath(ref)
	b, err := inputfile.ReadAll(infoPath, inputfile.MaxJSONBytes)
	if err != nil {
		return nil, fmt.Errorf("motif model %s: its description: %w", ref, err)
	}
	info, err := parseMotifModelInfo(infoPath, b)
	if err != nil {
		return nil, err
	}
	return &motifModelSource{name: ref, infoName: infoPath, info: info,
		state: func(dev torch.Device) ([]torch.Named, map[string]string, error) { return torch.Load(ref, dev) }}, nil
}

// parseMotifModelInfo decodes and checks a motif model's description.
func parseMotifModelInfo(name string, b []byte) (MotifModelInfo, error) {
	var info MotifModelInfo
	if err := inputfile.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("%s: %w", name, err)
	}
	switch {
	case info.Format != MotifModelFormat:
		return info, fmt.Errorf("%s: format %s, want %q", name, inputfile.Quote(info.Format), MotifModelFormat)
	case !slices.Equal(info.AtomFeatureDims, AtomFeatureDims):
		return info, fmt.Errorf("%s: atom_feature_dims %s, but the featurisation's vocabularies are %v (docs/method.md §8.1)", name, inputfile.Shorten(fmt.Sprint(info.AtomFeatureDims)), AtomFeatureDims)
	case !slices.Equal(info.BondFeatureDims, BondFeatureDims):
		return info, fmt.Errorf("%s: bond_feature_dims %s, but the featurisation's vocabularies are %v (docs/method.md §8.1)", name, inputfile.Shorten(fmt.Sprint(info.BondFeatureDims)), BondFeatureDims)
	}
	if err := info.Model.Validate(); err != nil {
		return info, field.InFile(name, field.Within("model", err))
	}
	return info, nil
}

// encoderFromMotifModel is LoadEncoder for a motif model: its encoder's
// description and tensors.
func encoderFromMotifModel(src *motifModelSource) (EncoderInfo, []torch.Named, error) {
	info := EncoderInfo{
		Format:          EncoderFormat,
		Architecture:    encoderArchitecture,
		Encoder:         src.info.Model.Encoder,
		AtomFeatureDims: AtomFeatureDims,
		BondFeatureDims: BondFeatureDims,
		Pool:            "mean",
		Source:          src.name,
		Step:            src.info.Step,
	}
	state, _, err := src.state(torch.CPU)
	if err != nil {
		return info, nil, err
	}
	var enc, rest []torch.Named
	for _, n := range state {
		if name, ok := strings.CutPrefix(n.Name, "encoder."); ok {
			enc = append(enc, torch.Named{Name: name, Tensor: n.Tensor})
			info.Keys = append(info.Keys, name)
		} else {
			rest = append(rest, n)
		}
	}
	torch.FreeNamed(rest)
	if err := info.Encoder.CheckSizes(enc, ""); err != nil {
		torch.FreeNamed(enc)
		return info, nil, fmt.Errorf("%s: %v (the weights: %s)", src.infoName, field.Within("model.encoder", err), src.name)
	}
	if err := checkEncoderState(info.Encoder, enc); err != nil {
		torch.FreeNamed(enc)
		return info, nil, fmt.Errorf("%s: %w", src.name, err)
	}
	return info, enc, nil
}
