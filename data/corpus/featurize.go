package corpus

import (
	"bufio"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/failpoint"
	"github.com/micrograph/micrograph/internal/inputfile"
	"golang.org/x/sys/unix"
)

// Options control Featurize.
type Options struct {
	SMILESColumn string      // matched ignoring case; empty: data.Columns' default rule
	ShardRows    int         // input rows per shard; 0 means DefaultShardRows
	Workers      int         // goroutines running RDKit; 0 means GOMAXPROCS
	Limits       data.Limits // rows beyond them are rejected before RDKit; zero fields take data.DefaultLimits'
	// Progress, when set, is called after each shard is complete and
	// recorded in the manifest.
	Progress func(ShardInfo)
}

// DefaultShardRows is the shard size when none is asked for: about 60 MB of
// graphs for drug-like molecules, which is also about what featurisation
// holds in memory.
const DefaultShardRows = 100_000

// corpusChunkRows is how many rows one worker featurises at a time: enough
// to make hand-over negligible, few enough that N workers hold little.
const corpusChunkRows = 1024

// Report summarises a Featurize run.
type Report struct {
	Manifest *Manifest
	Resumed  int // shards found complete and kept
	Written  int // shards written by this run
	// Damaged is the first recorded shard found damaged (its size or
	// CRC-32C not the manifest's) and why, empty when none was: it and every
	// shard after it were featurised again.
	Damaged string
	// Note, when not empty, says how the SMILES column was chosen (by the
	// default rule, from its name; data.SMILESReader's Note).
	Note string
}

// Totals sums the shards: input rows, molecules, atoms, bonds, rejected rows
// and bytes on disk.
func (m *Manifest) Totals() (rows, molecules int, atoms, bonds int64, rejected int, bytes int64) {
	for _, s := range m.Shards {
		rows += s.Rows
		molecules += s.Molecules
		atoms += s.Atoms
		bonds += s.Bonds
		rejected += s.Rejected
		bytes += s.Bytes
	}
	return
}

