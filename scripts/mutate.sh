#!/usr/bin/env bash
# mutate.sh: a small mutation check of the test suite (not part of `make test`).
#
#   scripts/mutate.sh [-t REV] [-s SKIP] [-o FILE] [ID ...]
#
# Each mutation of scripts/mutations.tsv (or only those named) is a one-line
# change of a non-test file that stands for a plausible mis-wiring. The tree
# (tracked and untracked, not ignored, files; build/ linked, not copied) is
# copied once to a temporary folder; each mutation is applied there, the
# packages the mutation names are tested with `go test -count=1` under
# `nice -n 15`, and the file is restored. It prints one line per mutation:
#
#   ID  caught by TestA, TestB     the tests that failed
#   ID  escaped                    every test passed: the suite misses the bug
#   ID  not applied: ...           the original line was not found once
#   ID  build failed               the mutation does not compile
#
# -t REV   use the *_test.go files of commit REV instead of the tree's (the
#          non-test code stays the tree's): how many escaped before new tests
# -s SKIP  a `go test -skip` pattern, to leave out slow tests that cannot
#          catch any mutation of the list
# -o FILE  also write the table to FILE
#
# MICROGRAPH_SHARED is passed through as set: unset, the checks that need the
# real datasets skip, as on a machine without them.
set -euo pipefail

root=$(git rev-parse --show-toplevel)
list=$root/scripts/mutations.tsv
tests_rev="" skip="" out=""
while getopts t:s:o: opt; do
	case $opt in
	t) tests_rev=$OPTARG ;;
	s) skip=$OPTARG ;;
	o) out=$OPTARG ;;
	*) sed -n '2,26p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))

work=$(mktemp -d "${TMPDIR:-/tmp}/micrograph-mutate.XXXXXX")
trap 'rm -rf "$work"' EXIT
tree=$work/tree
mkdir -p "$tree"
(cd "$root" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$tree"
rm -rf "$tree/build"
ln -s "$root/build" "$tree/build"
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

table=$work/table
: >"$table"
escaped=0 total=0
while IFS=$'\t' read -r id file orig repl pkgs; do
	case $id in '#'* | '') continue ;; esac
	if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qxF "$id"; then
		continue
	fi
	total=$((total + 1))
	cp "$tree/$file" "$work/saved"
	if ! why=$(apply "$tree/$file" "$orig" "$repl" 2>&1); then
		printf '%s\tnot applied: %s\n' "$id" "$why" | tee -a "$table"
		continue
	fi
	log=$work/$id.log
	set +e
	# shellcheck disable=SC2086 # pkgs is a list
	(cd "$tree" && nice -n 15 go test -count=1 ${skip:+-skip "$skip"} $pkgs) >"$log" 2>&1
	rc=$?
	set -e
	cp "$work/saved" "$tree/$file"
	failed=$(sed -n 's/^--- FAIL: \([^ ]*\).*/\1/p' "$log" | sort -u | paste -sd, - | sed 's/,/, /g')
	if [ $rc -eq 0 ]; then
		result=escaped
		escaped=$((escaped + 1))
	elif grep -q '\[build failed\]\|\[setup failed\]' "$log"; then
		result="build failed"
	elif [ -n "$failed" ]; then
		result="caught by $failed"
	else
		result="caught (exit $rc: $(grep -m1 -E '^(panic|FAIL)' "$log" || true))"
	fi
	printf '%s\t%s\n' "$id" "$result" | tee -a "$table"
done <"$list"
printf '%d of %d mutations escaped\n' "$escaped" "$total" | tee -a "$table"
if [ -n "$out" ]; then
	cp "$table" "$out"
fi
