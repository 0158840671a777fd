package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/matrixfile"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
	"github.com/micrograph/micrograph/trainer/infer"
	"github.com/micrograph/micrograph/trainer/runenv"
	"github.com/spf13/pflag"
)

// scoreFlags are the flags embed, predict and explain share: the input, the
// output and how the model runs.
type scoreFlags struct {
	data, out               string
	columns                 data.Columns
	precision               model.Precision
	skipInvalid             bool // embed and predict only
	batchSize, rdkitWorkers int
	rt                      runtimeFlags
}

// register adds the shared flags; outHelp says what --out takes.
func (s *scoreFlags) register(fs *pflag.FlagSet, outHelp string) {
	fs.StringVar(&s.data, "data", "", "CSV file of SMILES (gzip-compressed or not), read as a stream, or an OGB dataset folder")
	fs.StringVar(&s.out, "out", "", outHelp+"; written atomically (no partial file)")
	columnFlags(fs, &s.columns)
	fs.IntVar(&s.batchSize, "batch-size", 256, "molecules per forward pass (the outputs may differ with it in the last float32 bits: docs/pytorch.md)")
	fs.IntVar(&s.rdkitWorkers, "rdkit-workers", 0, "goroutines featurising CSV rows with RDKit (0: one per core)")
	s.precision = model.FP32
	precisionFlag(fs, &s.precision)
	s.rt.register(fs, false)
}

// registerMatrix adds the shared flags of the commands that write a
// matrix (.npy or .csv), embed and predict, with --skip-invalid.
func (s *scoreFlags) registerMatrix(fs *pflag.FlagSet) {
	s.register(fs, "output file, .npy or .csv by its extension")
	fs.BoolVar(&s.skipInvalid, "skip-invalid", false, "leave rows RDKit rejects out (.csv only: its row column says which input row each line is)\n"+
		"instead of writing them as NaN rows")
}

// checkMatrixOut refuses an --out that is no matrix file, or a .npy with
// --skip-invalid.
func (s *scoreFlags) checkMatrixOut() error {
	format, err := matrixfile.Format(s.out)
	if err != nil {
		return fmt.Errorf("--out %s: want a .npy or .csv file", s.out)
	}
	if s.skipInvalid && format == ".npy" {
		return fmt.Errorf("--skip-invalid needs a .csv --out (a .npy file has no row column to say which rows were kept)")
	}
	return nil
}

// options checks the flags that need no file and turns them into
// infer.Options and the runtime's Env; misuse is a usage error (exit 2).
// checkOut checks --out's format; inputs are the files the command reads
// besides --data, which --out must not be.
func (s *scoreFlags) options(fs *pflag.FlagSet, checkOut func() error, inputs ...input) (infer.Options, runenv.Env, error) {
	if err := checkOut(); err != nil {
		return infer.Options{}, runenv.Env{}, usageError{err}
	}
	switch {
	case s.batchSize < 1:
		return infer.Options{}, runenv.Env{}, usageError{fmt.Errorf("--batch-size %d must be positive", s.batchSize)}
	case s.rdkitWorkers < 0:
		return infer.Options{}, runenv.Env{}, usageError{fmt.Errorf("--rdkit-workers %d must not be negative", s.rdkitWorkers)}
	}
	if err := s.columns.Validate(); err != nil {
		return infer.Options{}, runenv.Env{}, flagError(fs, s, err)
	}
	env, err := s.rt.parse(fs, nil)
	if err != nil {
		return infer.Options{}, runenv.Env{}, err
	}
	if err := checkNotCorpus("--data", s.data); err != nil {
		return infer.Options{}, runenv.Env{}, err
	}
	inputs = append(inputs, input{"--data", s.data, true})
	if err := checkOutput("--out", s.out, inputs...); err != nil {
		return infer.Options{}, runenv.Env{}, err
	}
	if err := s.rt.checkCache(inputs...); err != nil {
		return infer.Options{}, runenv.Env{}, err
	}
	return infer.Options{
		Data: s.data, Columns: s.columns, SkipInvalid: s.skipInvalid, Rejected: s.rejected,
		BatchSize: s.batchSize, RDKitWorkers: s.rdkitWorkers, Precision: s.precision,
	}, env, nil
}

