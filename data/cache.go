package data

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/micrograph/micrograph/internal/atomicfile"
	"github.com/micrograph/micrograph/internal/inputfile"
)

// The binary cache of a dataset folder is one file:
//
//	magic (8 bytes) | fingerprint of the source files (32) | payload | CRC-32C of all before (4)
//
// The payload holds every field of a Dataset in little-endian arrays (see
// encodeDataset). A cache is used only when its magic, fingerprint and CRC
// match and the decoded dataset passes the same checks as one read from
// source; anything else is rebuilt from the source files.
const cacheMagic = "MGDSET01" // bumped whenever the layout changes

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// LoadOptions control Load.
type LoadOptions struct {
	// CacheDir is micrograph's cache folder; dataset caches go to its
	// datasets/ subfolder. Empty means DefaultCacheDir().
	CacheDir string
}

// DefaultCacheDir is the cache folder used when none is named:
// os.UserCacheDir()/micrograph, that is $XDG_CACHE_HOME/micrograph, else
// ~/.cache/micrograph on Linux.
func DefaultCacheDir() (string, error) {
	user, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache folder was named and there is no user cache folder: %w", err)
	}
	return filepath.Join(user, "micrograph"), nil
}

// CacheStatus tells how Load obtained a dataset.
type CacheStatus struct {
	Path    string // the cache file used or written
	Hit     bool   // the dataset came from a valid cache
	Rebuilt string // why the cache was built: "absent", "stale" or "corrupt: ..."; empty on a hit
	Key     string // the folder's ContentKey, from the fingerprint the cache is keyed by
}

// Load reads the OGB dataset folder dir through its binary cache: from the
// cache when that is valid for the current source files, otherwise from the
// source files (ReadOGB), after which the cache is rewritten. Load only reads
// dir (it may be read-only, or shared with others): the cache lives in the
// cache folder (opt.CacheDir), in a file named after dir's absolute path. A
// cache that cannot be written is an error naming the file, not a silent
// reparse at every run.
func Load(dir string, opt LoadOptions) (*Dataset, *CacheStatus, error) {
	fp, err := fingerprint(dir)
	if err != nil {
		return nil, nil, err
	}
	path, err := cachePath(dir, opt.CacheDir)
	if err != nil {
		return nil, nil, err
	}
	st := &CacheStatus{Path: path, Rebuilt: "absent", Key: ogbKey(fp)}
	// The cache is derived from the dataset and as large as it: no cap.
	if blob, err := inputfile.ReadAll(path, math.MaxInt64); err == nil {
		d, err := decodeDataset(blob, fp)
		switch {
		case err == nil:
			d.Name = filepath.Base(filepath.Clean(dir))
			st.Hit, st.Rebuilt = true, ""
			return d, st, nil
		case errors.Is(err, errStale):
			st.Rebuilt = "stale"
		default:
			st.Rebuilt = "corrupt: " + err.Error()
		}
	}
	d, err := ReadOGB(dir)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, fmt.Errorf("cache of %s: %w", dir, err)
	}
	if err := atomicfile.WriteFile(path, encodeDataset(d, fp), 0o644); err != nil {
		return nil, nil, fmt.Errorf("cache of %s: %w", dir, err)
	}
	return d, st, nil
}

// fingerprint hashes the names, sizes and contents of every file under raw/,
// split/ and mapping/ of dir: whatever ReadOGB may read. Hashing contents
// (about 2 MB of gzip for ogbg-molhiv) rather than trusting modification
// times catches every change.
func fingerprint(dir string) ([32]byte, error) {
	h := sha256.New()
	for _, sub := range []string{"raw", dirSplit, "mapping"} {
		root := filepath.Join(dir, sub)
		if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) && sub != "raw" {
			continue
		}
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return err
			}
			f, err := inputfile.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			rel, _ := filepath.Rel(dir, p)
			fmt.Fprintf(h, "%s\x00", rel)
			n, err := io.Copy(h, f)
			fmt.Fprintf(h, "\x00%d\x00", n)
			return err
		})
		if err != nil {
			return [32]byte{}, err
		}
	}
	return [32]byte(h.Sum(nil)), nil
}

// cachePath is the cache file of dataset folder dir under cacheDir (empty:
// DefaultCacheDir()): datasets/NAME-HASH.cache, NAME the folder's name and
// HASH from its absolute path, so that folders of the same name do not share
// a file and a folder keeps one file as its sources change.
func cachePath(dir, cacheDir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if cacheDir == "" {
		if cacheDir, err = DefaultCacheDir(); err != nil {
			return "", err
		}
	}
	key := sha256.Sum256([]byte(abs))
	return filepath.Join(cacheDir, "datasets", fmt.Sprintf("%s-%x.cache", filepath.Base(abs), key[:8])), nil
}

var errStale = errors.New("stale: the source files changed")

