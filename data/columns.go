package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/micrograph/micrograph/internal/field"
	"github.com/micrograph/micrograph/internal/inputfile"
)

// Columns says which columns of a CSV file hold the SMILES and which the
// labels. It is the one rule every reader of a CSV follows (ReadTable,
// OpenSMILES, and through them Open and every command); the zero value is
// the default. It is saved with what a CSV makes (a result, a run's
// configuration), and the cache of featurised CSVs is keyed by it.
type Columns struct {
	// SMILES names the SMILES column, matched ignoring case. Empty: the
	// column named "smiles", else the first whose name contains "smiles",
	// else the one named "mol" (MoleculeNet's bace), all ignoring case;
	// neither a target nor an ignored column is taken.
	SMILES string `json:"smiles_column,omitempty"`
	// Targets names the label columns, in their order here, matched
	// exactly; the other columns are not read. Nil: every column is a
	// label but the SMILES one, mol_id (OGB's molecule identifier, kept as
	// such) and those of Ignore.
	Targets []string `json:"target_columns,omitempty"`
	// Ignore names columns that are neither SMILES nor labels (names,
	// notes, descriptors), matched exactly; it goes without Targets.
	Ignore []string `json:"ignore_columns,omitempty"`
}

// IsZero tells whether c is the default rule.
func (c Columns) IsZero() bool { return c.SMILES == "" && c.Targets == nil && c.Ignore == nil }

// Validate refuses what no header can satisfy, naming the field: a name
// given twice or empty, targets together with ignored columns, a column
// both the SMILES one and a target.
func (c Columns) Validate() error {
	if len(c.Targets) > 0 && len(c.Ignore) > 0 {
		return field.Errorf("ignore_columns", strings.Join(c.Ignore, ","), "cannot go with target columns: with the targets named, every other column is left out already")
	}
	for _, f := range []struct {
		name  string
		names []string
	}{{"target_columns", c.Targets}, {"ignore_columns", c.Ignore}} {
		if f.names != nil && len(f.names) == 0 {
			return field.Errorf(f.name, "", "must name at least one column")
		}
		for i, n := range f.names {
			if n == "" {
				return field.Errorf(f.name, strings.Join(f.names, ","), "names an empty column")
			}
			if slices.Contains(f.names[:i], n) {
				return field.Errorf(f.name, n, "is named twice")
			}
			if c.SMILES != "" && strings.EqualFold(n, c.SMILES) {
				return field.Errorf(f.name, n, "is the SMILES column")
			}
		}
	}
	return nil
}

// key is what the featurised folder of a CSV read with c is named by
// besides the file's content: empty for the default, else a short hash.
func (c Columns) key() string {
	if c.IsZero() {
		return ""
	}
	b, _ := json.Marshal(c)
	return fmt.Sprintf("cols%x", sha256.Sum256(b))[:16]
}

// CheckFolder refuses a selection for a dataset or corpus folder, whose
// molecules and tasks were fixed when it was featurised; the default
// passes.
func (c Columns) CheckFolder(path string) error {
	reason := "applies to CSV files only: %s is a featurised folder, whose SMILES and tasks are fixed"
	switch {
	case c.SMILES != "":
		return field.Errorf("smiles_column", c.SMILES, reason, path)
	case c.Targets != nil:
		return field.Errorf("target_columns", strings.Join(c.Targets, ","), reason, path)
	case c.Ignore != nil:
		return field.Errorf("ignore_columns", strings.Join(c.Ignore, ","), reason, path)
	}
	return nil
}

// ErrNoSMILESColumn is the error of a header in which the default rule
// finds no SMILES column (a caller may say how to name one).
var ErrNoSMILESColumn = errors.New("no SMILES column")

// selection is what Columns picks in one header: column indices.
type selection struct {
	smiles int
	labels []int
	id     int // mol_id, or -1
	// note, when not empty, says that the SMILES column was found by the
	// name containing "smiles", for the user to see.
	note string
}

