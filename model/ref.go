package model

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
)

// Ref is a reference to a pre-trained model, resolved: a shipped model by
// its name, or the .pt path of a file export wrote (an encoder or a motif
// model), with its description beside it.
type Ref struct {
	Name    string // the reference as given: the model's name or the file's path
	Shipped bool   // Name is a shipped model's (ShippedModels)
}

// Resolve is the one reading of a model reference, wherever a model is
// taken by name or by file (LoadEncoder, LoadMotifModel, the commands): a
// reference without a folder separator and without the .pt extension is a
// name, and must be a shipped model's (an *UnknownModelError names the
// known ones); anything else is a file's path. A path to a folder, or to a
// file without its description beside it (a checkpoint, say), is a
// *NotExportedError; a path to nothing resolves, and the loader names the
// missing file.
func Resolve(ref string) (Ref, error) {
	if ref == "" {
		return Ref{}, errors.New("an empty reference names no model")
	}
	if !strings.ContainsAny(ref, `/\`) && path.Ext(ref) != ".pt" {
		if !slices.Contains(ShippedModels(), ref) {
			return Ref{}, &UnknownModelError{Name: ref}
		}
		return Ref{Name: ref, Shipped: true}, nil
	}
	st, err := os.Stat(ref)
	switch {
	case err != nil:
	case st.IsDir():
		return Ref{}, &NotExportedError{Path: ref, Folder: true}
	default:
		if _, err := os.Stat(EncoderInfoPath(ref)); errors.Is(err, os.ErrNotExist) {
			return Ref{}, &NotExportedError{Path: ref}
		}
	}
	return Ref{Name: ref}, nil
}

// Files are the files a reference reads: a file's .pt and its description;
// none for a shipped model.
func (r Ref) Files() []string {
	if r.Shipped {
		return nil
	}
	return []string{r.Name, EncoderInfoPath(r.Name)}
}

// UnknownModelError says that a name is no shipped model's.
type UnknownModelError struct{ Name string }

func (e *UnknownModelError) Error() string {
	return fmt.Sprintf("%s is not a shipped model (known: %s) nor a .pt file", e.Name, strings.Join(ShippedModels(), ", "))
}

// NotExportedError says that a path names something other than a model
// file export wrote: a folder, or a file without its description.
type NotExportedError struct {
	Path   string
	Folder bool
}

func (e *NotExportedError) Error() string {
	if e.Folder {
		return fmt.Sprintf("%s is a folder; want an exported encoder or motif model (.pt with its .json)", e.Path)
	}
	return fmt.Sprintf("%s has no description %s beside it: want an exported encoder or motif model (.pt with its .json)", e.Path, EncoderInfoPath(e.Path))
}
