package rdkit

import (
	"compress/gzip"
	"encoding/gob"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A recording answers as RDKit does: the same graphs, with and without
// scaffolds, the same Murcko scaffolds and the same rejections; a SMILES it
// does not hold is an error naming the file and the variable, and what needs
// RDKit itself (depictions, fragments) is refused.
func TestRecordingReplaysRDKit(t *testing.T) {
	smiles := []string{"CC(=O)O", "OC(=O)c1ccccc1CCN", "C", "[Na+].[Cl-]", "C1CC", "CC(=O)O"}
	path := filepath.Join(t.TempDir(), "chem.rec")
	if err := Record(path, smiles); err != nil {
		t.Fatal(err)
	}
	r, err := readRecording(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.entries) != 5 || r.entries["C1CC"].Graph != nil || r.entries["C"].Graph == nil {
		t.Fatalf("recorded %d entries (want 5, the duplicate once), unclosed ring %+v, methane %+v", len(r.entries), r.entries["C1CC"], r.entries["C"])
	}
	saved := active
	active = r
	t.Cleanup(func() { active = saved })
	for _, s := range smiles {
		for _, scaffold := range []bool{false, true} {
			active = nil
			want, wantErr := SmilesToGraph(s, scaffold)
			wantScaffold, _ := MurckoScaffold(s)
			active = r
			got, gotErr := SmilesToGraph(s, scaffold)
			if !reflect.DeepEqual(got, want) || errString(gotErr) != errString(wantErr) {
				t.Errorf("%s (scaffold %v): replayed %+v, %v; RDKit %+v, %v", s, scaffold, got, gotErr, want, wantErr)
			}
			if wantErr == nil {
				if got, err := MurckoScaffold(s); got != wantScaffold || err != nil {
					t.Errorf("%s: replayed scaffold %q, %v; RDKit %q", s, got, err, wantScaffold)
				}
			}
		}
	}
	_, err = SmilesToGraph("CCO", false)
	for _, want := range []string{`"CCO" is not in the recording`, path, RecordingEnv} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("an unrecorded SMILES: %v, want an error saying %q", err, want)
		}
	}
	if _, err := DepictSVG("CC(=O)O", nil, 100, 100); err == nil || !strings.Contains(err.Error(), "needs RDKit itself") {
		t.Errorf("a depiction from a recording: %v", err)
	}
	if _, err := FragmentSMILES("CC(=O)O", []int{0}); err == nil || !strings.Contains(err.Error(), "needs RDKit itself") {
		t.Errorf("a fragment from a recording: %v", err)
	}
}

// A file that is no recording, or one of another format, is refused with
// the variable and the file named.
func TestReadRecordingRefuses(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("plain text, not a gzip stream"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other")
	f, err := os.Create(other)
	if err != nil {
		t.Fatal(err)
	}
	z := gzip.NewWriter(f)
	if err := gob.NewEncoder(z).Encode(&recordingFile{Format: "micrograph rdkit recording 0"}); err != nil {
		t.Fatal(err)
	}
	z.Close()
	f.Close()
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "absent"), "no such file"},
		{plain, "gzip"},
		{other, `written as "micrograph rdkit recording 0"`},
	} {
		_, err := readRecording(tc.path)
		if err == nil || !strings.Contains(err.Error(), RecordingEnv+"="+tc.path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming the file and saying %q", tc.path, err, tc.want)
		}
	}
}
