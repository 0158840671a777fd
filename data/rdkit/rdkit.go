// Package rdkit turns SMILES into molecular graphs, Murcko scaffolds and
// depictions through RDKit's C++ library.
//
// The RDKit code lives in libmgchem.so (built by `make chem` from shim/), which
// this package loads with dlopen at first use rather than linking: a micrograph
// binary then starts, trains and evaluates on machines without RDKit, and only
// the calls below fail there, with an error naming the places searched. A
// recording of featurisations made elsewhere (RecordingEnv, Record) can stand
// in for RDKit there.
package rdkit

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "shim/mgchem.h"

// Entry points of the loaded library; their types follow the header, so a
// signature change there breaks this build instead of a call at run time.
static __typeof__(&mgchem_abi_version) fn_abi_version;
static __typeof__(&mgchem_rdkit_version) fn_rdkit_version;
static __typeof__(&mgchem_free) fn_free;
static __typeof__(&mgchem_mol_graph) fn_mol_graph;
static __typeof__(&mgchem_graph_free) fn_graph_free;
static __typeof__(&mgchem_murcko_scaffold) fn_murcko_scaffold;
static __typeof__(&mgchem_depict_svg) fn_depict_svg;
static __typeof__(&mgchem_fragment_smiles) fn_fragment_smiles;

// Opens the library at path and resolves every entry point. Returns NULL or a
// message to release with free().
static char *chem_open(const char *path) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) return strdup(dlerror());
	void *syms[8];
	static const char *names[8] = {
		"mgchem_abi_version", "mgchem_rdkit_version", "mgchem_free", "mgchem_mol_graph",
		"mgchem_graph_free", "mgchem_murcko_scaffold", "mgchem_depict_svg", "mgchem_fragment_smiles",
	};
	for (int i = 0; i < 8; i++) {
		syms[i] = dlsym(h, names[i]);
		if (syms[i] == NULL) {
			char *msg = strdup(dlerror());
			dlclose(h);
			return msg;
		}
	}
	fn_abi_version = (__typeof__(fn_abi_version))syms[0];
	fn_rdkit_version = (__typeof__(fn_rdkit_version))syms[1];
	fn_free = (__typeof__(fn_free))syms[2];
	fn_mol_graph = (__typeof__(fn_mol_graph))syms[3];
	fn_graph_free = (__typeof__(fn_graph_free))syms[4];
	fn_murcko_scaffold = (__typeof__(fn_murcko_scaffold))syms[5];
	fn_depict_svg = (__typeof__(fn_depict_svg))syms[6];
	fn_fragment_smiles = (__typeof__(fn_fragment_smiles))syms[7];
	return NULL;
}

static int call_abi_version(void) { return fn_abi_version(); }
static const char *call_rdkit_version(void) { return fn_rdkit_version(); }
static void call_free(void *p) { fn_free(p); }
static mgchem_error call_mol_graph(const char *s, size_t n, int scaffold, mgchem_graph **out) {
	return fn_mol_graph(s, n, scaffold, out);
}
static void call_graph_free(mgchem_graph *g) { fn_graph_free(g); }
static mgchem_error call_murcko_scaffold(const char *s, size_t n, char **out) {
	return fn_murcko_scaffold(s, n, out);
}
static mgchem_error call_depict_svg(const char *s, size_t n, const int32_t *hl, const float *colours,
                                    int32_t nhl, int32_t w, int32_t h, char **out) {
	return fn_depict_svg(s, n, hl, colours, nhl, w, h, out);
}
static mgchem_error call_fragment_smiles(const char *s, size_t n, const int32_t *atoms,
                                         const int32_t *offsets, int32_t num, char **out) {
	return fn_fragment_smiles(s, n, atoms, offsets, num, out);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// Features per atom and per bond, as in OGB's smiles2graph (docs/method.md §8).
const (
	NumAtomFeatures = C.MGCHEM_ATOM_FEATURES
	NumBondFeatures = C.MGCHEM_BOND_FEATURES
)

// LibraryEnv names the environment variable that points at libmgchem.so,
// searched before the build folders.
const LibraryEnv = "MICROGRAPH_CHEM_LIB"

// Graph is one molecule as OGB's smiles2graph describes it: atoms and bonds in
// RDKit's order, features as indices into OGB's allowable-feature lists.
type Graph struct {
	AtomFeatures []uint8 // NumAtomFeatures per atom
	BondAtoms    []int32 // begin and end atom of each bond
	BondFeatures []uint8 // NumBondFeatures per bond
	Scaffold     string  // Murcko scaffold SMILES when asked for ("" if acyclic)
}

// NumAtoms is the number of heavy atoms (and hydrogens RDKit keeps explicit).
func (g *Graph) NumAtoms() int { return len(g.AtomFeatures) / NumAtomFeatures }

// NumBonds is the number of bonds, each counted once.
func (g *Graph) NumBonds() int { return len(g.BondAtoms) / 2 }

var (
	loadOnce sync.Once
	loadErr  error
	version  string
	active   *recording // with RecordingEnv set: the calls answer from it
)

// Load loads libmgchem.so if that has not happened yet and reports whether
// RDKit is usable; with RecordingEnv set it reads the recording instead. The
// other functions call it themselves; callers use it to fail early, before
// any work.
func Load() error {
	loadOnce.Do(func() { loadErr = load() })
	return loadErr
}

// RDKitVersion is the version of RDKit the loaded library was built with (or
// that made the recording, which it names).
func RDKitVersion() (string, error) {
	if err := Load(); err != nil {
		return "", err
	}
	return version, nil
}

// searchPath lists where libmgchem.so may be, in order: $MICROGRAPH_CHEM_LIB,
// then build/lib next to the executable's folder (bin/micrograph) or inside
// it, then build/lib of the module this package was compiled from. The module
// folder comes from runtime.Caller rather than a cgo -D define of ${SRCDIR},
// because cgo refuses -D values containing '-' or '@', which ordinary checkout
// and module-cache paths contain.
func searchPath() []string {
	var paths []string
	if p := os.Getenv(LibraryEnv); p != "" {
		paths = append(paths, p)
	}
	const rel = "build/lib/libmgchem.so"
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			dir := filepath.Dir(exe)
			paths = append(paths, filepath.Join(dir, "..", rel), filepath.Join(dir, rel))
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		paths = append(paths, filepath.Join(filepath.Dir(file), "..", "..", rel))
	}
	return paths
}