// encodeDataset serialises d with the source fingerprint fp.
func encodeDataset(d *Dataset, fp [32]byte) []byte {
	g, t := d.NumGraphs(), len(d.Tasks)
	var e encoder
	e.buf = make([]byte, 0, 64+len(d.AtomFeat)+len(d.BondFeat)+4*len(d.BondAtoms)+16*(g+1)+4*len(d.Labels)+4*len(d.AtomGroup)+40*g)
	e.buf = append(e.buf, cacheMagic...)
	e.buf = append(e.buf, fp[:]...)
	e.u64(uint64(g))
	e.u64(uint64(d.TotalAtoms()))
	e.u64(uint64(d.TotalBonds()))
	e.u64(uint64(t))
	e.flag(d.Split != nil)
	e.flag(d.SMILES != nil)
	e.flag(d.AtomGroup != nil)
	e.i64s(d.NodePtr)
	e.i64s(d.BondPtr)
	e.buf = append(e.buf, d.AtomFeat...)
	e.i32s(d.BondAtoms)
	e.buf = append(e.buf, d.BondFeat...)
	for _, v := range d.Labels {
		e.buf = binary.LittleEndian.AppendUint32(e.buf, math.Float32bits(v))
	}
	for _, s := range d.Tasks {
		e.str(s)
	}
	if d.Split != nil {
		e.str(d.Split.Name)
		for _, part := range [][]int32{d.Split.Train, d.Split.Valid, d.Split.Test} {
			e.u64(uint64(len(part)))
			e.i32s(part)
		}
	}
	for _, s := range d.SMILES {
		e.str(s)
	}
	e.i32s(d.AtomGroup)
	return binary.LittleEndian.AppendUint32(e.buf, crc32.Checksum(e.buf, castagnoli))
}

type encoder struct{ buf []byte }

func (e *encoder) u64(v uint64) { e.buf = binary.LittleEndian.AppendUint64(e.buf, v) }

func (e *encoder) flag(b bool) {
	if b {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}

func (e *encoder) i64s(v []int64) {
	for _, x := range v {
		e.buf = binary.LittleEndian.AppendUint64(e.buf, uint64(x))
	}
}

func (e *encoder) i32s(v []int32) {
	for _, x := range v {
		e.buf = binary.LittleEndian.AppendUint32(e.buf, uint32(x))
	}
}

func (e *encoder) str(s string) {
	e.buf = binary.LittleEndian.AppendUint32(e.buf, uint32(len(s)))
	e.buf = append(e.buf, s...)
}

// decodeDataset parses a cache file, checking magic, fingerprint, checksum,
// every length, and finally the dataset's invariants.
func decodeDataset(blob []byte, fp [32]byte) (*Dataset, error) {
	head := len(cacheMagic) + len(fp)
	if len(blob) < head+4 || string(blob[:len(cacheMagic)]) != cacheMagic {
		return nil, errors.New("not a cache of this version")
	}
	if [32]byte(blob[len(cacheMagic):head]) != fp {
		return nil, errStale
	}
	body := blob[:len(blob)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(blob[len(body):]) {
		return nil, errors.New("checksum mismatch")
	}
	dec := decoder{buf: body[head:]}
	g, n, m, t := dec.count(), dec.count(), dec.count(), dec.count()
	hasSplit, hasSMILES, hasGroups := dec.flag(), dec.flag(), dec.flag()
	d := &Dataset{
		NodePtr:   dec.i64s(g + 1),
		BondPtr:   dec.i64s(g + 1),
		AtomFeat:  slices.Clone(dec.bytes(n * NumAtomFeatures)),
		BondAtoms: dec.i32s(2 * m),
		BondFeat:  slices.Clone(dec.bytes(m * NumBondFeatures)),
	}
	d.Labels = make([]float32, 0, min(g*t, len(dec.buf)/4))
	for range g * t {
		d.Labels = append(d.Labels, math.Float32frombits(dec.u32()))
		if dec.err != nil {
			break
		}
	}
	d.Tasks = dec.strs(t)
	if hasSplit {
		d.Split = &Split{Name: dec.str()}
		for _, part := range []*[]int32{&d.Split.Train, &d.Split.Valid, &d.Split.Test} {
			if n := dec.count(); n > 0 { // an empty part stays nil, as ReadOGB leaves it
				*part = dec.i32s(n)
			}
		}
	}
	if hasSMILES {
		d.SMILES = dec.strs(g)
	}
	if hasGroups {
		d.AtomGroup = dec.i32s(n)
	}
	switch {
	case dec.err != nil:
		return nil, dec.err
	case len(dec.buf) != 0:
		return nil, fmt.Errorf("%d bytes left over", len(dec.buf))
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return d, nil
}

// decoder reads the payload; after the first overrun it returns zero values
// and keeps the error.
type decoder struct {
	buf []byte
	err error
}

var errTruncated = errors.New("truncated")

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.buf) {
		d.err = errTruncated
		return nil
	}
	b := d.buf[:n]
	d.buf = d.buf[n:]
	return b
}

func (d *decoder) u32() uint32 {
	if b := d.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

// count reads a length, which can never exceed the bytes that remain.
func (d *decoder) count() int {
	b := d.bytes(8)
	if b == nil {
		return 0
	}
	v := binary.LittleEndian.Uint64(b)
	if v > uint64(len(d.buf)) {
		d.err = errTruncated
		return 0
	}
	return int(v)
}

func (d *decoder) flag() bool {
	b := d.bytes(1)
	return b != nil && b[0] == 1
}

func (d *decoder) i64s(n int) []int64 {
	b := d.bytes(8 * n)
	v := make([]int64, len(b)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}

func (d *decoder) i32s(n int) []int32 {
	b := d.bytes(4 * n)
	v := make([]int32, len(b)/4)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func (d *decoder) str() string { return string(d.bytes(int(d.u32()))) }

// strs reads n strings into one allocation shared by all of them.
func (d *decoder) strs(n int) []string {
	start := d.buf
	total := 0
	for range n {
		k := int(d.u32())
		total += 4 + k
		d.bytes(k)
	}
	if d.err != nil {
		return nil
	}
	all := string(start[:total])
	out := make([]string, n)
	for i, off := 0, 0; i < n; i++ {
		k := int(binary.LittleEndian.Uint32(start[off:]))
		out[i] = all[off+4 : off+4+k]
		off += 4 + k
	}
	return out
}
