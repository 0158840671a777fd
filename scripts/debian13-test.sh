#!/usr/bin/env bash
# `make debian13-test`: the whole of `make test` against a libtorch 2.x, on a
# machine that has Debian 12's libtorch 1.13: in a Debian 13 root made with
# debootstrap, where `make test` installs Debian 13's packages (libtorch-dev
# 2.6, python3-torch 2.6 as the PyTorch the tests compare with, RDKit
# 2024.09) through third_party/deps.sh, as on any fresh machine, builds and
# runs every test.
#
#   1. root     debootstrap Debian 13 (minbase) once into .cache/debian13/root
#               (git-ignored; delete it to start over), with the tools a fresh
#               machine has (g++, make, git, ca-certificates)
#   2. tree     this checkout (tracked and untracked files git does not ignore,
#               and .git, for the GPU check's dry run) copied to /src in it
#   3. test     chroot: MICROGRAPH_SHARED=/shared make test, with the shared
#               folder mounted read-only at /shared, this machine's Go at
#               /usr/local/go (read-only) and its module cache at /gomodcache (GOPROXY=off:
#               the modules go.sum names are already here)
#
# Needs root; installs Debian's debootstrap where it is missing. Otherwise the
# machine's apt and files are not touched; /proc, /sys and /dev are mounted in
# the root for the test and unmounted on exit. Time: about 10 minutes the
# first time (the root, then about 1 GB of packages), then the build and the
# tests, as `make test`.
#
#   scripts/debian13-test.sh [--shared DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
step() { printf '\n== [%ss] %s\n' "$((SECONDS - start))" "$*" >&2; }

shared=${MICROGRAPH_SHARED:-../shared}
while (($#)); do
	case $1 in
	--shared) shared=$2 && shift ;;
	*) echo "usage: debian13-test.sh [--shared DIR]" >&2 && exit 2 ;;
	esac
	shift
done
if ! command -v debootstrap >/dev/null; then
	step "install debootstrap (Debian's package)"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
fi
[[ -d $shared/data ]] || { echo "debian13-test: $shared has no data/: set MICROGRAPH_SHARED or --shared" >&2; exit 1; }
shared=$(cd "$shared" && pwd)
goroot=$(go env GOROOT)
gomodcache=$(go env GOMODCACHE)

cache=$PWD/.cache/debian13
root=$cache/root
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# 1. The root, made once: debootstrap writes into a scratch folder that is
# renamed when whole, so a half-made root is never taken for one.
if [[ ! -e $root/etc/debian_version ]]; then
	step "debootstrap Debian 13 → $root"
	rm -rf "$cache/root.part"
	mkdir -p "$cache"
	debootstrap --variant=minbase --include=g++,make,git,ca-certificates,procps trixie "$cache/root.part" "$mirror"
	mv "$cache/root.part" "$root"
fi
grep -q '^13' "$root/etc/debian_version" || { echo "debian13-test: $root is not Debian 13" >&2; exit 1; }

# 2. The tree, anew each time (the build and the test outputs go with it).
step "copy this checkout to $root/src"
rm -rf "$root/src"
mkdir -p "$root/src"
{ git ls-files --cached --others --exclude-standard -z; find .git -type f -print0; } |
	tar --null -T - -cf - | tar -C "$root/src" -xf -

# 3. The test, with what it reads from this machine mounted in.
mounts=()
mnt() { # mnt SOURCE TARGET [OPTIONS]: bind SOURCE at TARGET in the root
	mkdir -p "$root$2"
	mount --bind "$1" "$root$2"
	mounts=("$root$2" "${mounts[@]}")
	if [[ ${3:-} == ro ]]; then mount -o remount,bind,ro "$root$2"; fi
}
# On the way out (the test's end, a failure, SIGINT or SIGTERM), every process
# still running in the root is stopped, then the mounts are undone.
cleanup() {
	local p
	for p in /proc/[0-9]*; do
		[[ $(readlink "$p/root" 2>/dev/null) == "$root" ]] && kill -KILL "${p#/proc/}" 2>/dev/null
	done
	for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mount -t proc proc "$root/proc" && mounts=("$root/proc" "${mounts[@]}")
mount -t sysfs sysfs "$root/sys" && mounts=("$root/sys" "${mounts[@]}")
mnt /dev /dev
mnt /dev/pts /dev/pts
mnt /dev/shm /dev/shm
mnt "$shared" /shared ro
mnt "$goroot" /usr/local/go ro
mnt "$gomodcache" /gomodcache
cp /etc/resolv.conf "$root/etc/resolv.conf"
# Where HTTPS goes through a proxy that re-signs it, the root trusts that
# proxy's CA as this machine does.
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
	cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
	chroot "$root" update-ca-certificates >/dev/null
fi

step "make test in Debian 13 (chroot $root)"
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
	PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	GOMODCACHE=/gomodcache GOPROXY=off GOFLAGS=-buildvcs=false MICROGRAPH_SHARED=/shared \
	bash -euo pipefail -c '
		cd /src
		echo "Debian $(cat /etc/debian_version), $(g++ --version | head -n 1)"
		make test
		dpkg-query -W libtorch-dev python3-torch librdkit-dev
	'
step "debian13-test passed"