func load() error {
	if path := os.Getenv(RecordingEnv); path != "" {
		r, err := readRecording(path)
		if err != nil {
			return err
		}
		active, version = r, fmt.Sprintf("%s (recorded: %s)", r.rdkit, path)
		return nil
	}
	return loadFrom(searchPath())
}

// loadFrom opens the first of paths that loads; the error lists every attempt.
func loadFrom(paths []string) error {
	var tried []string
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			tried = append(tried, p+" (absent)")
			continue
		}
		cpath := C.CString(p)
		msg := C.chem_open(cpath)
		C.free(unsafe.Pointer(cpath))
		if msg != nil {
			tried = append(tried, fmt.Sprintf("%s (%s)", p, C.GoString(msg)))
			C.free(unsafe.Pointer(msg))
			continue
		}
		if v := int(C.call_abi_version()); v != C.MGCHEM_ABI_VERSION {
			return fmt.Errorf("rdkit: %s was built from another version of its header (ABI %d, want %d); run `make chem`", p, v, C.MGCHEM_ABI_VERSION)
		}
		version = C.GoString(C.call_rdkit_version())
		return nil
	}
	return fmt.Errorf("rdkit: cannot load libmgchem.so (RDKit support); run `make` to build it, or set %s; searched: %s",
		LibraryEnv, strings.Join(tried, "; "))
}

// cstr passes s to C without copying; the shim reads it during the call only.
func cstr(s string) (*C.char, C.size_t) {
	return (*C.char)(unsafe.Pointer(unsafe.StringData(s))), C.size_t(len(s))
}

// takeError converts a message from the library into a Go error and frees it.
func takeError(msg C.mgchem_error) error {
	if msg == nil {
		return nil
	}
	defer C.call_free(unsafe.Pointer(msg))
	return errors.New(C.GoString(msg))
}

// SmilesToGraph parses smiles as RDKit's Python MolFromSmiles does and
// featurises it following OGB's smiles2graph exactly (docs/method.md §8); with
// scaffold it also computes the Murcko scaffold, saving a second parse. An
// invalid SMILES gives an error carrying RDKit's reason.
func SmilesToGraph(smiles string, scaffold bool) (*Graph, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	if active != nil {
		return active.graph(smiles, scaffold)
	}
	s, n := cstr(smiles)
	var out *C.mgchem_graph
	withScaffold := C.int(0)
	if scaffold {
		withScaffold = 1
	}
	if err := takeError(C.call_mol_graph(s, n, withScaffold, &out)); err != nil {
		return nil, err
	} else if out == nil {
		return nil, errNoMemory
	}
	defer C.call_graph_free(out)
	atoms, bonds := int(out.num_atoms), int(out.num_bonds)
	g := &Graph{
		AtomFeatures: C.GoBytes(unsafe.Pointer(out.atom_features), C.int(atoms*NumAtomFeatures)),
		BondAtoms:    make([]int32, 2*bonds),
		BondFeatures: C.GoBytes(unsafe.Pointer(out.bond_features), C.int(bonds*NumBondFeatures)),
	}
	copy(g.BondAtoms, unsafe.Slice((*int32)(unsafe.Pointer(out.bond_atoms)), 2*bonds))
	if out.scaffold != nil {
		g.Scaffold = C.GoString(out.scaffold)
	}
	return g, nil
}

// MurckoScaffold is the Bemis–Murcko scaffold of smiles as canonical isomeric
// SMILES, as RDKit's MurckoScaffoldSmiles(includeChirality=True) gives it; ""
// for a molecule without rings.
func MurckoScaffold(smiles string) (string, error) {
	if err := Load(); err != nil {
		return "", err
	}
	if active != nil {
		g, err := active.graph(smiles, true)
		if err != nil {
			return "", err
		}
		return g.Scaffold, nil
	}
	s, n := cstr(smiles)
	var out *C.char
	if err := takeError(C.call_murcko_scaffold(s, n, &out)); err != nil {
		return "", err
	} else if out == nil {
		return "", errNoMemory
	}
	defer C.call_free(unsafe.Pointer(out))
	return C.GoString(out), nil
}

