package data

import (
	"fmt"
	"strings"

	"github.com/micrograph/micrograph/internal/field"
)

// Limits bound what one row may ask of RDKit, whose parser cannot be
// interrupted and whose time grows faster than the square of a molecule's
// size (a chain of 400 atoms takes half a second, one of 1,000 about half a
// minute, one of a million never returns). A row beyond them is rejected with
// its reason, like a SMILES RDKit refuses.
type Limits struct {
	MaxAtoms       int `json:"max_atoms"`        // atoms in a SMILES (bracket atoms, organic-subset atoms, *)
	MaxSMILESBytes int `json:"max_smiles_bytes"` // bytes of a SMILES field
}

// DefaultLimits admit every molecule of the seven MoleculeNet benchmarks and
// ogbg-molhiv (the largest, in SIDER, has 492 atoms in 1,340 bytes) and keep
// the slowest molecule to about half a minute.
func DefaultLimits() Limits { return Limits{MaxAtoms: 1000, MaxSMILESBytes: 8192} }

// Validate reports a limit that admits nothing, naming its field.
func (l Limits) Validate() error {
	switch {
	case l.MaxAtoms < 1:
		return field.Errorf("max_atoms", l.MaxAtoms, "must be positive")
	case l.MaxSMILESBytes < 1:
		return field.Errorf("max_smiles_bytes", l.MaxSMILESBytes, "must be positive")
	}
	return nil
}

// OrDefault is l with each zero limit replaced by the default.
func (l Limits) OrDefault() Limits {
	d := DefaultLimits()
	if l.MaxAtoms == 0 {
		l.MaxAtoms = d.MaxAtoms
	}
	if l.MaxSMILESBytes == 0 {
		l.MaxSMILESBytes = d.MaxSMILESBytes
	}
	return l
}

// check is why smiles exceeds the limits, or "" when it does not; it reads
// the string once, without RDKit.
func (l Limits) check(smiles string) string {
	if len(smiles) > l.MaxSMILESBytes {
		return fmt.Sprintf("SMILES of %d bytes, more than the limit of %d", len(smiles), l.MaxSMILESBytes)
	}
	if i := strings.IndexFunc(smiles, notSMILES); i >= 0 {
		return fmt.Sprintf("byte 0x%02x at offset %d: a SMILES is printable ASCII", smiles[i], i)
	}
	// RDKit reads what follows a space as the molecule's name: "C C" would
	// be methane. Spaces around the SMILES are harmless.
	if trimmed := strings.Trim(smiles, " "); strings.Contains(trimmed, " ") {
		return fmt.Sprintf("a space at offset %d: RDKit would read what follows as a name, not as atoms", strings.Index(smiles, trimmed)+strings.Index(trimmed, " "))
	}
	if n := smilesAtoms(smiles); n > l.MaxAtoms {
		return fmt.Sprintf("%d atoms, more than the limit of %d per molecule", n, l.MaxAtoms)
	}
	return ""
}

// notSMILES reports a rune no SMILES holds: a control character (NUL, a
// line break) or anything beyond ASCII, such as a byte order mark or bytes
// that are not UTF-8. RDKit stops reading at a NUL and would make a molecule
// of what precedes it.
func notSMILES(r rune) bool { return r < 0x20 || r >= 0x7f }

// smilesAtoms counts the atoms a SMILES string writes: each bracket atom,
// each atom of the organic subset (B, C, N, O, P, S, F, Cl, Br, I and the
// aromatic b, c, n, o, p, s) and each wildcard *. Hydrogens that RDKit adds
// implicitly are not written and not counted.
func smilesAtoms(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '[':
			n++
			for i < len(s) && s[i] != ']' {
				i++
			}
		case 'B', 'C':
			n++
			if i+1 < len(s) && (c == 'B' && s[i+1] == 'r' || c == 'C' && s[i+1] == 'l') {
				i++
			}
		case 'N', 'O', 'P', 'S', 'F', 'I', 'b', 'c', 'n', 'o', 'p', 's', '*':
			n++
		}
	}
	return n
}
