package rdkit

import (
	"compress/gzip"
	"encoding/gob"
	"errors"
	"fmt"
	"io"

	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/inputfile"
)

// RecordingEnv names a file of featurisations that RDKit made elsewhere
// (Record writes one). With it set, SmilesToGraph and MurckoScaffold answer
// from the file and never load RDKit: a SMILES the file does not hold is an
// error naming the file, one RDKit rejected when it was recorded is rejected
// again with RDKit's reason, and depictions are refused. It is for machines
// without RDKit that featurise known molecules: on the GPU machine
// (scripts/gpu-check.sh) the test binaries featurise synthetic datasets.
const RecordingEnv = "MICROGRAPH_CHEM_RECORDING"

// recordingFormat is written first in a recording, so that a file of another
// layout or another featurisation is refused instead of misread.
const recordingFormat = "micrograph rdkit recording 1"

// recordingFile is a recording's content, gob-encoded under gzip.
type recordingFile struct {
	Format   string
	RDKit    string // the version that made the featurisations
	Features [2]int // NumAtomFeatures, NumBondFeatures
	Entries  []recorded
}

// recorded is one SMILES as RDKit featurised it (with its scaffold), or the
// reason RDKit rejected it.
type recorded struct {
	SMILES string
	Graph  *Graph
	Reject string
}

// recording is a read recording: featurisations by SMILES.
type recording struct {
	path    string
	rdkit   string
	entries map[string]recorded
}

// Record featurises every SMILES with RDKit (scaffolds included, as a
// scaffold split needs) and writes the results to path, for machines without
// RDKit (RecordingEnv). A SMILES that RDKit rejects is recorded with the
// reason; duplicates are recorded once.
func Record(path string, smiles []string) error {
	v, err := RDKitVersion()
	if err != nil {
		return err
	}
	if active != nil {
		return fmt.Errorf("rdkit: %s is set: a recording is made with RDKit itself", RecordingEnv)
	}
	f := recordingFile{Format: recordingFormat, RDKit: v, Features: [2]int{NumAtomFeatures, NumBondFeatures}}
	seen := make(map[string]bool, len(smiles))
	for _, s := range smiles {
		if seen[s] {
			continue
		}
		seen[s] = true
		g, err := SmilesToGraph(s, true)
		e := recorded{SMILES: s, Graph: g}
		if err != nil {
			e.Reject = err.Error()
		}
		f.Entries = append(f.Entries, e)
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		z := gzip.NewWriter(w)
		if err := gob.NewEncoder(z).Encode(&f); err != nil {
			return err
		}
		return z.Close()
	})
}

// readRecording reads a file Record wrote.
func readRecording(path string) (*recording, error) {
	fail := func(err error) (*recording, error) {
		return nil, fmt.Errorf("rdkit: %s=%s: %w", RecordingEnv, path, err)
	}
	file, err := inputfile.Open(path)
	if err != nil {
		return fail(err)
	}
	defer file.Close()
	z, err := gzip.NewReader(file)
	if err != nil {
		return fail(err)
	}
	var f recordingFile
	if err := gob.NewDecoder(z).Decode(&f); err != nil {
		return fail(err)
	}
	if f.Format != recordingFormat || f.Features != [2]int{NumAtomFeatures, NumBondFeatures} {
		return fail(fmt.Errorf("written as %q with %v atom and bond features, want %q with %d and %d (make it again)",
			f.Format, f.Features, recordingFormat, NumAtomFeatures, NumBondFeatures))
	}
	r := &recording{path: path, rdkit: f.RDKit, entries: make(map[string]recorded, len(f.Entries))}
	for _, e := range f.Entries {
		r.entries[e.SMILES] = e
	}
	return r, nil
}

// graph is SmilesToGraph's answer from the recording: a copy (empty, not
// nil, slices for a molecule without bonds, as RDKit's), without the
// scaffold unless asked for.
func (r *recording) graph(smiles string, scaffold bool) (*Graph, error) {
	e, ok := r.entries[smiles]
	switch {
	case !ok:
		return nil, fmt.Errorf("rdkit: %q is not in the recording %s (%s; RDKit itself is not loaded)", smiles, r.path, RecordingEnv)
	case e.Graph == nil:
		return nil, errors.New(e.Reject)
	}
	g := &Graph{
		AtomFeatures: append(make([]uint8, 0, len(e.Graph.AtomFeatures)), e.Graph.AtomFeatures...),
		BondAtoms:    append(make([]int32, 0, len(e.Graph.BondAtoms)), e.Graph.BondAtoms...),
		BondFeatures: append(make([]uint8, 0, len(e.Graph.BondFeatures)), e.Graph.BondFeatures...),
	}
	if scaffold {
		g.Scaffold = e.Graph.Scaffold
	}
	return g, nil
}

// refuse is the error of a call that needs RDKit itself.
func (r *recording) refuse(what string) error {
	return fmt.Errorf("rdkit: %s needs RDKit itself; %s=%s replays featurisations only", what, RecordingEnv, r.path)
}
