package data

import (
	"fmt"
	"io"
	"strings"

	"github.com/micrograph/micrograph/data/rdkit"
)

// Row is one molecule of a SMILES file read as a stream.
type Row struct {
	Index  int    // data row, from 0
	Line   int    // line in the file where the row starts, from 1
	SMILES string // as written
}

// SMILESReader reads the SMILES column of a CSV file (gzip-compressed or
// not) a chunk of rows at a time, so that a file of any length is
// featurised and scored in bounded memory. Other columns are not parsed
// beyond what CSV splitting needs.
type SMILESReader struct {
	Source string // the file, for messages
	Column string // the SMILES column's name as the header spells it
	// Note, when not empty, is a line saying how the SMILES column was
	// chosen (by the default rule, from its name), for the user to see.
	Note   string
	csv    *csvFile
	smiles int // the column's index
	rows   int // rows read so far
}

// OpenSMILES opens path and reads its header, finding the SMILES column as
// cols says (Columns); the columns it names must exist, though only the
// SMILES are read.
func OpenSMILES(path string, cols Columns) (*SMILESReader, error) {
	f, err := openCSV(path)
	if err != nil {
		return nil, err
	}
	sel, err := cols.selectColumns(path, f.header, false)
	if err != nil {
		f.close()
		return nil, err
	}
	// Rows are read as they come; a ragged row is still an error.
	f.ReuseRecord = true
	return &SMILESReader{Source: path, Column: f.header[sel.smiles], Note: sel.note, csv: f, smiles: sel.smiles}, nil
}

// Read returns up to max next rows; after the last it returns io.EOF (with
// no rows).
func (r *SMILESReader) Read(max int) ([]Row, error) {
	var rows []Row
	for len(rows) < max {
		rec, err := r.csv.read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		line, _ := r.csv.FieldPos(0)
		rows = append(rows, Row{Index: r.rows, Line: line, SMILES: strings.Clone(rec[r.smiles])})
		r.rows++
	}
	if len(rows) == 0 {
		if r.rows == 0 {
			return nil, fmt.Errorf("%s:2: no molecules: the file has only a header", r.Source)
		}
		return nil, io.EOF
	}
	return rows, nil
}

// Close closes the file.
func (r *SMILESReader) Close() error { return r.csv.close() }

// FeaturizeRows turns the rows' SMILES into an in-memory dataset, without a
// split or labels, holding the rows RDKit accepts in their order, as
// Featurize would (docs/method.md §8); kept lists the Index of each of its
// molecules, and rejected the others with the reason. workers is the number
// of parallel RDKit calls (0: GOMAXPROCS).
func FeaturizeRows(rows []Row, workers int, limits Limits) (d *Dataset, kept []int, rejected []Rejection, err error) {
	limits = limits.OrDefault()
	if err := limits.Validate(); err != nil {
		return nil, nil, nil, err
	}
	if err := rdkit.Load(); err != nil {
		return nil, nil, nil, err
	}
	smiles := make([]string, len(rows))
	lines := make([]int, len(rows))
	for i, r := range rows {
		smiles[i], lines[i] = r.SMILES, r.Line
	}
	graphs, reasons, _ := featurizeAll(smiles, false, workers, limits, nil)
	var local []int // positions in rows
	for i, g := range graphs {
		if g == nil {
			rejected = append(rejected, Rejection{Row: rows[i].Index, Line: rows[i].Line, SMILES: rows[i].SMILES, Reason: reasons[i]})
		} else {
			local = append(local, i)
			kept = append(kept, rows[i].Index)
		}
	}
	d = &Dataset{Name: "rows"}
	if err := fillDataset(d, &Table{SMILES: smiles, Lines: lines}, graphs, local); err != nil {
		return nil, nil, nil, err
	}
	return d, kept, rejected, nil
}
