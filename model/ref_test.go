package model_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/model"
)

// Resolve reads every model reference one way: a name (no folder, no .pt)
// is a shipped model's or refused naming the known ones; a path is a file,
// which must not be a folder nor lack its description; a path to nothing
// resolves, for the loader to name what is missing.
func TestResolve(t *testing.T) {
	dir := t.TempDir()
	described := filepath.Join(dir, "enc.pt")
	bare := filepath.Join(dir, "bare.pt")
	for _, f := range []string{described, model.EncoderInfoPath(described), bare} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shipped := model.ShippedModels()[0]
	var unknown *model.UnknownModelError
	var notExported *model.NotExportedError
	for _, tc := range []struct {
		ref     string
		want    model.Ref
		files   []string
		refused func(error) bool
	}{
		{ref: shipped, want: model.Ref{Name: shipped, Shipped: true}},
		{ref: "molhiv", refused: func(err error) bool { return errors.As(err, &unknown) && unknown.Name == "molhiv" }},
		{ref: "enc.pt", want: model.Ref{Name: "enc.pt"}, files: []string{"enc.pt", "enc.json"}},
		{ref: described, want: model.Ref{Name: described}, files: []string{described, model.EncoderInfoPath(described)}},
		{ref: filepath.Join(dir, shipped), want: model.Ref{Name: filepath.Join(dir, shipped)}, files: []string{filepath.Join(dir, shipped), filepath.Join(dir, shipped) + ".json"}},
		{ref: dir, refused: func(err error) bool {
			return errors.As(err, &notExported) && notExported.Folder && notExported.Path == dir
		}},
		{ref: bare, refused: func(err error) bool {
			return errors.As(err, &notExported) && !notExported.Folder && notExported.Path == bare
		}},
		{ref: "", refused: func(err error) bool { return err != nil }},
	} {
		got, err := model.Resolve(tc.ref)
		if tc.refused != nil {
			if !tc.refused(err) {
				t.Errorf("Resolve(%q) = %+v, %v; want it refused", tc.ref, got, err)
			}
			continue
		}
		if err != nil || got != tc.want || !slices.Equal(got.Files(), tc.files) {
			t.Errorf("Resolve(%q) = %+v (files %q), %v; want %+v (files %q)", tc.ref, got, got.Files(), err, tc.want, tc.files)
		}
	}
}
