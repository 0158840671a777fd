package corpus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/internal/inputfile"
)

// A corpus is a folder of molecules for pre-training too large to hold in
// memory: Featurize writes it from a SMILES file in shards of a fixed
// number of input rows, and Open maps the shards into memory without
// reading them, so that only the molecules a batch touches are paged in.
//
// data.CorpusManifestFile lists the complete shards. Each shard file is
//
//	header (64 bytes): magic | molecules G | atoms N | bonds M | first row | rows | 16 zero bytes
//	NodePtr   int64[G+1]   atom offsets, from 0 within the shard
//	BondPtr   int64[G+1]   bond offsets
//	Rows      int64[G]     data row of each molecule in the source file, from 0
//	FilterKey uint16[G]    filter class << 14 | atoms (capped at 2^14-1), padded to 8 bytes
//	BondAtoms int32[2M]    both atoms of each bond, local to the molecule
//	AtomFeat  uint8[9N]    padded to 8 bytes
//	BondFeat  uint8[3M]    padded to 8 bytes
//
// little-endian, every section starting on an 8-byte boundary so that the
// mapping is used in place. Molecules keep the order of the source rows;
// rows RDKit rejects are left out and listed in shard-NNNNN.rejected.csv.
const (
	corpusFormat     = "micrograph-corpus-1"
	shardMagic       = "MGSHARD1"
	shardHeaderBytes = 64
	filterKeyAtoms   = 1<<14 - 1 // atoms beyond this count as this many: far above any η
)

// Manifest is a corpus's corpus.json.
type Manifest struct {
	Format       string      `json:"format"`
	Source       string      `json:"source"`        // base name of the SMILES file
	SourceSHA256 string      `json:"source_sha256"` // its content, so that a resume reads the same file
	SMILESColumn string      `json:"smiles_column"` // as the header spells it
	ShardRows    int         `json:"shard_rows"`    // input rows per shard (the last may hold fewer)
	Limits       data.Limits `json:"limits"`
	Complete     bool        `json:"complete"` // every row is in a shard and rejected.csv is written
	Shards       []ShardInfo `json:"shards"`
}

// ShardInfo describes one complete shard.
type ShardInfo struct {
	File      string `json:"file"`
	FirstRow  int64  `json:"first_row"` // data row of its first input row, from 0
	Rows      int    `json:"rows"`      // input rows it covers
	Molecules int    `json:"molecules"` // rows featurised
	Atoms     int64  `json:"atoms"`
	Bonds     int64  `json:"bonds"`
	Rejected  int    `json:"rejected"` // rows rejected, listed in the shard's .rejected.csv
	Bytes     int64  `json:"bytes"`    // size of File
	CRC32C    uint32 `json:"crc32c"`   // of File
}

// shardSizes are the byte offsets of a shard's sections, from its counts.
type shardSizes struct {
	nodePtr, bondPtr, rows, filterKey, bondAtoms, atomFeat, bondFeat, end int64
}

func pad8(n int64) int64 { return (n + 7) &^ 7 }

func layout(g, n, m int64) shardSizes {
	var s shardSizes
	s.nodePtr = shardHeaderBytes
	s.bondPtr = s.nodePtr + 8*(g+1)
	s.rows = s.bondPtr + 8*(g+1)
	s.filterKey = s.rows + 8*g
	s.bondAtoms = s.filterKey + pad8(2*g)
	s.atomFeat = s.bondAtoms + 8*m
	s.bondFeat = s.atomFeat + pad8(data.NumAtomFeatures*n)
	s.end = s.bondFeat + pad8(data.NumBondFeatures*m)
	return s
}

// ReadManifest reads dir's corpus.json.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, data.CorpusManifestFile)
	var m Manifest
	if err := inputfile.ReadJSON(path, &m); err != nil {
		return nil, err
	}
	if m.Format != corpusFormat {
		return nil, fmt.Errorf("%s: format %s, want %q", path, inputfile.Quote(m.Format), corpusFormat)
	}
	return &m, nil
}

