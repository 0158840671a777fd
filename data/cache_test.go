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
	cacheDir := t.TempDir()
	var cachePath string
	load := func(wantHit bool, wantRebuilt string) *Dataset {
		t.Helper()
		d, st, err := Load(dir, LoadOptions{CacheDir: cacheDir})
		if err != nil {
			t.Fatal(err)
		}
		if st.Path != cachePath || st.Hit != wantHit || !strings.HasPrefix(st.Rebuilt, wantRebuilt) {
			t.Fatalf("cache status %+v, want path %s, hit %v, rebuilt %q", st, cachePath, wantHit, wantRebuilt)
		}
		return d
	}
	first, st, err := Load(dir, LoadOptions{CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	sameDataset(t, first, want)
	if cachePath = st.Path; filepath.Dir(cachePath) != filepath.Join(cacheDir, "datasets") ||
		!strings.HasPrefix(filepath.Base(cachePath), filepath.Base(dir)+"-") || st.Hit || st.Rebuilt != "absent" {
		t.Fatalf("first load: %+v, want a new file in %s/datasets named after %s", st, cacheDir, dir)
	}
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

// loadTwice loads dir with opt twice and checks that the first load builds
// the cache in cacheDir/datasets, the second uses it, both give the dataset
// as read from source, and dir is left exactly as it was.
func loadTwice(t *testing.T, dir string, opt LoadOptions, cacheDir string) *Dataset {
	t.Helper()
	want, err := ReadOGB(dir)
	if err != nil {
		t.Fatal(err)
	}
	before := testenv.Listing(t, dir)
	for _, hit := range []bool{false, true} {
		d, st, err := Load(dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		if st.Hit != hit || filepath.Dir(st.Path) != filepath.Join(cacheDir, "datasets") {
			t.Fatalf("cache status %+v, want hit %v in %s", st, hit, filepath.Join(cacheDir, "datasets"))
		}
		if _, err := os.Stat(st.Path); err != nil {
			t.Fatalf("cache file: %v", err)
		}
		sameDataset(t, d, want)
	}
	if after := testenv.Listing(t, dir); after != before {
		t.Errorf("the dataset folder changed:\nbefore\n%s\nafter\n%s", before, after)
	}
	return want
}

// A read-only dataset folder (a user's shared dataset) loads; its cache goes
// to the cache folder named, or by default to the user's cache folder, and
// nothing in the dataset folder changes (root could write it anyway, so the
// listing is compared, not only the error).
func TestLoadReadOnlyFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	writeFiles(t, dir, tinyFiles())
	testenv.MakeReadOnly(t, dir)

	cacheDir := t.TempDir()
	loadTwice(t, dir, LoadOptions{CacheDir: cacheDir}, cacheDir)

	userCache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", userCache)
	loadTwice(t, dir, LoadOptions{}, filepath.Join(userCache, "micrograph"))
}

// The same with a read-only copy of a real OGB folder (ogbg-molbace).
func TestLoadReadOnlyCopyOfBace(t *testing.T) {
	dir := testenv.ReadOnlyCopy(t, testenv.SharedData(t, "ogb/ogbg_molbace"))
	cacheDir := t.TempDir()
	d := loadTwice(t, dir, LoadOptions{CacheDir: cacheDir}, cacheDir)
	if d.NumGraphs() != 1513 || !reflect.DeepEqual(d.Tasks, []string{"Class"}) {
		t.Errorf("bace: %d graphs, tasks %q", d.NumGraphs(), d.Tasks)
	}
}

// What earlier versions left in a dataset folder's processed/ (a cache of
// older sources, a damaged file, even a cache of the current sources) is
// neither read nor touched.
func TestLoadIgnoresOldCacheInDatasetFolder(t *testing.T) {
	dir := t.TempDir()
	files := tinyFiles()
	writeFiles(t, dir, files)
	_, st, err := Load(dir, LoadOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	current, err := os.ReadFile(st.Path)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{fileLabels: "0,\n0,0\n"})
	stale := current
	_, st, err = Load(dir, LoadOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if current, err = os.ReadFile(st.Path); err != nil {
		t.Fatal(err)
	}
	want, err := ReadOGB(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		blob []byte
	}{
		{"cache of older sources", stale},
		{"damaged file", []byte("MGDSET01 cut short")},
		{"cache of the current sources", current},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := filepath.Join(dir, "processed", "micrograph.cache")
			if err := os.MkdirAll(filepath.Dir(old), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(old, tc.blob, 0o644); err != nil {
				t.Fatal(err)
			}
			before := testenv.Listing(t, dir)
			cacheDir := t.TempDir()
			d, st, err := Load(dir, LoadOptions{CacheDir: cacheDir})
			if err != nil {
				t.Fatal(err)
			}
			if st.Hit || st.Rebuilt != "absent" || filepath.Dir(st.Path) != filepath.Join(cacheDir, "datasets") {
				t.Errorf("cache status %+v: the file in processed/ was read", st)
			}
			sameDataset(t, d, want)
			if after := testenv.Listing(t, dir); after != before {
				t.Errorf("the dataset folder changed:\nbefore\n%s\nafter\n%s", before, after)
			}
		})
	}
}

// Without a cache folder to write in, Load fails and says which and why.
func TestLoadCacheFolderErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, tinyFiles())
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load(dir, LoadOptions{CacheDir: filepath.Join(notDir, "cache")})
	if err == nil || !strings.Contains(err.Error(), "cache of "+dir) || !strings.Contains(err.Error(), notDir) {
		t.Errorf("cache folder under a file: %v", err)
	}

	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	_, _, err = Load(dir, LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "no cache folder was named and there is no user cache folder") {
		t.Errorf("no user cache folder: %v", err)
	}
}

func TestLoadMolHIV(t *testing.T) {
	dir := testenv.SharedData(t, "ogb/ogbg_molhiv")
	before := testenv.Listing(t, dir)
	cacheDir := t.TempDir()
	d, st, err := Load(dir, LoadOptions{CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	if st.Hit {
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
	if after := testenv.Listing(t, dir); after != before {
		t.Errorf("the shared dataset folder changed:\nbefore\n%s\nafter\n%s", before, after)
	}
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
