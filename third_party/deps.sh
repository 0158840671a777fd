#!/bin/sh
# Installs the Debian 12 packages micrograph's build, tests and demo need and
# this machine lacks. Versions are Debian 12's: libtorch-dev 1.13.1, librdkit-dev
# 2022.09, python3-torch 1.13.1.
#
#   sh third_party/deps.sh            install what is missing, then check again
#   sh third_party/deps.sh --dry-run  say what is there and what would be installed
#
# What is needed, and how its presence is decided (from facts, never from an
# exit status that something else could fake):
#   g++, make, binutils  the shims' build: the command is on PATH
#   libtorch-dev         unless third_party/libtorch.sh finds a libtorch (files)
#   librdkit-dev         unless third_party/rdkit.sh finds RDKit (files)
#   libboost-dev         RDKit's headers include Boost's: boost/version.hpp
#   libgloo-dev          with Debian's libtorch: c10d's Gloo process group
#                        includes Gloo's headers: gloo/algorithm.h
#   python3-torch        PyTorch (and numpy) for the interoperability tests
#   python3-pandas       reading featurised folders as OGB's loaders do (data's tests)
#   python3-sklearn      the reference ROC-AUC and NMI (trainer's tests)
#   go                   not installed here (Debian's is too old): the version of
#                        `go` on PATH is checked against go.mod
# A Python module counts only when third_party/pymodules.py, run in isolated
# mode (-I) from /, finds it as a real package (a file and a version) in one of
# the Pythons the tests try: $MICROGRAPH_PYTHON (space-separated) when set,
# else python3 and /usr/bin/python3 (internal/testenv uses the same list and
# the same check). Debian's python3-* packages serve /usr/bin/python3.
set -eu
cd "$(dirname "$0")/.."
root=$PWD

dry=
case "${1:-}" in
--dry-run) dry=1 ;;
"") ;;
*) echo "usage: deps.sh [--dry-run]" >&2; exit 2 ;;
esac

need="" # Debian packages to install
fatal="" # problems no package here solves
have() { if [ -n "$dry" ]; then echo "have $1"; fi; }
want() {
	case " $need " in *" $1 "*) ;; *) need="$need $1" ;; esac
	echo "need $1: $2"
}

# installed PACKAGE: dpkg knows PACKAGE as installed (not merely configured
# or removed with its files left).
installed() {
	[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

# pythons: the candidates, as absolute paths where they exist, each once.
pythons() {
	for p in ${MICROGRAPH_PYTHON:-python3 /usr/bin/python3}; do
		if abs=$(command -v "$p" 2>/dev/null); then
			case "$abs" in /*) ;; *) abs="$root/$abs" ;; esac
			echo "$abs"
		else
			echo "$p"
		fi
	done | awk '!seen[$0]++'
}

# probe_pythons MODULE...: runs pymodules.py once in each candidate; $probes
# holds its lines, each prefixed by the candidate and a tab: `MODULE VERSION
# FILE` for a module it has, `MODULE: why` for one it lacks.
tab=$(printf '\t')
probe_pythons() {
	probes=""
	for py in $(pythons); do
		out=$(cd / && "$py" -I "$root/third_party/pymodules.py" "$@" 2>&1) || true
		[ -n "$out" ] || out="python: $py does not run"
		probes="$probes$(echo "$out" | sed "s|^|$py$tab|")
"
	done
}

# python_with MODULE...: sets $found to the first candidate that has every
# module (with what pymodules.py says of them), or $why to why each failed.
python_with() {
	found=""
	why=""
	for py in $(pythons); do
		lines=$(printf '%s' "$probes" | sed -n "s|^$py$tab||p")
		ok=1
		facts=""
		for m in "$@"; do
			if fact=$(echo "$lines" | grep "^$m " | head -n 1) && [ -n "$fact" ]; then
				facts="$facts; $fact"
			else
				ok=""
				why="$why; $py: $(echo "$lines" | grep -e "^$m:" -e '^python:' | head -n 1)"
			fi
		done
		if [ -n "$ok" ]; then
			found="$py: ${facts#; }"
			return 0
		fi
	done
	why=${why#; }
	return 1
}

check_tools() {
	for t in "${CXX:-g++}:g++" make:make nm:binutils; do
		if p=$(command -v "${t%%:*}"); then have "${t%%:*}: $p"; else want "${t##*:}" "no ${t%%:*} on PATH"; fi
	done
	gomod=$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod)
	if gov=$(${GO:-go} env GOVERSION 2>/dev/null); then
		gov=${gov#go}
		if [ "$(printf '%s\n%s\n' "$gomod" "$gov" | sort -V | head -n 1)" = "$gomod" ]; then
			have "go $gov"
		else
			fatal="$fatal; go $gov is older than go.mod's $gomod: install Go from https://go.dev/dl"
		fi
	else
		fatal="$fatal; no Go on PATH: install Go $gomod or newer from https://go.dev/dl"
	fi
}

check_libraries() {
	mode=$(LIBTORCH="${LIBTORCH:-}" PYTHON="${PYTHON:-}" sh third_party/libtorch.sh | sed -n 's/^TORCH_MODE=//p')
	if [ "$mode" = none ]; then want libtorch-dev "third_party/libtorch.sh finds no libtorch"; else have "libtorch ($mode)"; fi
	# Debian's c10d headers need Gloo's (PyTorch wheels carry their own).
	if [ "$mode" = none ] || [ "$mode" = debian ]; then
		if [ -e /usr/include/gloo/algorithm.h ]; then have "Gloo headers"; else want libgloo-dev "no /usr/include/gloo/algorithm.h"; fi
	fi
	mode=$(RDKIT="${RDKIT:-}" sh third_party/rdkit.sh | sed -n 's/^RDKIT_MODE=//p')
	if [ "$mode" = none ]; then want librdkit-dev "third_party/rdkit.sh finds no RDKit"; else have "RDKit ($mode)"; fi
	if [ "$mode" != prefix ]; then
		if [ -e /usr/include/boost/version.hpp ]; then have "Boost headers"; else want libboost-dev "no /usr/include/boost/version.hpp"; fi
	fi
}

# check_python PACKAGE MODULE...: some candidate has the modules, else PACKAGE.
check_python() {
	pkg=$1
	shift
	if python_with "$@"; then
		have "$found"
	elif [ -n "$dry" ] || ! installed "$pkg"; then
		want "$pkg" "no Python imports $* ($why)"
	else
		fatal="$fatal; $pkg is installed, yet no Python of '$(pythons | tr '\n' ' ')' imports $* ($why)"
	fi
}

check_all() {
	check_tools
	check_libraries
	probe_pythons torch numpy pandas sklearn
	check_python python3-torch torch numpy
	check_python python3-pandas pandas
	check_python python3-sklearn sklearn numpy
}

check_all
if [ -n "$need" ] && [ -z "$dry" ]; then
	echo "installing:$need"
	if [ "$(id -u)" != 0 ]; then sudo=sudo; else sudo=; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $need
	# What was installed must now pass the same checks.
	need=""
	check_all >/dev/null
	if [ -n "$need" ]; then fatal="$fatal; still missing after apt-get install:$need"; fi
fi
if [ -n "$fatal" ]; then
	echo "${fatal#; }" | sed 's/; /\n/g; s/^/deps.sh: /' >&2
	exit 1
fi
