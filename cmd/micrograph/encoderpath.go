package main

import (
	"errors"
	"fmt"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// defaultModel is the shipped model embed and explain use without --encoder
// or --model.
const defaultModel = "micrograph-molhiv-v1"

// encoderHelp describes --encoder wherever a pre-trained encoder is taken.
const encoderHelp = "pre-trained encoder: a shipped model's name (" + defaultModel + ", docs/model-card.md), or a .pt file\n" +
	"from micrograph export with its .json beside it (an encoder or a motif model)"

// modelRef resolves ref, given with flag, as model.Resolve does wherever a
// model is taken, and lists the files it reads (for checkOutput). motifs
// says that the command wants a motif model rather than an encoder (the
// advice differs). A name of no shipped model, and a run folder or a
// checkpoint given where an exported file is wanted, are misuse (exit 2),
// each said with the command that exports it; other errors name the file.
func modelRef(flag, ref string, motifs bool) (model.Ref, []input, error) {
	if ref == "" {
		return model.Ref{}, nil, usageError{fmt.Errorf(`%s "": want a shipped model's name or a .pt file`, flag)}
	}
	r, err := model.Resolve(ref)
	var unknown *model.UnknownModelError
	var notExported *model.NotExportedError
	switch {
	case errors.As(err, &unknown):
		return r, nil, usageError{fmt.Errorf("%s %w", flag, err)}
	case errors.As(err, &notExported):
		what, export := "an exported encoder: export its encoder first", "--out enc.pt) and give enc.pt"
		if motifs {
			what, export = "a motif model: export its motif model first", "--motifs --out motifs.pt) and give motifs.pt"
		}
		switch {
		case notExported.Folder && runfolder.IsRun(ref):
			return r, nil, usageError{fmt.Errorf("%s %s is a pre-training run folder, not %s (micrograph export --run %s %s", flag, ref, what, ref, export)}
		case notExported.Folder:
			return r, nil, usageError{fmt.Errorf("%s %w", flag, err)}
		case runfolder.IsCheckpoint(ref):
			return r, nil, usageError{fmt.Errorf("%s %s is a pre-training checkpoint, not %s (micrograph export --checkpoint %s %s", flag, ref, what, ref, export)}
		}
	}
	if err != nil {
		return r, nil, fmt.Errorf("%s %w", flag, err)
	}
	var inputs []input
	for _, f := range r.Files() {
		inputs = append(inputs, input{flag, f, false})
	}
	return r, inputs, nil
}

// optionalEncoder is modelRef for an --encoder that may be left out (no
// pre-trained encoder): the files it reads, none when ref is "".
func optionalEncoder(ref string) ([]input, error) {
	if ref == "" {
		return nil, nil
	}
	_, inputs, err := modelRef("--encoder", ref, false)
	return inputs, err
}

// checkNotCorpus refuses, as misuse of flag, a --data path that is a
// pre-training corpus (featurize --shard-rows), which only pretrain reads:
// the other commands need SMILES, labels or a split, which a corpus does
// not keep.
func checkNotCorpus(flag, path string) error {
	if kind, err := data.KindOf(path); err == nil && kind == data.Corpus {
		return usageError{fmt.Errorf("%s %s is a pre-training corpus (featurize --shard-rows), which only pretrain reads: give the CSV it was made from, or an OGB dataset folder", flag, path)}
	}
	return nil
}
