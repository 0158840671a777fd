package data

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Kind is what a path given as data holds, as KindOf tells it.
type Kind int

// The kinds of data: every opener reads these, and only these.
const (
	// OGBFolder is a dataset folder in OGB's layout (Load, Open).
	OGBFolder Kind = iota + 1
	// Corpus is a sharded pre-training corpus (package data/corpus),
	// which only pre-training reads.
	Corpus
	// CSV is a CSV file of SMILES and labels, gzip-compressed or not
	// (ReadTable, OpenSMILES), featurised into an OGB folder under the
	// cache when opened whole.
	CSV
)

func (k Kind) String() string {
	switch k {
	case OGBFolder:
		return "OGB dataset folder"
	case Corpus:
		return "pre-training corpus"
	case CSV:
		return "CSV file"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// CorpusManifestFile is the file that makes a folder a pre-training corpus
// (package data/corpus): its manifest.
const CorpusManifestFile = "corpus.json"

// KindOf says what path holds: the one classification every opener of
// data follows (Open, ContentKey, the pre-training set of data/corpus,
// scoring streams, the commands' checks). A folder holding
// CorpusManifestFile is a corpus, any other folder an OGB dataset folder,
// and a file a CSV file. A path that is not there is an error naming it.
// A new format is its reader and its case here.
func KindOf(path string) (Kind, error) {
	st, err := os.Stat(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return 0, fmt.Errorf("dataset %s: %w", path, err)
	}
	if !st.IsDir() {
		return CSV, nil
	}
	if _, err := os.Stat(filepath.Join(path, CorpusManifestFile)); err == nil {
		return Corpus, nil
	}
	return OGBFolder, nil
}

// CorpusError refuses a pre-training corpus where other data is needed: it
// keeps neither labels, nor a split, nor SMILES.
type CorpusError struct {
	Path string
	Why  string // what the reader needs that a corpus lacks
}

func (e *CorpusError) Error() string {
	return fmt.Sprintf("dataset %s is a pre-training corpus (%s): only pretrain reads it; give the CSV it was made from", e.Path, e.Why)
}
