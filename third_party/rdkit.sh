#!/bin/sh
# Finds RDKit's C++ library and prints make variable assignments, one per line:
#   RDKIT_MODE      prefix | debian | none
#   RDKIT_INCLUDES  -I flags for the chem shim (RDKit's headers also need Boost's)
#   RDKIT_LIBDIR    directory holding libRDKit*.so
#   RDKIT_LIBS      the RDKit libraries the shim links
# Order: $RDKIT (an installation prefix with include/rdkit and lib, e.g. a conda
# environment), then Debian's librdkit-dev (installed by `make deps`). Pinned
# version: Debian 12 librdkit-dev 2022.09.
set -eu

libs="-lRDKitMolDraw2D -lRDKitDepictor -lRDKitChemTransforms -lRDKitSmilesParse -lRDKitGraphMol -lRDKitRDGeometryLib -lRDKitRDGeneral"

emit() {
	echo "RDKIT_MODE=$1"
	echo "RDKIT_INCLUDES=-isystem $2"
	echo "RDKIT_LIBDIR=$3"
	echo "RDKIT_LIBS=$libs"
	exit 0
}

if [ -n "${RDKIT:-}" ]; then
	[ -e "$RDKIT/include/rdkit/GraphMol/RDKitBase.h" ] || { echo "RDKIT=$RDKIT has no include/rdkit/GraphMol/RDKitBase.h" >&2; exit 1; }
	emit prefix "$RDKIT/include/rdkit" "$RDKIT/lib"
fi

multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
if [ -e /usr/include/rdkit/GraphMol/RDKitBase.h ]; then
	for dir in /usr/lib "/usr/lib/$multiarch"; do
		if [ -e "$dir/libRDKitGraphMol.so" ]; then emit debian /usr/include/rdkit "$dir"; fi
	done
fi

echo "RDKIT_MODE=none"
