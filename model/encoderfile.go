package model

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/internal/inputfile"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/torch/nn"
)

// EncoderFormat names the layout of exported encoders.
const EncoderFormat = "micrograph-encoder/1"

// EncoderInfo is encoder.json, written next to an exported encoder.pt: what a
// reader needs to rebuild the DeeperGCN (docs/method.md §2) and load the weights.
type EncoderInfo struct {
	Format          string        `json:"format"`
	Architecture    string        `json:"architecture"`
	Encoder         EncoderConfig `json:"encoder"`
	AtomFeatureDims []int64       `json:"atom_feature_dims"`
	BondFeatureDims []int64       `json:"bond_feature_dims"`
	Pool            string        `json:"pool"`
	Keys            []string      `json:"keys"`
	Source          string        `json:"source,omitempty"` // checkpoint it came from
	Step            int64         `json:"step,omitempty"`
}

// encoderArchitecture is what EncoderInfo.Architecture says of every encoder.
const encoderArchitecture = "DeeperGCN res+ with GENConv softmax aggregation (docs/method.md §2)"

// EncoderInfoPath is the encoder.json belonging to an encoder .pt file.
func EncoderInfoPath(encoderPath string) string {
	return strings.TrimSuffix(encoderPath, ".pt") + ".json"
}

// SaveEncoder writes an encoder's tensors (named without "encoder.") to path
// and its description to EncoderInfoPath(path), both atomically.
func SaveEncoder(path string, cfg EncoderConfig, state []torch.Named, source string, step int64) (err error) {
	defer torch.Recover(&err)
	if err := checkEncoderState(cfg, state); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	info := EncoderInfo{
		Format:          EncoderFormat,
		Architecture:    encoderArchitecture,
		Encoder:         cfg,
		AtomFeatureDims: AtomFeatureDims,
		BondFeatureDims: BondFeatureDims,
		Pool:            "mean",
		Source:          source,
		Step:            step,
	}
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
	return atomicfile.WriteFile(EncoderInfoPath(path), append(b, '\n'), 0o644)
}

// LoadEncoder reads the encoder ref names (Resolve): a shipped model's, or
// a file's, an exported encoder or a motif model (whose encoder it takes). The tensors are on the CPU and belong to the caller.
func LoadEncoder(ref string) (_ EncoderInfo, _ []torch.Named, err error) {
	defer torch.Recover(&err)
	var info EncoderInfo
	r, err := Resolve(ref)
	if err != nil {
		return info, nil, err
	}
	if r.Shipped {
		src, err := openMotifModel(r)
		if err != nil {
			return info, nil, err
		}
		return encoderFromMotifModel(src)
	}
	path := r.Name
	if err := inputfile.ReadJSON(EncoderInfoPath(path), &info); err != nil {
		return info, nil, fmt.Errorf("encoder %s: its description: %w", path, err)
	}
	if info.Format == MotifModelFormat {
		src, err := openMotifModel(r)
		if err != nil {
			return info, nil, err
		}
		return encoderFromMotifModel(src)
	}
	if info.Format != EncoderFormat {
		return info, nil, fmt.Errorf("%s: format %s, want %q", EncoderInfoPath(path), inputfile.Quote(info.Format), EncoderFormat)
	}
	if err := info.Encoder.Validate(); err != nil {
		return info, nil, field.InFile(EncoderInfoPath(path), err)
	}
	// What the description says beyond the architecture must be what every
	// micrograph encoder is: the readout and the feature vocabularies are
	// not settings, and a file that says otherwise was edited or is not ours.
	switch {
	case info.Pool != "mean":
		return info, nil, fmt.Errorf("%s: pool %s: micrograph encoders read out by the mean (docs/method.md §2.4), the only pooling the weights were trained with", EncoderInfoPath(path), inputfile.Quote(info.Pool))
	case !slices.Equal(info.AtomFeatureDims, AtomFeatureDims):
		return info, nil, fmt.Errorf("%s: atom_feature_dims %s, but the featurisation's vocabularies are %v (docs/method.md §8.1)", EncoderInfoPath(path), inputfile.Shorten(fmt.Sprint(info.AtomFeatureDims)), AtomFeatureDims)
	case !slices.Equal(info.BondFeatureDims, BondFeatureDims):
		return info, nil, fmt.Errorf("%s: bond_feature_dims %s, but the featurisation's vocabularies are %v (docs/method.md §8.1)", EncoderInfoPath(path), inputfile.Shorten(fmt.Sprint(info.BondFeatureDims)), BondFeatureDims)
	}
	state, _, err := torch.Load(path, torch.CPU)
	if err != nil {
		return info, nil, err
	}
	if err := info.Encoder.CheckSizes(state, ""); err != nil {
		torch.FreeNamed(state)
		return info, nil, fmt.Errorf("%s: %v (the weights: %s)", EncoderInfoPath(path), err, path)
	}
	return info, state, nil
}

// EncoderKey identifies what the encoder ref is, by content, so that a
// result kept for one encoder is never taken for another's: a shipped
// model's name with the SHA-256 of its weights, or the SHA-256 of a file's
// weights and of its description.
func EncoderKey(ref string) (string, error) {
	if s, ok := shippedModel(ref); ok {
		return fmt.Sprintf("model:%s:%x", ref, sha256.Sum256(s.weights)), nil
	}
	if _, err := Resolve(ref); err != nil {
		return "", err
	}
	key := "file"
	for _, path := range []string{ref, EncoderInfoPath(ref)} {
		f, err := inputfile.Open(path)
		if err != nil {
			return "", fmt.Errorf("encoder %s: %w", ref, err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("encoder %s: %w", path, err)
		}
		key += fmt.Sprintf(":%x", h.Sum(nil))
	}
	return key, nil
}

// checkEncoderState makes sure that state holds exactly the tensors, with
// their shapes, of the encoder cfg describes, so that no encoder file
// contradicts its description.
func checkEncoderState(cfg EncoderConfig, state []torch.Named) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("the encoder's configuration: %w", err)
	}
	store := nn.NewStore(torch.CPU, torch.Float32)
	defer store.Free()
	enc := NewDeeperGCN(store.Root(), cfg)
	defer enc.Free()
	want := map[string][]int64{}
	for _, n := range store.State() {
		want[n.Name] = n.Tensor.Shape()
	}
	var differ []string
	for _, n := range state {
		shape, ok := want[n.Name]
		switch {
		case !ok:
			differ = append(differ, fmt.Sprintf("%s is not the encoder's", n.Name))
		case !slices.Equal(shape, n.Tensor.Shape()):
			differ = append(differ, fmt.Sprintf("%s is %v, the configuration's %v", n.Name, n.Tensor.Shape(), shape))
		}
		delete(want, n.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		differ = append(differ, name+" is missing")
	}
	if len(differ) > 0 {
		return fmt.Errorf("the tensors contradict the configuration (hidden %d, layers %d, mlp_layers %d, learn_t %v, bond_per_layer %v): %d differ, first %s",
			cfg.Hidden, cfg.Layers, cfg.MLPLayers, cfg.LearnT, cfg.BondPerLayer, len(differ), differ[0])
	}
	return nil
}
