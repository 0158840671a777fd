#!/bin/bash
# Prepares .gpu/, the folder carried to a GPU machine for scripts/gpu-check.sh
# (`make gpu-check` runs this). The GPU machine has CUDA PyTorch and nvcc but
# no Go, no RDKit and no network, so everything that needs them is made here:
#
#   .gpu/bin.tar.gz       bin/micrograph and the test binary (go test -c) of every
#                         package with a CUDA path, stripped; they link libmgtorch.so
#                         by name, and the check rebuilds it there
#   .gpu/chem.rec         RDKit's featurisations of the synthetic datasets' molecules
#                         (seeds 1-16, 2,000 each) and of the shipped model's pinned
#                         molecules (model/testdata/pinned-smiles.txt), which the
#                         tests featurise there (MICROGRAPH_CHEM_RECORDING)
#   .gpu/shared/          what the check needs of the shared folder, in its layout:
#                         data/ogb/ogbg_molhiv (bench, released, resume; the tests),
#                         data/ogb/ogbg_molbace (the tests), bench/ref_micrograph.py
#   .gpu/manifest.txt     the commit, when and where it was made, the sizes
#
# What travels (the tree, untracked files git does not ignore, and .gpu) must
# stay under 64 MiB; this prints the total and fails above 60 MiB.
# Time: about a minute (mostly linking the test binaries; the recording takes
# about 10 s of RDKit).
#
#   scripts/gpu-prepare.sh [--out DIR] [--shared DIR] [--packages "P ..."] [--seeds N] [--molecules M]
#
# --shared defaults to $MICROGRAPH_SHARED, else ../shared; it must hold
# data/ogb and bench/, unless it is "none". The CPU dry run
# (scripts/gpu-check-dry-run.sh) prepares a small folder: fewer packages, a
# smaller recording, and no shared files if none are at hand.
set -euo pipefail
cd "$(dirname "$0")/.."

# The packages whose tests have a CUDA path (torch/testdevice).
packages="torch torch/nn torch/optim ops model data/feed trainer/pretrain trainer/evaluate"
out=.gpu shared=${MICROGRAPH_SHARED:-../shared} seeds=16 molecules=2000
while (($#)); do
	case $1 in
	--out) out=$2 && shift ;;
	--shared) shared=$2 && shift ;;
	--packages) packages=$2 && shift ;;
	--seeds) seeds=$2 && shift ;;
	--molecules) molecules=$2 && shift ;;
	*) echo "usage: gpu-prepare.sh [--out DIR] [--shared DIR] [--packages \"P ...\"] [--seeds N] [--molecules M]" >&2 && exit 2 ;;
	esac
	shift
done
GO=${GO:-go}
if [[ $shared != none ]] && [[ ! -d $shared/data/ogb || ! -e $shared/bench/ref_micrograph.py ]]; then
	echo "gpu-prepare: $shared has no data/ogb or bench/ref_micrograph.py: set MICROGRAPH_SHARED to the shared folder" >&2
	exit 1
fi

rm -rf "$out"
mkdir -p "$out/bin"

# Binaries, stripped of their symbol tables (a panic's stack still names
# files and lines).
$GO build -ldflags='-s -w' -o "$out/bin/micrograph" ./cmd/micrograph
for p in $packages; do
	$GO test -c -ldflags='-s -w' -o "$out/bin/${p//\//-}.test" "./$p"
done
tar -C "$out/bin" -czf "$out/bin.tar.gz" .
rm -rf "$out/bin"

$GO run ./cmd/synth-recording -out "$out/chem.rec" -seeds "$seeds" -molecules "$molecules" \
	-smiles model/testdata/pinned-smiles.txt

if [[ $shared != none ]]; then
	mkdir -p "$out/shared/data/ogb" "$out/shared/bench"
	cp -r "$shared/data/ogb/ogbg_molhiv" "$shared/data/ogb/ogbg_molbace" "$out/shared/data/ogb/"
	cp "$shared/bench/ref_micrograph.py" "$out/shared/bench/"
fi

tree=$(git ls-files --cached --others --exclude-standard -z | xargs -0 du -cb 2>/dev/null | tail -n 1 | cut -f 1)
carried=$(du -sb "$out" | cut -f 1)
total=$((tree + carried))
{
	echo "commit $(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD || echo ' with uncommitted changes')"
	echo "made $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n) with $($GO version | cut -d' ' -f3)"
	echo "packages $packages"
	echo "recording seeds 1-$seeds, $molecules molecules each"
	echo "sizes: tree $((tree >> 20)) MiB, $out $((carried >> 20)) MiB, together $((total >> 20)) of 64 MiB"
	(cd "$out" && find . -type f -printf '%8s  %p\n' | sort -k 2 | grep -v '/ogbg_')
} >"$out/manifest.txt"
cat "$out/manifest.txt"
if ((total > 60 << 20)); then
	echo "gpu-prepare: $((total >> 20)) MiB would travel, over the 60 MiB this allows (64 at most)" >&2
	exit 1
fi