// errNoMemory is a failure whose message the shim had no memory to allocate
// (it then reports success with no output).
var errNoMemory = errors.New("rdkit: out of memory")

// maxImageSide bounds depictions to a sane size (and to C's int32).
const maxImageSide = 1 << 14

// DepictSVG draws smiles as an SVG document of width×height pixels with the
// given atoms (RDKit atom indices, i.e. positions in the graph) and the bonds
// between them highlighted in RDKit's highlight colour.
func DepictSVG(smiles string, highlight []int, width, height int) (string, error) {
	return depict(smiles, highlight, nil, width, height)
}

// Colour is a colour's red, green and blue, each in [0, 1].
type Colour [3]float32

// DepictSVGColoured draws smiles as an SVG document of width×height pixels
// with each atom of colours (RDKit atom index → colour) highlighted in its
// colour, and each bond between two atoms of one colour in that colour.
func DepictSVGColoured(smiles string, colours map[int]Colour, width, height int) (string, error) {
	atoms := slices.Sorted(maps.Keys(colours))
	rgb := make([]float32, 0, 3*len(atoms))
	for _, a := range atoms {
		c := colours[a]
		rgb = append(rgb, c[0], c[1], c[2])
	}
	return depict(smiles, atoms, rgb, width, height)
}

// depict draws smiles with the atoms highlight highlighted, in the colours
// rgb (three per atom) or, with nil, RDKit's.
func depict(smiles string, highlight []int, rgb []float32, width, height int) (string, error) {
	if err := Load(); err != nil {
		return "", err
	}
	if active != nil {
		return "", active.refuse("a depiction")
	}
	if width <= 0 || height <= 0 || width > maxImageSide || height > maxImageSide {
		return "", fmt.Errorf("rdkit: image size %dx%d outside 1..%d", width, height, maxImageSide)
	}
	atoms, err := atomIndices("highlighted", highlight)
	if err != nil {
		return "", err
	}
	var hl *C.int32_t
	if len(atoms) > 0 {
		hl = &atoms[0]
	}
	var colours *C.float
	if len(rgb) > 0 {
		colours = (*C.float)(unsafe.Pointer(&rgb[0]))
	}
	s, n := cstr(smiles)
	var out *C.char
	if err := takeError(C.call_depict_svg(s, n, hl, colours, C.int32_t(len(atoms)), C.int32_t(width), C.int32_t(height), &out)); err != nil {
		return "", err
	} else if out == nil {
		return "", errNoMemory
	}
	defer C.call_free(unsafe.Pointer(out))
	return C.GoString(out), nil
}

// atomIndices converts atom indices for C, refusing those out of its range.
func atomIndices(what string, atoms []int) ([]C.int32_t, error) {
	out := make([]C.int32_t, len(atoms))
	for i, a := range atoms {
		if a < 0 || a > 1<<31-1 {
			return nil, fmt.Errorf("rdkit: %s atom %d out of range", what, a)
		}
		out[i] = C.int32_t(a)
	}
	return out, nil
}

// FragmentSMILES is the canonical SMILES of the fragment of smiles made of
// the given atoms (RDKit atom indices) and the bonds between them, as
// RDKit's MolFragmentToSmiles writes it: a ring's atoms keep their
// aromaticity, so a benzene ring cut from a molecule is c1ccccc1.
func FragmentSMILES(smiles string, atoms []int) (string, error) {
	out, err := Fragments(smiles, [][]int{atoms})
	if err != nil {
		return "", err
	}
	return out[0], nil
}

// Fragments is FragmentSMILES of each piece of smiles, from one parse.
func Fragments(smiles string, pieces [][]int) ([]string, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	if active != nil {
		return nil, active.refuse("a fragment's SMILES")
	}
	if len(pieces) == 0 {
		return nil, nil
	}
	var flat []int
	offsets := make([]C.int32_t, 0, len(pieces)+1)
	for _, p := range pieces {
		if len(p) == 0 {
			return nil, errors.New("rdkit: a fragment needs at least one atom")
		}
		offsets = append(offsets, C.int32_t(len(flat)))
		flat = append(flat, p...)
	}
	offsets = append(offsets, C.int32_t(len(flat)))
	ids, err := atomIndices("fragment", flat)
	if err != nil {
		return nil, err
	}
	s, n := cstr(smiles)
	var out *C.char
	if err := takeError(C.call_fragment_smiles(s, n, &ids[0], &offsets[0], C.int32_t(len(pieces)), &out)); err != nil {
		return nil, err
	} else if out == nil {
		return nil, errNoMemory
	}
	defer C.call_free(unsafe.Pointer(out))
	all := strings.TrimSuffix(C.GoString(out), "\n")
	return strings.Split(all, "\n"), nil
}