// Featurize featurises every SMILES of the CSV file src (gzip-compressed
// or not) as Featurize does (docs/method.md §8), in opt.Workers goroutines,
// into the corpus folder out: shards of opt.ShardRows input rows, each written
// atomically and then recorded in the manifest, molecules in the order of the
// rows whatever the number of workers. When out already holds shards of the
// same file with the same options (an interrupted run), those whose size and
// checksum are right are kept and featurisation continues after them; a
// complete corpus whose shards are all intact is left as it is, and one
// with a damaged shard is featurised again from that shard (the report
// names it). The result is byte for byte the same
// however often the run was interrupted.
func Featurize(src, out string, opt Options) (*Report, error) {
	if opt.ShardRows == 0 {
		opt.ShardRows = DefaultShardRows
	}
	if opt.ShardRows < 1 {
		return nil, fmt.Errorf("corpus: shard size %d rows: want at least 1", opt.ShardRows)
	}
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	limits := opt.Limits.OrDefault()
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	sum, err := data.FileSHA256(src)
	if err != nil {
		return nil, err
	}
	reader, err := data.OpenSMILES(src, data.Columns{SMILES: opt.SMILESColumn})
	if err != nil {
		return nil, err
	}
	defer reader.Close()
	want := &Manifest{
		Format: corpusFormat, Source: filepath.Base(src), SourceSHA256: sum,
		SMILESColumn: reader.Column, ShardRows: opt.ShardRows, Limits: limits,
	}
	m, damaged, err := resumeCorpus(out, want)
	if err != nil {
		return nil, err
	}
	rep := &Report{Manifest: m, Resumed: len(m.Shards), Damaged: damaged, Note: reader.Note}
	if m.Complete {
		return rep, nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("corpus %s: %w", out, err)
	}
	removeTemporaries(out)
	skip := len(m.Shards) * opt.ShardRows
	for skip > 0 {
		rows, err := reader.Read(min(skip, corpusChunkRows))
		if err != nil {
			return nil, fmt.Errorf("%s: skipping the %d rows of the complete shards: %w", src, len(m.Shards)*opt.ShardRows, err)
		}
		skip -= len(rows)
	}
	err = featurizeShards(reader, len(m.Shards), opt, limits, func(b *shardBuilder) error {
		info, err := b.write(out)
		if err != nil {
			return err
		}
		m.Shards = append(m.Shards, info)
		if err := writeManifest(out, m); err != nil {
			return err
		}
		rep.Written++
		if opt.Progress != nil {
			opt.Progress(info)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := concatRejections(out, m); err != nil {
		return nil, err
	}
	m.Complete = true
	if err := writeManifest(out, m); err != nil {
		return nil, err
	}
	return rep, nil
}

// resumeCorpus is the manifest to continue from: want with the shards of
// out's manifest whose files are intact, or want itself when out holds no
// corpus yet. A corpus of another file or with other options is an error.
// Every recorded shard's size and CRC-32C is checked, a complete corpus's
// too: from the first damaged one (named in damaged, with the reason) the
// corpus is featurised again, which makes the same bytes, rather than
// refused, since its source is at hand and unchanged.
func resumeCorpus(out string, want *Manifest) (m *Manifest, damaged string, err error) {
	st, err := os.Stat(out)
	if errors.Is(err, os.ErrNotExist) {
		return want, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	if !st.IsDir() {
		return nil, "", fmt.Errorf("corpus %s is a file", out)
	}
	have, err := ReadManifest(out)
	if errors.Is(err, os.ErrNotExist) {
		if entries, _ := os.ReadDir(out); len(entries) > 0 {
			return nil, "", fmt.Errorf("%s exists and holds no corpus (no %s): choose a new folder", out, data.CorpusManifestFile)
		}
		return want, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	if have.SourceSHA256 != want.SourceSHA256 || have.SMILESColumn != want.SMILESColumn || have.ShardRows != want.ShardRows || have.Limits != want.Limits {
		return nil, "", fmt.Errorf("%s holds a corpus of %s (sha256 %.16s, column %q, %d rows per shard, limits %+v), not of %s (sha256 %.16s, column %q, %d rows per shard, limits %+v): choose a new folder",
			out, have.Source, have.SourceSHA256, have.SMILESColumn, have.ShardRows, have.Limits,
			want.Source, want.SourceSHA256, want.SMILESColumn, want.ShardRows, want.Limits)
	}
	// Shards are renamed into place only when complete; the check guards
	// against a disk that lost or damaged one since.
	fresh := *want
	for _, info := range have.Shards {
		if err := checkShardFile(filepath.Join(out, info.File), info); err != nil {
			return &fresh, err.Error(), nil // featurised again from here
		}
		fresh.Shards = append(fresh.Shards, info)
	}
	if have.Complete {
		return have, "", nil
	}
	return &fresh, "", nil
}

// checkShardFile compares a shard file's size and CRC-32C with its record.
func checkShardFile(path string, info ShardInfo) error {
	f, err := inputfile.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return checkShardCRC(f, info)
}

// checkShardCRC reads the shard file f from its start and compares its size
// and CRC-32C with info, naming the shard by its file name; it then drops
// the file from the page cache (see evict).
func checkShardCRC(f *os.File, info ShardInfo) error {
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)) // from the start, whatever f's offset
	evictFile(f)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", info.File, err)
	case n != info.Bytes:
		return fmt.Errorf("%s is damaged: %d bytes, the manifest says %d", info.File, n, info.Bytes)
	case h.Sum32() != info.CRC32C:
		return fmt.Errorf("%s is damaged: its CRC-32C is %08x, the manifest says %08x", info.File, h.Sum32(), info.CRC32C)
	}
	return nil
}

// removeTemporaries deletes what interrupted atomic writes left in out.
func removeTemporaries(out string) {
	tmp, _ := filepath.Glob(filepath.Join(out, ".*.tmp-*"))
	for _, p := range tmp {
		os.Remove(p)
	}
}

func writeManifest(out string, m *Manifest) error {
	blob, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(out, data.CorpusManifestFile), append(blob, '\n'), 0o644)
}

// corpusChunk is a run of consecutive rows, featurised by one worker.
type corpusChunk struct {
	seq      int // position in the reading order
	shard    int
	rows     []data.Row
	d        *data.Dataset
	kept     []int
	rejected []data.Rejection
	last     bool // the shard's last chunk
	err      error
}

// featurizeShards reads the remaining rows in chunks that never cross a
// shard boundary, featurises the chunks in opt.Workers goroutines, and hands
// each shard, assembled in row order, to done. At most 2×Workers chunks are
// in flight, so memory stays bounded by a shard and a few chunks.
func featurizeShards(reader *data.SMILESReader, firstShard int, opt Options, limits data.Limits, done func(*shardBuilder) error) error {
	jobs := make(chan *corpusChunk)
	results := make(chan *corpusChunk)
	tokens := make(chan struct{}, 2*opt.Workers)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1 + opt.Workers)
	go func() { // the reader
		defer wg.Done()
		defer close(jobs)
		shard, inShard := firstShard, 0
		for seq := 0; ; seq++ {
			select {
			case tokens <- struct{}{}:
			case <-quit:
				return
			}
			rows, err := reader.Read(min(corpusChunkRows, opt.ShardRows-inShard))
			if err == io.EOF {
				// A chunk without rows closes the partial last shard, or,
				// on a shard boundary, marks the end (shard -1).
				end := &corpusChunk{seq: seq, shard: -1, last: true}
				if inShard > 0 {
					end.shard = shard
				}
				select {
				case results <- end:
				case <-quit:
				}
				return
			}
			c := &corpusChunk{seq: seq, shard: shard, rows: rows, err: err}
			inShard += len(rows)
			if inShard == opt.ShardRows {
				c.last, shard, inShard = true, shard+1, 0
			}
			if err != nil {
				select {
				case results <- c:
				case <-quit:
				}
				return
			}
			select {
			case jobs <- c:
			case <-quit:
				return
			}
		}
	}()
	for range opt.Workers {
		go func() {
			defer wg.Done()
			for c := range jobs {
				c.d, c.kept, c.rejected, c.err = data.FeaturizeRows(c.rows, 1, limits)
				select {
				case results <- c:
				case <-quit:
					return
				}
			}
		}()
	}
	defer func() {
		close(quit)
		wg.Wait()
	}()

	// Chunks come back in any order; they join their shard in reading order.
	pending := map[int]*corpusChunk{}
	next := 0
	var b *shardBuilder
	for {
		c := pending[next]
		if c == nil {
			r := <-results
			pending[r.seq] = r
			continue
		}
		delete(pending, next)
		next++
		if c.err != nil {
			return c.err
		}
		if c.shard < 0 { // end of input on a shard boundary
			return nil
		}
		if b == nil {
			b = newShardBuilder(c.shard, int64(c.shard)*int64(opt.ShardRows))
		}
		if err := b.add(c); err != nil {
			return err
		}
		<-tokens
		if c.last {
			if err := done(b); err != nil {
				return err
			}
			if len(c.rows) == 0 { // the partial last shard
				return nil
			}
			b = nil
		}
	}
}

