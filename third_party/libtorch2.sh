#!/bin/sh
# Fetches the headers of a libtorch 2.x, installing nothing, so that any
# machine can compile the shim against today's PyTorch API (`make
# torch2-check`; Debian 12's own libtorch is 1.13). They are Debian 13's
# libtorch-dev and libtorch-cuda-dev 2.6, whose API is what the shim uses of
# PyTorch 2.3 through 2.11 (docs/install.md#libtorch-versions): apt-get
# download with a private package state (Debian 13's lists, kept in
# $MG_TORCH2_DIR/apt; the machine's apt is not touched), then dpkg -x into
# $MG_TORCH2_DIR (default .cache/libtorch2, git-ignored). About 20 MB to
# download, once; delete the folder to fetch again. Prints, one per line:
#   TORCH2_VERSION  the packages' libtorch version (from torch/version.h)
#   TORCH2_CPU      the CPU package's include folder
#   TORCH2_CUDA     the CUDA package's include folder (c10/cuda, ATen/cuda and
#                   the generated cuda_cmake_macros.h a CPU package lacks)
set -eu
cd "$(dirname "$0")/.."

dir=${MG_TORCH2_DIR:-$PWD/.cache/libtorch2}
suite=trixie
packages="libtorch-dev libtorch-cuda-dev"

report() {
	version=$(sed -n 's/^#define TORCH_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
		"$dir/libtorch-dev/usr/include/torch/csrc/api/include/torch/version.h" | paste -sd.)
	echo "TORCH2_VERSION=$version"
	echo "TORCH2_CPU=$dir/libtorch-dev/usr/include"
	echo "TORCH2_CUDA=$dir/libtorch-cuda-dev/usr/include"
}

complete() {
	for p in $packages; do [ -e "$dir/$p/usr/include/torch/csrc/api/include/torch/version.h" ] || return 1; done
}
if complete; then report; exit 0; fi

# Everything is made in a scratch folder and moved into place whole, so an
# interrupted fetch is never taken for a complete one.
mkdir -p "$dir"
scratch=$(mktemp -d "$dir/.fetch-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
apt=$dir/apt
mkdir -p "$apt/lists/partial"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
echo "deb [signed-by=$keyring] ${DEBIAN_MIRROR:-http://deb.debian.org/debian} $suite main contrib" >"$apt/sources.list"
# Dir::State::status=/dev/null: resolve as on an empty machine, so that
# nothing installed here (Debian 12's libtorch) enters the choice.
opts="-o Dir::Etc::sourcelist=$apt/sources.list -o Dir::Etc::sourceparts=-
 -o Dir::State::Lists=$apt/lists -o Dir::Cache::pkgcache=$apt/pkgcache.bin
 -o Dir::Cache::srcpkgcache=$apt/srcpkgcache.bin -o Dir::State::status=/dev/null
 -o APT::Sandbox::User=root -o Debug::NoLocking=1"
if ! ls "$apt/lists/"*_"$suite"_contrib_binary-amd64_Packages* >/dev/null 2>&1; then
	echo "libtorch2.sh: fetching Debian 13's package lists into $apt" >&2
	# shellcheck disable=SC2086 # $opts is a list of options without spaces in them.
	apt-get $opts update -qq >&2
fi
# shellcheck disable=SC2086
(cd "$scratch" && apt-get $opts download -qq $packages) >&2
for p in $packages; do
	dpkg -x "$scratch/${p}_"*.deb "$scratch/$p"
	rm -rf "${dir:?}/$p"
	mv "$scratch/$p" "$dir/$p"
done
complete || { echo "libtorch2.sh: the packages hold no torch/version.h" >&2; exit 1; }
report
