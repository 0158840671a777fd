#!/bin/sh
# Installs what `make cuda-check` needs and this machine lacks: Debian 12's
# CUDA toolkit 11.8 (nvcc and the CUDA headers, in Debian's non-free
# component), g++-11 (nvcc 11.8 refuses g++ 12, Debian 12's default) and,
# when Debian has it, NCCL's header (so that the shim's NCCL branch is
# compiled too). About 860 MB to download, 3 GB installed. Run only when asked
# (`make cuda-check` runs it); `make deps` never does.
#
#   sh third_party/cuda-toolkit.sh            install what is missing
#   sh third_party/cuda-toolkit.sh --dry-run  say what is there and what would be installed
#
# The machine's apt sources (/etc/apt/sources.list*) are not touched and may
# lack non-free: apt reads a private sources list and keeps the package lists
# it downloads in a private state folder, $MG_APT_DIR (default
# /var/cache/micrograph-apt). The packages themselves install into the system
# as usual (dpkg), so `apt-get remove` takes them away again.
set -eu

dry=
case "${1:-}" in
--dry-run) dry=1 ;;
"") ;;
*) echo "usage: cuda-toolkit.sh [--dry-run]" >&2; exit 2 ;;
esac

installed() {
	[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

need=""
for p in nvidia-cuda-toolkit nvidia-cuda-dev g++-11; do
	if installed "$p"; then
		[ -z "$dry" ] || echo "have $p"
	else
		need="$need $p"
	fi
done
# NCCL's header, if the machine has none yet: the package is only looked up
# below (it is optional; Debian 12 may not carry it).
nccl=
if [ ! -e /usr/include/nccl.h ]; then nccl=1; fi
if [ -z "$need" ] && [ -z "$nccl" ]; then exit 0; fi

# The private sources: the machine's own suites (so that versions agree with
# what is installed) with contrib and non-free added.
state=${MG_APT_DIR:-/var/cache/micrograph-apt}
mkdir -p "$state/lists/partial"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
mirror=http://deb.debian.org/debian
cat >"$state/sources.list" <<EOF
deb [signed-by=$keyring] $mirror bookworm main contrib non-free
deb [signed-by=$keyring] $mirror bookworm-updates main contrib non-free
deb [signed-by=$keyring] http://deb.debian.org/debian-security bookworm-security main contrib non-free
EOF
# apt's binary caches of the lists go there too, so the system's own are left alone.
opts="-o Dir::Etc::sourcelist=$state/sources.list -o Dir::Etc::sourceparts=-
 -o Dir::State::Lists=$state/lists -o Dir::Cache::pkgcache=$state/pkgcache.bin
 -o Dir::Cache::srcpkgcache=$state/srcpkgcache.bin"
# shellcheck disable=SC2086 # $opts is a list of options without spaces in them.
apt() { apt-get $opts "$@"; }

# The lists are fetched once; delete $state/lists to refresh them.
if ! ls "$state/lists/"*_non-free_binary-amd64_Packages* >/dev/null 2>&1; then
	if [ -n "$dry" ]; then
		echo "would fetch the package lists of Debian 12 main, contrib and non-free into $state/lists"
	else
		apt update -q
	fi
fi
if [ -n "$nccl" ] && ls "$state/lists/"*_Packages* >/dev/null 2>&1; then
	# shellcheck disable=SC2086
	if apt-cache $opts show libnccl-dev >/dev/null 2>&1; then
		need="$need libnccl-dev"
	else
		echo "note: Debian has no libnccl-dev here; the shim's NCCL branch is not compiled" >&2
	fi
fi
[ -n "$need" ] || exit 0
if [ -n "$dry" ]; then
	echo "would install:$need"
	exit 0
fi
# shellcheck disable=SC2086 # $need is a list of package names.
DEBIAN_FRONTEND=noninteractive apt install -y -q --no-install-recommends $need