// shardBuilder accumulates one shard's molecules in row order.
type shardBuilder struct {
	index     int
	firstRow  int64
	rows      int
	nodePtr   []int64
	bondPtr   []int64
	rowOf     []int64
	filterKey []uint16
	bondAtoms []int32
	atomFeat  []uint8
	bondFeat  []uint8
	rejected  []data.Rejection
	bonded    []bool
}

func newShardBuilder(index int, firstRow int64) *shardBuilder {
	return &shardBuilder{index: index, firstRow: firstRow, nodePtr: []int64{0}, bondPtr: []int64{0}}
}

// add appends a featurised chunk; a chunk without rows only closes the shard.
func (b *shardBuilder) add(c *corpusChunk) error {
	b.rows += len(c.rows)
	b.rejected = append(b.rejected, c.rejected...)
	if len(c.kept) == 0 {
		return nil
	}
	d := c.d
	for i, row := range c.kept {
		v, err := d.Graph(i)
		if err != nil {
			return err
		}
		var class data.FilterClass
		class, b.bonded = data.Classify(v.NumAtoms(), v.BondAtoms, b.bonded)
		b.nodePtr = append(b.nodePtr, b.nodePtr[len(b.nodePtr)-1]+int64(v.NumAtoms()))
		b.bondPtr = append(b.bondPtr, b.bondPtr[len(b.bondPtr)-1]+int64(v.NumBonds()))
		b.rowOf = append(b.rowOf, int64(row))
		b.filterKey = append(b.filterKey, filterKey(v.NumAtoms(), class))
	}
	b.bondAtoms = append(b.bondAtoms, d.BondAtoms...)
	b.atomFeat = append(b.atomFeat, d.AtomFeat...)
	b.bondFeat = append(b.bondFeat, d.BondFeat...)
	return nil
}