// Corpus is a complete corpus folder opened for reading: its shards mapped
// into memory, read-only, the pages read dropped from the process every few
// hundred molecules, so that its memory does not grow with the corpus or
// with the time it is read. It implements Molecules; Close unmaps it.
type Corpus struct {
	Dir      string
	Manifest *Manifest
	shards   []*shard
	first    []int        // global index of each shard's first molecule, and the total last
	reads    atomic.Int64 // molecules read, for dropPages
}

// dropEvery is how many molecules are read between two drops of the
// mapped pages from the process. A molecule's sections lie on about five
// pages, and a fault maps up to 16 neighbouring pages already in the page
// cache (the kernel's fault-around), so the process maps at most about
// 512 × 5 × 64 KB = 160 MB of the corpus however large it is and however
// warm the cache; without the drops it would keep every page it ever read,
// up to the whole corpus.
const dropEvery = 512

// shard is one mapped shard file, its sections viewed in place.
type shard struct {
	mem                []byte
	nodePtr, bondPtr   []int64
	rows               []int64
	filterKey          []uint16
	bondAtoms          []int32
	atomFeat, bondFeat []uint8
}

// littleEndian: the sections are used in place, so the host must share
// the files' byte order (x86-64 and arm64 do).
var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// Open maps the shards of the complete corpus folder dir. It checks
// each shard's size, CRC-32C and header against the manifest, so that a
// shard damaged since featurisation is refused with its name before any
// molecule of it is read: the check reads the whole corpus once, through
// read(2), and drops it from the page cache again (see evict). Collation
// still checks every molecule's offsets and bond endpoints as it reads them.
func Open(dir string) (*Corpus, error) {
	if !littleEndian {
		return nil, errors.New("corpus: shards are little-endian and used in place; this host is not")
	}
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	if !m.Complete {
		return nil, fmt.Errorf("corpus %s is incomplete (%d shards): run micrograph featurize again to finish it", dir, len(m.Shards))
	}
	c := &Corpus{Dir: dir, Manifest: m, first: []int{0}}
	for _, info := range m.Shards {
		s, err := mapShard(filepath.Join(dir, info.File), info)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("corpus %s: %w", dir, err)
		}
		c.shards = append(c.shards, s)
		c.first = append(c.first, c.first[len(c.first)-1]+info.Molecules)
	}
	if c.NumGraphs() == 0 {
		c.Close()
		return nil, fmt.Errorf("corpus %s holds no molecules", dir)
	}
	return c, nil
}