// rejected prints a row the featurisation rejected on stderr, by line, as
// the stream reaches it.
func (s *scoreFlags) rejected(r data.Rejection) {
	smiles := r.SMILES
	if len(smiles) > 80 {
		smiles = smiles[:80] + "..."
	}
	fmt.Fprintf(notes, "micrograph: %s:%d (row %d) %q: %s\n", s.data, r.Line, r.Row, smiles, r.Reason)
}

// report prints a summary of what a scoring pass did on stdout: rows is
// what the output's rows are, and invalid what became of the rows the
// featurisation rejected.
func (s *scoreFlags) report(what, rows, invalid string, rep *infer.Report) {
	mols := rep.Rows - rep.Invalid
	printf("%s %d of %d rows of %s into %s (%d %s; %d invalid, %s) in %.2fs: featurisation %.2fs, model %.2fs (%.0f molecules/s)",
		what, mols, rep.Rows, filepath.Base(s.data), s.out, rep.Written, rows, rep.Invalid, invalid,
		rep.Seconds, rep.FeaturizeSeconds, rep.ModelSeconds, float64(mols)/max(rep.ModelSeconds, 1e-9))
}

// invalidRows says what became of rejected rows in a per-molecule output.
func (s *scoreFlags) invalidRows() string {
	if s.skipInvalid {
		return "left out"
	}
	return "written as NaN rows"
}

func runEmbed(args []string) error {
	fs := newFlags("embed", "--data CSV|DIR --out FILE.npy|FILE.csv [--encoder NAME|encoder.pt] [--atoms] [flags]",
		"Writes the graph embedding of every molecule (the mean of the encoder's node embeddings,\n"+
			"evaluation mode, as linear-eval uses and the snippet of docs/pytorch.md computes) in input row\n"+
			"order: .npy is float32 N×d (numpy.load); .csv has the columns row, smiles, e_0 … e_{d-1}.\n"+
			"Without --encoder the shipped model "+defaultModel+" embeds (docs/model-card.md).\n"+
			"Rows RDKit rejects are listed on stderr by line and written as NaN rows, or left out with\n"+
			"--skip-invalid.\n\n"+
			"With --atoms, one row per atom instead (the node embeddings, whose mean over a molecule is its\n"+
			"graph embedding), molecules in input row order and each one's atoms in RDKit's order: .npy is a\n"+
			"structured array (numpy.load(f)[\"row\"], [\"atom\"], [\"atomic_num\"]: int64; [\"e\"]: float32\n"+
			"atoms×d); .csv has the columns row, atom, atomic_num, e_0 … e_{d-1}. Rejected rows have no atoms:\n"+
			"they are listed on stderr by line and have no rows.\n\n"+
			"The input is read and featurised in chunks, so memory does not grow with it; a line on stderr\n"+
			"every 15 seconds says how far it is.")
	encoder := fs.String("encoder", defaultModel, encoderHelp)
	atoms := fs.Bool("atoms", false, "write one row per atom (input row, atom index in RDKit's order, atomic number,\n"+
		"embedding) instead of one per molecule")
	var s scoreFlags
	s.registerMatrix(fs)
	if err := parseFlags(fs, args, "data", "out"); err != nil {
		return err
	}
	if *atoms && s.skipInvalid {
		return usageError{fmt.Errorf("--skip-invalid does not go with --atoms: rows RDKit rejects have no atoms, so per-atom output never holds them")}
	}
	ref, inputs, err := modelRef("--encoder", *encoder, false)
	if err != nil {
		return err
	}
	opt, env, err := s.options(fs, s.checkMatrixOut, inputs...)
	if err != nil {
		return err
	}
	info, state, err := model.LoadEncoder(ref.Name)
	if err != nil {
		return err
	}
	defer torch.FreeNamed(state)
	if *atoms {
		rep, err := infer.EmbedAtoms(info.Encoder, state, opt, env, s.out)
		if err != nil {
			return flagError(fs, &s, err)
		}
		s.report("embedded the atoms of", "atom rows", "listed on stderr, no rows", rep)
		return nil
	}
	rep, err := infer.Embed(info.Encoder, state, opt, env, s.out)
	if err != nil {
		return flagError(fs, &s, err)
	}
	s.report("embedded", "rows", s.invalidRows(), rep)
	return nil
}

