package data

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/internal/testenv"
)

// sameDataset compares datasets, treating NaN labels as equal.
func sameDataset(t *testing.T, got, want *Dataset) {
	t.Helper()
	g, w := *got, *want
	g.Labels, w.Labels = nil, nil
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("datasets differ:\n%+v\n%+v", got, want)
	}
	if len(got.Labels) != len(want.Labels) {
		t.Fatalf("%d labels, want %d", len(got.Labels), len(want.Labels))
	}
	for i, v := range got.Labels {
		if u := want.Labels[i]; v != u && !(v != v && u != u) {
			t.Fatalf("label %d is %v, want %v", i, v, u)
		}
	}
}

func TestLoadBuildsUsesAndRebuildsCache(t *testing.T) {
	dir := t.TempDir()
	files := tinyFiles()
	files[fileNodeGroup] = "0\n0\n-1\n3\n3\n"
	writeFiles(t, dir, files)
	want, err := ReadOGB(dir)
	if err != nil {
		t.Fatal(err)
	}
	cachePath := filepath.Join(dir, "processed", cacheName)
	load := func(wantHit bool, wantRebuilt string) *Dataset {
		t.Helper()
		d, st, err := Load(dir, LoadOptions{CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if st.Path != cachePath || st.Hit != wantHit || !strings.HasPrefix(st.Rebuilt, wantRebuilt) || st.WriteErr != nil {
			t.Fatalf("cache status %+v, want path %s, hit %v, rebuilt %q", st, cachePath, wantHit, wantRebuilt)
		}
		return d
	}
	sameDataset(t, load(false, "absent"), want)
	sameDataset(t, load(true, ""), want)

	// Any change of a source file makes the cache stale.
	files[fileLabels] = "0,\n0,1\n"
	writeFiles(t, dir, map[string]string{fileLabels: files[fileLabels]})
	d := load(false, "stale")
	if d.Labels[0] != 0 {
		t.Fatalf("label 0 is %v after the source changed to 0", d.Labels[0])
	}
	load(true, "")

	// Damage anywhere (a flipped byte, a cut-off end, a wrong magic) is noticed
	// and the cache rebuilt from the source.
	blob, err := os.ReadFile(cachePath)
	if err != nil {
		t.Fatal(err)
	}
	damages := map[string][]byte{
		"checksum mismatch": func() []byte {
			b := append([]byte(nil), blob...)
			b[len(b)/2] ^= 0x40
			return b
		}(),
		"checksum mismatch ": blob[:len(blob)-7],
		"not a cache":        append([]byte("MGDSET00"), blob[8:]...),
	}
	for reason, bad := range damages {
		if err := os.WriteFile(cachePath, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		got := load(false, "corrupt: "+strings.TrimSpace(reason))
		if got.Labels[0] != 0 || len(got.AtomGroup) != 5 {
			t.Fatalf("after %s: dataset not rebuilt from source", reason)
		}
		load(true, "")
	}
}

// A cache whose checksum is right but whose content breaks the dataset's
// invariants (as a bug or a hand-made file might) is not trusted either.
func TestDecodeValidatesContent(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, tinyFiles())
	d, err := ReadOGB(dir)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := fingerprint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeDataset(encodeDataset(d, fp), fp); err != nil {
		t.Fatalf("a good cache is refused: %v", err)
	}
	d.BondAtoms[5] = 7 // beyond molecule 1's two atoms
	_, err = decodeDataset(encodeDataset(d, fp), fp)
	if err == nil || !strings.Contains(err.Error(), "bond endpoint 7") {
		t.Errorf("bad endpoint accepted: %v", err)
	}
}

// A read-only folder (like ../shared) is never written; its cache goes to the
// cache folder instead.
func TestLoadReadOnlyFolder(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, tinyFiles())
	for _, p := range []string{filepath.Join(dir, "raw"), filepath.Join(dir, "split", "scaffold"), filepath.Join(dir, "split"), filepath.Join(dir, "mapping"), dir} {
		if err := os.Chmod(p, 0o555); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	cacheDir := t.TempDir()
	for _, hit := range []bool{false, true} {
		_, st, err := Load(dir, LoadOptions{CacheDir: cacheDir})
		if err != nil {
			t.Fatal(err)
		}
		if st.Hit != hit || !strings.HasPrefix(st.Path, filepath.Join(cacheDir, "datasets")+string(filepath.Separator)) || st.WriteErr != nil {
			t.Fatalf("cache status %+v, want hit %v under %s", st, hit, cacheDir)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "processed")); !os.IsNotExist(err) {
		t.Errorf("read-only folder written: %v", err)
	}
}

func TestLoadMolHIV(t *testing.T) {
	dir := testenv.SharedData(t, "ogb/ogbg_molhiv")
	cacheDir := t.TempDir()
	d, st, err := Load(dir, LoadOptions{CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	if st.Hit || st.WriteErr != nil {
		t.Fatalf("first load: %+v", st)
	}
	// The figures of ../shared/data/README.md.
	if d.NumGraphs() != 41127 || d.TotalAtoms() != 1049163 || d.TotalBonds() != 1129688 ||
		len(d.Split.Train) != 32901 || len(d.Split.Valid) != 4113 || len(d.Split.Test) != 4113 ||
		!reflect.DeepEqual(d.Tasks, []string{"HIV_active"}) || len(d.SMILES) != 41127 {
		t.Fatalf("molhiv: %d graphs, %d atoms, %d bonds, tasks %q", d.NumGraphs(), d.TotalAtoms(), d.TotalBonds(), d.Tasks)
	}
	cached, st, err := Load(dir, LoadOptions{CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Hit {
		t.Fatalf("second load missed the cache: %+v", st)
	}
	sameDataset(t, cached, d)
}

// BenchmarkLoadCached measures loading ogbg-molhiv from a valid cache,
// fingerprinting of the source files included.
func BenchmarkLoadCached(b *testing.B) {
	dir := testenv.SharedData(b, "ogb/ogbg_molhiv")
	opt := LoadOptions{CacheDir: b.TempDir()}
	if _, _, err := Load(dir, opt); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, st, err := Load(dir, opt); err != nil || !st.Hit {
			b.Fatalf("%v %+v", err, st)
		}
	}
}
