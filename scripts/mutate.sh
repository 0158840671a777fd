#!/usr/bin/env bash
# mutate.sh: a small mutation check of the test suite (not part of `make test`).
#
#   scripts/mutate.sh [-t REV] [-s SKIP] [-o FILE] [-l LIST] [ID ...]
#
# Each mutation of scripts/mutations.tsv (or only those named) is a one-line
# change of a non-test file that stands for a plausible mis-wiring. The tree
# (tracked and untracked, not ignored, files) is copied once to a temporary
# folder, with a build/ folder of its own whose lib/ links to the tree's
# shims; each mutation is applied there, the packages the mutation names are
# tested with `go test -count=1 -v` under `nice -n 15` (MUTATE_NICE), and the file is
# restored. It prints one line per mutation:
#
#   ID  caught by TestA, TestB     the tests that failed
#   ID  escaped                    every test passed: the suite misses the bug
#                                  (tests that skipped here are named)
#   ID  not judged here: ...       the mutation needs what this machine lacks
#                                  (its `needs` column), so it is not run,
#                                  or a package's tests ran past the 60-minute
#                                  timeout (a machine too busy)
#   ID  not applied: ...           the original line was not found once
#   ID  build failed               the mutation does not compile
#
# A mutation of a native shim's source (torch/shim/, data/rdkit/shim/) is
# built before its tests run: a private copy of the tree's build/ folder is
# made for it, `make shim` (or `make chem`) recompiles there what the
# mutation changed, and the copy's build/lib/ stands in for the tree's while
# its packages are tested (the test binaries load the shims at run time from
# build/lib/); a mutation that does not compile reads "build failed".
#
# First, the no-op mutation: the packages of every selected mutation are
# tested on the unchanged copy. It must come back "escaped"; if any test
# fails there, nothing could be judged (every mutation would read as caught),
# so the script names the failing tests and stops with status 1.
#
# The list's optional sixth column says what a mutation needs to be judged,
# comma-separated:
#   bf16    bfloat16 products on the CPU (avx512_bf16 or amx_bf16, and
#           MICROGRAPH_NO_BF16 not 1), without which the tests that would
#           catch it skip (torch.CheckBFloat16 decides the same)
#   shared  MICROGRAPH_SHARED set: the tests that catch it read the real data
#
# -t REV   use the *_test.go files of commit REV instead of the tree's (the
#          non-test code stays the tree's): how many escaped before new tests
# -s SKIP  a `go test -skip` pattern, to leave out slow tests that cannot
#          catch any mutation of the list
# -o FILE  also write the table to FILE
# -l LIST  read the mutations from LIST instead of scripts/mutations.tsv
#
# MUTATE_NICE is the niceness the tests and builds run at (default 15: the
# check yields to other work; 0 where that work would starve it).
#
# MICROGRAPH_SHARED is passed through as set: unset, the checks that need the
# real datasets skip, as on a machine without them.
set -euo pipefail

root=$(git rev-parse --show-toplevel)
list=$root/scripts/mutations.tsv
tests_rev="" skip="" out=""
niceness=${MUTATE_NICE:-15}
while getopts t:s:o:l: opt; do
	case $opt in
	t) tests_rev=$OPTARG ;;
	s) skip=$OPTARG ;;
	o) out=$OPTARG ;;
	l) list=$(realpath "$OPTARG") ;;
	*) sed -n '2,44p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))

# lacks NEED: why this machine cannot judge a mutation that needs NEED
# (nothing when it can).
lacks() {
	case $1 in
	bf16)
		if [ "${MICROGRAPH_NO_BF16:-}" = 1 ]; then
			echo "needs bf16 products, and MICROGRAPH_NO_BF16=1 takes this CPU to lack them"
		elif ! grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null; then
			echo "needs bf16 products: this CPU has neither avx512_bf16 nor amx_bf16, and the tests that would catch it skip"
		fi ;;
	shared)
		if [ -z "${MICROGRAPH_SHARED:-}" ]; then
			echo "needs the real datasets: MICROGRAPH_SHARED is unset, and the tests that would catch it skip"
		fi ;;
	*) echo "needs '$1', which this script does not know" ;;
	esac
}