// write stores the shard's rejections, then the shard itself, each
// atomically, and returns its record for the manifest.
func (b *shardBuilder) write(out string) (ShardInfo, error) {
	file := fmt.Sprintf("shard-%05d.bin", b.index)
	if err := data.WriteRejections(filepath.Join(out, shardRejectFile(file)), b.rejected); err != nil {
		return ShardInfo{}, err
	}
	g, n, m := int64(len(b.rowOf)), int64(len(b.atomFeat)/data.NumAtomFeatures), int64(len(b.bondFeat)/data.NumBondFeatures)
	info := ShardInfo{File: file, FirstRow: b.firstRow, Rows: b.rows, Molecules: int(g), Atoms: n, Bonds: m, Rejected: len(b.rejected)}
	crc := crc32.New(castagnoli)
	err := atomicfile.Write(filepath.Join(out, info.File), 0o644, func(f io.Writer) error {
		w := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<20)
		head := make([]byte, shardHeaderBytes)
		copy(head, shardMagic)
		for i, v := range []int64{g, n, m, b.firstRow, int64(b.rows)} {
			binary.LittleEndian.PutUint64(head[8+8*i:], uint64(v))
		}
		w.Write(head)
		for _, s := range []any{b.nodePtr, b.bondPtr, b.rowOf} {
			binary.Write(w, binary.LittleEndian, s)
		}
		binary.Write(w, binary.LittleEndian, b.filterKey)
		w.Write(make([]byte, pad8(2*g)-2*g))
		binary.Write(w, binary.LittleEndian, b.bondAtoms)
		w.Write(b.atomFeat)
		w.Write(make([]byte, pad8(data.NumAtomFeatures*n)-data.NumAtomFeatures*n))
		w.Write(b.bondFeat)
		w.Write(make([]byte, pad8(data.NumBondFeatures*m)-data.NumBondFeatures*m))
		return w.Flush()
	})
	if err != nil {
		return ShardInfo{}, fmt.Errorf("corpus %s: %w", out, err)
	}
	info.Bytes, info.CRC32C = layout(g, n, m).end, crc.Sum32()
	failpoint.Crash("after " + info.File)
	evict(filepath.Join(out, info.File))
	return info, nil
}

// evict drops a synced shard from the page cache. Written (or read whole)
// it is cached in large folios, and a page fault on a mapping of it maps
// the whole folio (up to 2 MB on Linux 6.18 with ext4), so training would
// map the corpus into the process a few molecules at a time; read back
// through faults one page at a time (MADV_RANDOM), it maps only what
// batches read. Failure only costs that memory.
func evict(path string) {
	if f, err := inputfile.Open(path); err == nil {
		evictFile(f)
		f.Close()
	}
}

// evictFile is evict for a file already open.
func evictFile(f *os.File) { unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) }

// shardRejectFile names the list of a shard's rejected rows.
func shardRejectFile(shardFile string) string {
	return strings.TrimSuffix(shardFile, ".bin") + ".rejected.csv"
}

// concatRejections writes out/rejected.csv, every shard's rejected rows in
// order, as a featurised folder has.
func concatRejections(out string, m *Manifest) error {
	return atomicfile.Write(filepath.Join(out, data.RejectFile), 0o644, func(f io.Writer) error {
		w := csv.NewWriter(f)
		w.Write([]string{"row", "line", "smiles", "reason"})
		for _, s := range m.Shards {
			in, err := inputfile.Open(filepath.Join(out, shardRejectFile(s.File)))
			if err != nil {
				return err
			}
			recs, err := csv.NewReader(bufio.NewReader(in)).ReadAll()
			in.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", in.Name(), err)
			}
			if len(recs) > 0 {
				w.WriteAll(recs[1:])
			}
		}
		w.Flush()
		return w.Error()
	})
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)