// selectColumns applies c to the header of the CSV file source: which
// column holds the SMILES, which the labels (withLabels; else none) and
// which the molecule identifiers. A column c names that the header lacks is
// a field error naming it and the header's columns.
func (c Columns) selectColumns(source string, header []string, withLabels bool) (*selection, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	for i, h := range header {
		if j := slices.Index(header[:i], h); j >= 0 {
			// A column named twice would be read as the other's labels.
			return nil, fmt.Errorf("%s:1: the header names column %s twice (columns %d and %d)", source, inputfile.Quote(h), j+1, i+1)
		}
	}
	missing := func(name, value string) error {
		return field.Errorf(name, value, "is not a column of %s: its columns are %s", source, columnList(header))
	}
	for _, f := range []struct {
		name  string
		names []string
	}{{"target_columns", c.Targets}, {"ignore_columns", c.Ignore}} {
		for _, n := range f.names {
			if !slices.Contains(header, n) {
				return nil, missing(f.name, n)
			}
		}
	}
	s := &selection{id: slices.Index(header, idColumn)}
	candidate := func(i int) bool {
		return !slices.Contains(c.Targets, header[i]) && !slices.Contains(c.Ignore, header[i])
	}
	if c.SMILES != "" {
		if s.smiles = slices.IndexFunc(header, func(h string) bool { return strings.EqualFold(h, c.SMILES) }); s.smiles < 0 {
			return nil, missing("smiles_column", c.SMILES)
		}
	} else if s.smiles = c.defaultSMILES(header, candidate); s.smiles < 0 {
		which := "no column"
		if c.defaultSMILES(header, func(int) bool { return true }) >= 0 {
			which = "no column but the target and ignored ones"
		}
		return nil, fmt.Errorf(`%s:1: %w: %s is named "smiles" or "mol" or has "smiles" in its name; the columns are %s`, source, ErrNoSMILESColumn, which, columnList(header))
	} else if !strings.EqualFold(header[s.smiles], "smiles") && !strings.EqualFold(header[s.smiles], "mol") {
		s.note = fmt.Sprintf(`%s: SMILES read from column %s, the first whose name contains "smiles"`, source, inputfile.Quote(header[s.smiles]))
	}
	for i, h := range header {
		if i != s.smiles && strings.EqualFold(h, header[s.smiles]) {
			return nil, fmt.Errorf("%s:1: the header names column %s twice (columns %d and %d)", source, inputfile.Quote(h), s.smiles+1, i+1)
		}
	}
	if s.id == s.smiles || slices.Contains(c.Ignore, idColumn) {
		s.id = -1
	}
	if !withLabels {
		return s, nil
	}
	if c.Targets != nil {
		for _, n := range c.Targets {
			i := slices.Index(header, n)
			switch i {
			case s.smiles:
				return nil, field.Errorf("target_columns", n, "is the SMILES column of %s", source)
			case s.id:
				return nil, field.Errorf("target_columns", n, "is the molecule identifier column of %s, kept as such", source)
			}
			s.labels = append(s.labels, i)
		}
		return s, nil
	}
	for i, h := range header {
		if i != s.smiles && i != s.id && !slices.Contains(c.Ignore, h) {
			if strings.TrimSpace(h) == "" {
				// Its task would have no name: refused here, before any
				// training, rather than when a model is saved.
				return nil, fmt.Errorf("%s:1: column %d %w (a comma at the end of each line, or a table's unnamed index column), and every column but the SMILES one is a label unless the label columns are named",
					source, i+1, ErrUnnamedColumn)
			}
			s.labels = append(s.labels, i)
		}
	}
	return s, nil
}

// ErrUnnamedColumn is the error of a header whose column taken as a label
// by default has no name (a caller may say how to name the labels).
var ErrUnnamedColumn = errors.New("has no name")

// defaultSMILES is the default rule's SMILES column among the candidates,
// or -1.
func (c Columns) defaultSMILES(header []string, candidate func(int) bool) int {
	for _, match := range []func(string) bool{
		func(h string) bool { return strings.EqualFold(h, "smiles") },
		func(h string) bool { return strings.Contains(strings.ToLower(h), "smiles") },
		func(h string) bool { return strings.EqualFold(h, "mol") },
	} {
		for i, h := range header {
			if candidate(i) && match(h) {
				return i
			}
		}
	}
	return -1
}

// columnList quotes the column names of a header for a message, up to a
// few dozen; toxcast's has 618.
func columnList(header []string) string {
	const show = 30
	names := make([]string, min(len(header), show))
	for i := range names {
		names[i] = inputfile.Quote(header[i])
	}
	list := "[" + strings.Join(names, " ") + "]"
	if len(header) > show {
		list += fmt.Sprintf(" and %d more", len(header)-show)
	}
	return list
}

// csvFile is a CSV file of molecules opened for reading, gzip-compressed or
// not, its header read.
type csvFile struct {
	*csvReader
	file   io.Closer
	header []string
}

// openCSV opens path and reads its header.
func openCSV(path string) (*csvFile, error) {
	f, err := inputfile.Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 1<<16)
	var in io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		gz, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		in = gz
	}
	r := newCSVReader(path, in)
	header, err := r.header()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &csvFile{csvReader: r, file: f, header: header}, nil
}

func (f *csvFile) close() error { return f.file.Close() }