work=$(mktemp -d "${TMPDIR:-/tmp}/micrograph-mutate.XXXXXX")
trap 'rm -rf "$work"' EXIT
tree=$work/tree
mkdir -p "$tree"
(cd "$root" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$tree"
# build/ is a folder, as in the tree (a link there would be a file to tests
# that walk the tree), and only its shims are shared.
rm -rf "$tree/build"
mkdir -p "$tree/build"
ln -s "$root/build/lib" "$tree/build/lib"

# shim_target FILE: the make target that builds FILE's native shim, or
# nothing for a Go file.
shim_target() {
	case $1 in
	torch/shim/*) echo shim ;;
	data/rdkit/shim/*) echo chem ;;
	esac
}

# build_shim ID FILE: rebuild, into a private copy of the tree's build/
# folder ($work/build-ID), the shim FILE belongs to, and make the copy's
# lib/ the tree's build/lib; its status is make's. unbuild_shim ID undoes it.
build_shim() {
	local priv=$work/build-$1
	rm -rf "$priv"
	mkdir -p "$priv"
	# Objects keep their times, newer than the sources: make recompiles
	# only what the mutation touched.
	(cd "$root/build" && cp -a lib shim testing chem "$priv"/ 2>/dev/null || true)
	ln -sfn "$priv/lib" "$tree/build/lib"
	(cd "$tree" && nice -n "$niceness" make --no-print-directory BUILD="$priv" JOBS=1 "$(shim_target "$2")") >"$work/$1.build.log" 2>&1
}
unbuild_shim() {
	ln -sfn "$root/build/lib" "$tree/build/lib"
	rm -rf "$work/build-$1"
}
if [ -n "$tests_rev" ]; then
	find "$tree" -name '*_test.go' -delete
	git -C "$root" ls-tree -r -z --name-only "$tests_rev" | grep -z '_test\.go$' |
		xargs -0 git -C "$root" archive "$tests_rev" -- | tar -xf - -C "$tree"
fi

# apply FILE ORIGINAL REPLACEMENT: replace the one line holding ORIGINAL.
apply() {
	python3 - "$@" <<'PY'
import sys
path, orig, repl = sys.argv[1:4]
lines = open(path).read().split("\n")
hits = [i for i, l in enumerate(lines) if orig in l]
if len(hits) != 1:
    sys.exit("found on %d lines" % len(hits))
lines[hits[0]] = lines[hits[0]].replace(orig, repl)
open(path, "w").write("\n".join(lines))
PY
}

# selected: the list's mutations to run, as its lines.
selected=$work/selected
: >"$selected"
while IFS= read -r line; do
	case $line in '#'* | '') continue ;; esac
	id=${line%%$'\t'*}
	if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qxF "$id"; then
		continue
	fi
	printf '%s\n' "$line" >>"$selected"
done <"$list"

# gotest LOG PKG...: run the packages' tests in the copy; its status.
gotest() {
	local log=$1
	shift
	set +e
	# shellcheck disable=SC2068 # the packages are a list
	(cd "$tree" && nice -n "$niceness" go test -count=1 -timeout 60m -v ${skip:+-skip "$skip"} $@) >"$log" 2>&1
	local rc=$?
	set -e
	return $rc
}

# named PATTERN LOG: the tests LOG reports under PATTERN (FAIL, SKIP), joined.
named() {
	sed -n "s/^--- $1: \([^ ]*\).*/\1/p" "$2" | sort -u | paste -sd, - | sed 's/,/, /g'
}

table=$work/table
: >"$table"

# The no-op mutation: the unchanged copy must pass every selected package.
pkgs_all=$(cut -f5 "$selected" | tr ' ' '\n' | sed '/^$/d' | sort -u | paste -sd' ' -)
if [ -n "$pkgs_all" ]; then
	# shellcheck disable=SC2086 # a list
	rc=0
	gotest "$work/no-op.log" $pkgs_all || rc=$?
	if [ $rc -eq 0 ]; then
		printf 'no-op\tescaped (as it must: the unchanged tree passes %s)\n' "$pkgs_all" | tee -a "$table"
	else
		failed=$(named FAIL "$work/no-op.log")
		printf 'no-op\tcaught by %s: the unchanged tree fails, so no mutation can be judged\n' "${failed:-no named test (exit $rc)}" | tee -a "$table"
		grep -m20 -E '^(---|panic|FAIL|\s+\S+_test\.go:[0-9]+:)' "$work/no-op.log" >&2 || true
		[ -z "$out" ] || cp "$table" "$out"
		exit 1
	fi
fi

escaped=0 total=0 unjudged=0 broken=0
while IFS=$'\t' read -r id file orig repl pkgs needs; do
	total=$((total + 1))
	why=""
	for need in ${needs//,/ }; do
		why=$(lacks "$need")
		[ -z "$why" ] || break
	done
	if [ -n "$why" ]; then
		unjudged=$((unjudged + 1))
		printf '%s\tnot judged here: %s\n' "$id" "$why" | tee -a "$table"
		continue
	fi
	cp -p "$tree/$file" "$work/saved"
	if ! why=$(apply "$tree/$file" "$orig" "$repl" 2>&1); then
		printf '%s\tnot applied: %s\n' "$id" "$why" | tee -a "$table"
		broken=$((broken + 1))
		continue
	fi
	log=$work/$id.log
	rc=0
	if [ -n "$(shim_target "$file")" ] && ! build_shim "$id" "$file"; then
		cp -p "$work/saved" "$tree/$file"
		unbuild_shim "$id"
		printf '%s\tbuild failed (the shim: %s)\n' "$id" "$(grep -m1 -E 'error' "$work/$id.build.log" || tail -1 "$work/$id.build.log")" | tee -a "$table"
		broken=$((broken + 1))
		continue
	fi
	# shellcheck disable=SC2086 # pkgs is a list
	gotest "$log" $pkgs || rc=$?
	cp -p "$work/saved" "$tree/$file"
	[ -z "$(shim_target "$file")" ] || unbuild_shim "$id"
	failed=$(named FAIL "$log")
	if [ $rc -eq 0 ]; then
		result=escaped
		skipped=$(named SKIP "$log")
		[ -z "$skipped" ] || result="escaped (skipped here: $skipped)"
		escaped=$((escaped + 1))
	elif grep -q '^panic: test timed out' "$log"; then
		# A package slower than the timeout (a machine too busy) says
		# nothing of the mutation.
		result="not judged here: a package's tests timed out ($(grep -m1 -A1 '^panic: test timed out' "$log" | tail -1 | tr -s ' \t' ' '))"
		unjudged=$((unjudged + 1))
	elif grep -q '\[build failed\]\|\[setup failed\]' "$log"; then
		result="build failed"
		broken=$((broken + 1))
	elif [ -n "$failed" ]; then
		result="caught by $failed"
	else
		result="caught (exit $rc: $(grep -m1 -E '^(panic|FAIL)' "$log" || true))"
	fi
	printf '%s\t%s\n' "$id" "$result" | tee -a "$table"
done <"$selected"
summary="$escaped of $total mutations escaped"
[ $unjudged -eq 0 ] || summary="$summary, $unjudged not judged on this machine"
[ $broken -eq 0 ] || summary="$summary, $broken not applied or not built (fix their lines)"
printf '%s\n' "$summary" | tee -a "$table"
if [ -n "$out" ]; then
	cp "$table" "$out"
fi