// mapShard maps path read-only and views its sections, checking its size,
// its CRC-32C and its header against info.
func mapShard(path string, info ShardInfo) (*shard, error) {
	f, err := inputfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() != info.Bytes || st.Size() < shardHeaderBytes {
		return nil, fmt.Errorf("%s: %d bytes, the manifest says %d", info.File, st.Size(), info.Bytes)
	}
	if err := checkShardCRC(f, info); err != nil {
		return nil, fmt.Errorf("%w: featurize the corpus again (the same featurize command redoes damaged shards)", err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", info.File, err)
	}
	// Batches read molecules scattered over the corpus: read-ahead would
	// only page in neighbours no batch asked for.
	syscall.Madvise(mem, syscall.MADV_RANDOM)
	s := &shard{mem: mem}
	if err := s.view(info); err != nil {
		syscall.Munmap(mem)
		return nil, fmt.Errorf("%s: %w", info.File, err)
	}
	return s, nil
}

func (s *shard) view(info ShardInfo) error {
	h := s.mem[:shardHeaderBytes]
	if string(h[:8]) != shardMagic {
		return errors.New("not a shard of this version")
	}
	g, n, m := int64(binary.LittleEndian.Uint64(h[8:])), int64(binary.LittleEndian.Uint64(h[16:])), int64(binary.LittleEndian.Uint64(h[24:]))
	first, rows := int64(binary.LittleEndian.Uint64(h[32:])), int64(binary.LittleEndian.Uint64(h[40:]))
	if g != int64(info.Molecules) || n != info.Atoms || m != info.Bonds || first != info.FirstRow || rows != int64(info.Rows) {
		return fmt.Errorf("header (%d molecules, %d atoms, %d bonds, rows %d+%d) disagrees with the manifest (%d, %d, %d, rows %d+%d)",
			g, n, m, first, rows, info.Molecules, info.Atoms, info.Bonds, info.FirstRow, info.Rows)
	}
	// The manifest agrees, but both may be edited or damaged alike: counts
	// beyond the file (or negative) would wrap the layout's arithmetic.
	if size := int64(len(s.mem)); g < 0 || n < 0 || m < 0 || g > size || n > size || m > size {
		return fmt.Errorf("header counts (%d molecules, %d atoms, %d bonds) do not fit its %d bytes", g, n, m, size)
	}
	lay := layout(g, n, m)
	if lay.end != int64(len(s.mem)) {
		return fmt.Errorf("%d bytes, its counts make %d", len(s.mem), lay.end)
	}
	s.nodePtr = viewAs[int64](s.mem, lay.nodePtr, g+1)
	s.bondPtr = viewAs[int64](s.mem, lay.bondPtr, g+1)
	s.rows = viewAs[int64](s.mem, lay.rows, g)
	s.filterKey = viewAs[uint16](s.mem, lay.filterKey, g)
	s.bondAtoms = viewAs[int32](s.mem, lay.bondAtoms, 2*m)
	s.atomFeat = s.mem[lay.atomFeat : lay.atomFeat+data.NumAtomFeatures*n]
	s.bondFeat = s.mem[lay.bondFeat : lay.bondFeat+data.NumBondFeatures*m]
	if s.nodePtr[g] != n || s.bondPtr[g] != m {
		return fmt.Errorf("offsets end at %d atoms and %d bonds, the header says %d and %d", s.nodePtr[g], s.bondPtr[g], n, m)
	}
	return nil
}

// viewAs is n values of type T at byte offset off of mem, in place.
func viewAs[T int64 | int32 | uint16](mem []byte, off, n int64) []T {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&mem[off])), n)
}

// Close unmaps the shards; views taken from the corpus must not be used
// afterwards.
func (c *Corpus) Close() error {
	var errs []error
	for _, s := range c.shards {
		errs = append(errs, syscall.Munmap(s.mem))
	}
	c.shards = nil
	return errors.Join(errs...)
}

// NumGraphs is the number of molecules over all shards.
func (c *Corpus) NumGraphs() int { return c.first[len(c.first)-1] }

// NumTasks is 0: a corpus holds molecules for pre-training, without labels.
func (c *Corpus) NumTasks() int { return 0 }

// HasAtomGroups is false: a corpus comes from SMILES alone.
func (c *Corpus) HasAtomGroups() bool { return false }

// locate is the shard of global molecule g and g's index within it.
func (c *Corpus) locate(g int) (int, int) {
	k := sort.Search(len(c.shards), func(k int) bool { return c.first[k+1] > g })
	return k, g - c.first[k]
}

// Graph returns molecule g as views into its shard's mapping, after
// checking its offsets.
func (c *Corpus) Graph(g int) (data.GraphView, error) {
	if g < 0 || g >= c.NumGraphs() {
		return data.GraphView{}, fmt.Errorf("molecule %d outside 0..%d", g, c.NumGraphs()-1)
	}
	if c.reads.Add(1)%dropEvery == 0 {
		c.dropPages()
	}
	k, i := c.locate(g)
	s := c.shards[k]
	a0, a1, b0, b1 := s.nodePtr[i], s.nodePtr[i+1], s.bondPtr[i], s.bondPtr[i+1]
	if a0 < 0 || a1 < a0 || a1 > s.nodePtr[len(s.nodePtr)-1] || b0 < 0 || b1 < b0 || b1 > s.bondPtr[len(s.bondPtr)-1] {
		return data.GraphView{}, fmt.Errorf("%s: molecule %d: offsets atoms %d..%d, bonds %d..%d are corrupt",
			c.Manifest.Shards[k].File, i, a0, a1, b0, b1)
	}
	return data.GraphView{
		AtomFeat:  s.atomFeat[a0*data.NumAtomFeatures : a1*data.NumAtomFeatures],
		BondAtoms: s.bondAtoms[2*b0 : 2*b1],
		BondFeat:  s.bondFeat[b0*data.NumBondFeatures : b1*data.NumBondFeatures],
	}, nil
}