func runPredict(args []string) error {
	fs := newFlags("predict", "--model DIR --data CSV|DIR --out preds.csv [flags]",
		"Predicts every molecule's properties with a model saved by finetune --save, or with the\n"+
			"members of an ensemble folder (DIR/"+infer.EnsembleFile+" listing saved-model folders), in input row\n"+
			"order. Per task, named after it, the mean over the members of the probability of class 1\n"+
			"(classification) or of the value in the label's units (regression); then per task, named\n"+
			"after it with \""+infer.StdSuffix+"\", the members' standard deviation of the same (population: divided\n"+
			"by the number of members; 0 for one model); then \""+infer.MembersColumn+"\", the number of members.\n"+
			".csv: row, smiles, then those columns; .npy: float64 N×(2T+1) in the same order. Rows RDKit\n"+
			"rejects are listed on stderr by line and written as NaN rows, or left out with --skip-invalid.")
	dir := fs.String("model", "", "folder written by finetune --save: one model (model.pt, model.json) or an ensemble\n"+
		"("+infer.EnsembleFile+" and a folder per member)")
	var s scoreFlags
	s.registerMatrix(fs)
	if err := parseFlags(fs, args, "model", "data", "out"); err != nil {
		return err
	}
	if err := checkSavedModelFlag(*dir); err != nil {
		return err
	}
	opt, env, err := s.options(fs, s.checkMatrixOut, savedModelInputs(*dir)...)
	if err != nil {
		return err
	}
	e, rep, err := infer.Predict(*dir, opt, env, s.out)
	if err != nil {
		return flagError(fs, &s, err)
	}
	members := "one model"
	if n := len(e.Members); n > 1 || e.Manifest != nil {
		members = fmt.Sprintf("an ensemble of %d", n)
	}
	s.report(fmt.Sprintf("predicted %d tasks (%s) for", len(e.Tasks()), members), "rows", s.invalidRows(), rep)
	return nil
}

// checkSavedModelFlag refuses, as misuse, a predict --model that names a
// shipped model (and no folder here): a shipped model is a pre-trained
// encoder, which predicts nothing until fine-tuned.
func checkSavedModelFlag(dir string) error {
	if !slices.Contains(model.ShippedModels(), dir) {
		return nil
	}
	if _, err := os.Stat(dir); err == nil {
		return nil // a folder of that name: the user's
	}
	return usageError{fmt.Errorf("--model %s is a shipped pre-trained encoder, which predicts nothing until fine-tuned on labels: micrograph finetune --encoder %s --data LABELLED.csv --out result.json --save DIR, then predict --model DIR", dir, dir)}
}

// savedModelInputs are what predict reads of --model's folder, for
// checkOutput: its model's or every member's files, no output's under any
// name, and the members' folders, no output inside (beside them is fine).
func savedModelInputs(dir string) []input {
	if dir == "" {
		return nil
	}
	var inputs []input
	for _, f := range infer.ModelFiles(dir) {
		st, err := os.Stat(f)
		member := f != dir && err == nil && st.IsDir()
		inputs = append(inputs, input{"--model", f, member})
	}
	return inputs
}
