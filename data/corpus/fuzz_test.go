package corpus

import (
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
)

// FuzzOpenCorpus replaces one shard of a small corpus with arbitrary bytes
// and records their size and CRC-32C in the manifest, and, when they are
// long enough to hold a header, the header's counts too, so that inputs
// pass the checks a damaged shard fails (size, CRC, header against the
// manifest) and reach the reader behind them: Open must return an
// error or a corpus whose every molecule Graph either refuses or returns
// views that collate, or fail to collate with an error; never a panic or a
// hang.
func FuzzOpenCorpus(f *testing.F) {
	template := filepath.Join(f.TempDir(), "template")
	src := filepath.Join(f.TempDir(), "mols.csv")
	rows := "smiles\nCCO\nc1ccccc1O\nC1CC\nCC(=O)Nc1ccc(O)cc1\nCCCl\nO=C(O)c1ccccc1\n"
	if err := os.WriteFile(src, []byte(rows), 0o644); err != nil {
		f.Fatal(err)
	}
	if _, err := Featurize(src, template, Options{ShardRows: 3, Workers: 1}); err != nil {
		f.Fatal(err)
	}
	m, err := ReadManifest(template)
	if err != nil {
		f.Fatal(err)
	}
	if len(m.Shards) != 2 {
		f.Fatalf("the template has %d shards, want 2", len(m.Shards))
	}
	originals := make([][]byte, len(m.Shards))
	for i, s := range m.Shards {
		if originals[i], err = os.ReadFile(filepath.Join(template, s.File)); err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), originals[i])
	}
	// A header whose counts lie about the sections, and sections that lie
	// about the molecules (a bond endpoint beyond its molecule's atoms, an
	// offset running backwards).
	lying := slices.Clone(originals[0])
	binary.LittleEndian.PutUint64(lying[8:], 1<<40)
	f.Add(uint8(0), lying)
	endpoint := slices.Clone(originals[1])
	lay := layout(int64(m.Shards[1].Molecules), m.Shards[1].Atoms, m.Shards[1].Bonds)
	binary.LittleEndian.PutUint32(endpoint[lay.bondAtoms:], 1000)
	f.Add(uint8(1), endpoint)
	backwards := slices.Clone(originals[1])
	binary.LittleEndian.PutUint64(backwards[lay.nodePtr+8:], ^uint64(0))
	f.Add(uint8(1), backwards)
	f.Add(uint8(0), []byte(shardMagic))
	// Counts that make the layout's arithmetic go negative or overflow.
	negative := make([]byte, 72)
	copy(negative, shardMagic)
	binary.LittleEndian.PutUint64(negative[8:], ^uint64(0)) // −1 molecules
	binary.LittleEndian.PutUint64(negative[24:], 1)
	f.Add(uint8(0), negative)
	huge := slices.Clone(negative)
	binary.LittleEndian.PutUint64(huge[8:], 1<<61)
	f.Add(uint8(1), huge)

	dir := filepath.Join(f.TempDir(), "corpus")
	if err := os.CopyFS(dir, os.DirFS(template)); err != nil {
		f.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(template, data.CorpusManifestFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, which uint8, content []byte) {
		i := int(which) % len(m.Shards)
		path := filepath.Join(dir, m.Shards[i].File)
		defer os.WriteFile(path, originals[i], 0o644)
		defer os.WriteFile(filepath.Join(dir, data.CorpusManifestFile), manifest, 0o644)
		changed := *m
		changed.Shards = slices.Clone(m.Shards)
		info := &changed.Shards[i]
		info.Bytes, info.CRC32C = int64(len(content)), crc32.Checksum(content, castagnoli)
		if len(content) >= shardHeaderBytes {
			h := content[:shardHeaderBytes]
			info.Molecules, info.Atoms, info.Bonds = int(binary.LittleEndian.Uint64(h[8:])), int64(binary.LittleEndian.Uint64(h[16:])), int64(binary.LittleEndian.Uint64(h[24:]))
			info.FirstRow, info.Rows = int64(binary.LittleEndian.Uint64(h[32:])), int(binary.LittleEndian.Uint64(h[40:]))
		}
		blob, err := json.Marshal(&changed) // not writeManifest: its fsync would slow fuzzing tenfold
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, data.CorpusManifestFile), blob, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Open(dir)
		if err != nil {
			return
		}
		defer c.Close()
		var b feed.Batch
		for g := range c.NumGraphs() {
			v, err := c.Graph(g)
			if err != nil {
				continue
			}
			if len(v.AtomFeat)%data.NumAtomFeatures != 0 || len(v.BondFeat) != v.NumBonds()*data.NumBondFeatures || len(v.BondAtoms) != 2*v.NumBonds() {
				t.Fatalf("molecule %d: %d atom features, %d bond features, %d bond endpoints", g, len(v.AtomFeat), len(v.BondFeat), len(v.BondAtoms))
			}
			feed.Collate(c, []int32{int32(g)}, &b)
			c.SourceRow(g)
		}
		c.PretrainFilter(3)
	})
}
