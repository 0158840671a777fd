/* The C API of micrograph's RDKit shim (libmgchem.so).
 *
 * The Go package data/rdkit loads this library with dlopen at first use, so a
 * micrograph binary runs without RDKit everywhere except where it featurises or
 * draws molecules. No C++ type crosses this header.
 *
 * Conventions:
 *  - A function that can fail returns mgchem_error: NULL on success, otherwise
 *    a message allocated with malloc that the caller releases with mgchem_free.
 *    The message belongs to that call; there is no global "last error". C++
 *    exceptions never cross this boundary.
 *  - Results come back through out pointers and are released by the caller:
 *    graphs with mgchem_graph_free, strings with mgchem_free.
 *  - SMILES arrive as (pointer, length) and need no terminating NUL.
 *  - Every function may be called from several threads at once.
 */
#ifndef MICROGRAPH_CHEM_SHIM_H
#define MICROGRAPH_CHEM_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a signature or struct below changes; the Go side refuses a
 * library built from another version of this header. */
#define MGCHEM_ABI_VERSION 3

#define MGCHEM_ATOM_FEATURES 9
#define MGCHEM_BOND_FEATURES 3

typedef char *mgchem_error;

/* A molecule as OGB's smiles2graph sees it (docs/method.md section 8). */
typedef struct {
	int32_t num_atoms;
	int32_t num_bonds;
	uint8_t *atom_features; /* num_atoms x 9, indices into OGB's feature lists */
	int32_t *bond_atoms;    /* num_bonds x 2: begin and end atom, RDKit bond order */
	uint8_t *bond_features; /* num_bonds x 3 */
	char *scaffold;         /* Bemis-Murcko scaffold SMILES when asked for, else NULL */
} mgchem_graph;

int mgchem_abi_version(void);

/* The RDKit version the library was built against, e.g. "2022.09.3". Static. */
const char *mgchem_rdkit_version(void);

void mgchem_free(void *p);

/* Parses the SMILES (RDKit defaults: sanitised, hydrogens removed) and
 * featurises it; with_scaffold != 0 also computes the Murcko scaffold. An
 * invalid SMILES is an error whose message is RDKit's reason. */
mgchem_error mgchem_mol_graph(const char *smiles, size_t len, int with_scaffold,
                              mgchem_graph **out);
void mgchem_graph_free(mgchem_graph *g);

/* The Bemis-Murcko scaffold as isomeric canonical SMILES ("" for an acyclic
 * molecule), as RDKit's MurckoScaffoldSmiles(includeChirality=True). */
mgchem_error mgchem_murcko_scaffold(const char *smiles, size_t len, char **out);

/* Draws the molecule as an SVG document of width x height pixels, highlighting
 * the given atoms (RDKit atom indices) and the bonds between two of them. With
 * colours (3 floats in [0, 1] per highlighted atom: red, green, blue) each atom
 * takes its own colour and a bond the colour its two atoms share (a bond
 * between atoms of different colours is not highlighted); with NULL, RDKit's
 * default highlight colour. */
mgchem_error mgchem_depict_svg(const char *smiles, size_t len, const int32_t *highlight,
                               const float *colours, int32_t num_highlight, int32_t width,
                               int32_t height, char **out);

/* The canonical SMILES of fragments of the molecule, each made of some of its
 * atoms (RDKit atom indices) and the bonds between them, as RDKit's
 * MolFragmentToSmiles with its defaults (aromaticity kept, isomeric), from one
 * parse: fragment i is atoms[offsets[i] .. offsets[i+1]), offsets holding
 * num_fragments + 1 entries. *out is the fragments' SMILES, each followed by
 * a newline. */
mgchem_error mgchem_fragment_smiles(const char *smiles, size_t len, const int32_t *atoms,
                                    const int32_t *offsets, int32_t num_fragments, char **out);

#ifdef __cplusplus
}
#endif

#endif