// dropPages unmaps every page of the shards from the process, which the
// kernel keeps in its page cache: the next read of a page is a minor fault,
// not a disk read. Views being read meanwhile stay valid, since the mapping
// is of a file, read-only: a dropped page is mapped again on access.
func (c *Corpus) dropPages() {
	for _, s := range c.shards {
		syscall.Madvise(s.mem, syscall.MADV_DONTNEED)
	}
}

// SourceRow is the data row (from 0) of the source file that molecule g
// was featurised from.
func (c *Corpus) SourceRow(g int) int64 {
	k, i := c.locate(g)
	return c.shards[k].rows[i]
}

// PretrainFilter is data.PretrainFilter over the whole corpus, from the filter
// keys stored at featurisation: it reads two bytes per molecule, not the
// molecules, and returns the kept molecules in increasing order.
func (c *Corpus) PretrainFilter(eta int) ([]int32, data.FilterStats) {
	var st data.FilterStats
	var kept []int32
	for k, s := range c.shards {
		for i, key := range s.filterKey {
			if st.Count(int(key&filterKeyAtoms), data.FilterClass(key>>14), eta) {
				kept = append(kept, int32(c.first[k]+i))
			}
		}
	}
	return kept, st
}

// filterKey packs what the filter needs of a molecule into two bytes.
func filterKey(atoms int, c data.FilterClass) uint16 {
	return uint16(c)<<14 | uint16(min(atoms, filterKeyAtoms))
}

// PretrainSet is what pre-training draws from: the molecules of a dataset
// folder, a CSV file or a corpus, and those the pre-training filter keeps.
type PretrainSet struct {
	Molecules data.Molecules
	Indices   []int32          // the molecules the filter keeps, in increasing order
	Filter    data.FilterStats // what it kept and left out
	Key       string           // the source's content (data.ContentKey)
	closer    io.Closer        // the corpus, when Molecules is one
}

// OpenPretrainSet opens path for pre-training with η = eta: a corpus folder
// through Open, with the filter read from its stored keys; anything
// else through Open, filtered molecule by molecule.
func OpenPretrainSet(path string, opt data.OpenOptions, eta int) (*PretrainSet, error) {
	kind, err := data.KindOf(path)
	if err != nil {
		return nil, err
	}
	if kind == data.Corpus {
		if err := opt.Columns.CheckFolder(path); err != nil {
			return nil, err
		}
		c, err := Open(path)
		if err != nil {
			return nil, err
		}
		key, err := data.ContentKey(path) // the manifest's hash: cheap
		if err != nil {
			c.Close()
			return nil, err
		}
		idx, st := c.PretrainFilter(eta)
		return &PretrainSet{Molecules: c, Indices: idx, Filter: st, Key: key, closer: c}, nil
	}
	d, key, err := data.OpenWithKey(path, opt)
	if err != nil {
		return nil, err
	}
	idx, st := data.PretrainFilter(d, d.All(), eta)
	return &PretrainSet{Molecules: d, Indices: idx, Filter: st, Key: key}, nil
}

// Close releases a corpus's mappings; for an in-memory dataset it does
// nothing.
func (p *PretrainSet) Close() error {
	if p.closer == nil {
		return nil
	}
	return p.closer.Close()
}
