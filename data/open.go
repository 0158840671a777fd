package data

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/micrograph/micrograph/internal/inputfile"
)

// OpenOptions say where Open may keep what it derives.
type OpenOptions struct {
	// CacheDir holds featurised CSVs (featurized/) and the binary caches of
	// dataset folders (datasets/), which are only read; empty means
	// DefaultCacheDir().
	CacheDir string
	// Columns say which columns of a CSV hold the SMILES and the labels
	// (the default rule when zero); a dataset folder takes none. They are
	// what a result is computed on, so the caller takes them from its
	// saved configuration.
	Columns Columns
	// Limits bound the CSV rows given to RDKit (DefaultLimits where
	// zero); rows beyond them are rejected.
	Limits Limits
	// Report receives one line saying how many rows a featurisation
	// rejected and where they are listed, and one saying which column the
	// SMILES were read from when the default rule found it by its name;
	// nil is silent.
	Report io.Writer `json:"-"`
	// Stop, when closed, ends a CSV's featurisation before its next
	// molecule: Open returns ErrStopped and the cache is left without the
	// CSV, to be featurised from the start next time. Nil never stops.
	Stop <-chan struct{} `json:"-"`
}

func (o OpenOptions) cacheDir() (string, error) {
	if o.CacheDir != "" {
		return o.CacheDir, nil
	}
	return DefaultCacheDir()
}

// Open loads an OGB dataset folder, or a CSV file of SMILES and labels
// (gzip-compressed or not), which it featurises once with OGB's rules and a
// scaffold split and keeps under the cache folder, keyed by the file's content.
func Open(path string, opt OpenOptions) (*Dataset, error) {
	ds, _, err := OpenWithKey(path, opt)
	return ds, err
}

// OpenWithKey is Open, and the ContentKey of path, from the hashes Open
// computes anyway (a large CSV is not read twice).
func OpenWithKey(path string, opt OpenOptions) (*Dataset, string, error) {
	kind, err := KindOf(path)
	if err != nil {
		return nil, "", err
	}
	if kind == Corpus {
		return nil, "", &CorpusError{Path: path, Why: "molecules without labels or split"}
	}
	cache, err := opt.cacheDir()
	if err != nil {
		return nil, "", err
	}
	dir, key := path, ""
	if kind == OGBFolder {
		if err := opt.Columns.CheckFolder(path); err != nil {
			return nil, "", err
		}
	} else {
		if dir, key, err = featurized(path, opt, filepath.Join(cache, "featurized")); err != nil {
			return nil, "", err
		}
	}
	ds, cached, err := Load(dir, LoadOptions{CacheDir: cache})
	if err != nil {
		return nil, "", err
	}
	if key == "" {
		key = cached.Key // a folder's; a CSV's is its file's, not its featurised folder's
	}
	rejected, err := CountRejections(dir)
	if err != nil {
		return nil, "", err
	}
	if rejected > 0 && opt.Report != nil {
		fmt.Fprintf(opt.Report, "micrograph: %s: %d rows rejected, left out (listed in %s)\n", path, rejected, filepath.Join(dir, RejectFile))
	}
	return ds, key, nil
}

// rowRules numbers the rules by which a CSV's rows are read and refused
// (rowRules 2: a SMILES with a space inside, a label that underflows). The
// featurised folder's name holds it, so that a CSV featurised under older
// rules is featurised again rather than read from the cache as it was.
const rowRules = 2

// featurized is the folder holding csv featurised with opt's columns,
// made if missing, and csv's ContentKey. The header is read every time, so
// that a column the selection names is checked and the choice of the
// SMILES column is said (once the file is read) even when the folder is
// found in the cache.
func featurized(csv string, opt OpenOptions, cache string) (dir, key string, err error) {
	limits := opt.Limits
	if limits == (Limits{}) {
		limits = DefaultLimits()
	}
	if err := limits.Validate(); err != nil {
		return "", "", err
	}
	f, err := openCSV(csv)
	if err != nil {
		return "", "", err
	}
	sel, err := opt.Columns.selectColumns(csv, f.header, true)
	f.close()
	if err != nil {
		return "", "", err
	}
	defer func() {
		if err == nil && sel.note != "" && opt.Report != nil {
			fmt.Fprintf(opt.Report, "micrograph: %s\n", sel.note)
		}
	}()
	sum, err := FileSHA256(csv)
	if err != nil {
		return "", "", err
	}
	key = "csv:" + sum
	name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(csv), ".gz"), ".csv")
	folder := fmt.Sprintf("%s-%s-%s-rules%d", name, opt.Columns.key(), sum[:16], rowRules)
	if limits != DefaultLimits() {
		folder += fmt.Sprintf("-atoms%d-bytes%d", limits.MaxAtoms, limits.MaxSMILESBytes) // other rows rejected
	}
	dir = filepath.Join(cache, folder)
	if _, err := os.Stat(dir); err == nil {
		return dir, key, nil
	}
	table, err := ReadTable(csv, opt.Columns)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", "", fmt.Errorf("featurisation of %s: %w", csv, err)
	}
	if _, err := Featurize(table, dir, FeaturizeOptions{Split: "scaffold", Limits: limits, Stop: opt.Stop}); err != nil {
		if errors.Is(err, ErrStopped) {
			return "", "", err
		}
		// Processes opening the same new CSV together each featurise it;
		// the first to publish wins, and the others, refused at Featurize's
		// check that dir is new or at the rename, use its folder: dir is
		// only ever made whole (atomicfile.WriteDir), from the same content
		// key, so it holds what this process would have written.
		if _, statErr := os.Stat(dir); statErr == nil {
			return dir, key, nil
		}
		return "", "", err
	}
	return dir, key, nil
}

// ContentKey identifies what path holds, for a run to tell later whether
// its data changed: the SHA-256 of a CSV file (gzip-compressed or not, as
// stored), of an OGB folder's raw/, split/ and mapping/ files (names, sizes
// and contents, as its binary cache is keyed), or of a corpus's manifest,
// which records its source file's SHA-256, its options and every shard's
// CRC-32C. It reads the whole file or folder, not a corpus's shards.
func ContentKey(path string) (string, error) {
	kind, err := KindOf(path)
	switch {
	case err != nil:
		return "", err
	case kind == OGBFolder:
		fp, err := fingerprint(path)
		if err != nil {
			return "", err
		}
		return ogbKey(fp), nil
	case kind == Corpus:
		blob, err := inputfile.ReadAll(filepath.Join(path, CorpusManifestFile), inputfile.MaxJSONBytes)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("corpus:%x", sha256.Sum256(blob)), nil
	}
	sum, err := FileSHA256(path)
	return "csv:" + sum, err // as featurized names it
}

// ogbKey is the ContentKey of an OGB folder of fingerprint fp.
func ogbKey(fp [32]byte) string { return fmt.Sprintf("ogb:%x", fp) }

// FileSHA256 is the hex SHA-256 of the file at path (gzip-compressed
// files as they are on disk).
func FileSHA256(path string) (string, error) {
	f, err := inputfile.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
