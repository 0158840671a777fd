#!/bin/bash
# The GPU check's dry run on the CPU (make test runs it), so that the check
# cannot rot unseen between the rare GPU runs: scripts/gpu-prepare.sh and
# scripts/gpu-check.sh --dry-run, end to end, at small sizes, with RDKit
# replaced by the recording as on the GPU machine. What it exercises:
#   - prepare: the binaries stripped and packed, the recording, the shared
#     files (when MICROGRAPH_SHARED or ../shared is at hand), the size check;
#   - the shim rebuilt by `make shim` into a fresh folder, against this
#     machine's libtorch (its objects copied from build/, so that only the
#     link runs here), and the carried binaries loading that copy;
#   - test binaries run from their package folders on the recording: all of
#     torch/optim's tests and trainer/pretrain's step-replay test, which
#     featurises a synthetic dataset;
#   - bench (fp32), the reference (when at hand), the released objective,
#     SIGKILL and resume compared bit for bit, the table and the archive;
#   - a stage over its budget (--budget) stopped, and the table still made.
# Its table and logs are left in out/gpu-check-dry-run/. Time: about 20 s of
# CPU, under a minute on two busy cores (mostly linking three binaries).
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-dry-run.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
shared=${MICROGRAPH_SHARED:-../shared}
[[ -d $shared/data/ogb && -e $shared/bench/ref_micrograph.py ]] || shared=none

bash scripts/gpu-prepare.sh --out "$tmp/gpu" --shared "$shared" \
	--packages "torch/optim trainer/pretrain" --seeds 3 --molecules 200 >"$tmp/prepare.log" 2>&1 ||
	{ cat "$tmp/prepare.log" >&2 && exit 1; }

# A small synthetic dataset stands in for ogbg-molhiv (and needs no ../shared).
tar -C "$tmp" -xzf "$tmp/gpu/bin.tar.gz" ./micrograph
"$tmp/micrograph" synth --out "$tmp/synth" --molecules 300 --seed 1 >/dev/null

# The shim's objects, already compiled here by make shim, copied with their
# times so that the check's make only links.
mkdir -p "$tmp/build"
cp -rp build/shim build/testing "$tmp/build/"

if ! bash scripts/gpu-check.sh --dry-run --gpu "$tmp/gpu" --data "$tmp/synth" --build "$tmp/build" \
	--out "$tmp/out" --run 'TestAdam|TestClipGradNorm|TestCheckpointReplaysEveryRandomDrawOfAStep' >"$tmp/check.log" 2>&1; then
	cat "$tmp/check.log" >&2
	exit 1
fi

# A stage over its budget is stopped and the table still comes: the resume
# stage alone, with 1 s, on the same carried folder and shim (it takes about
# 3 s here: three pretrain processes of 200 steps; with 3 s of budget it
# sometimes finished in time).
bash scripts/gpu-check.sh --dry-run --gpu "$tmp/gpu" --data "$tmp/synth" --build "$tmp/build" \
	--out "$tmp/overrun" --stages "resume report" --budget resume=1 >"$tmp/overrun.log" 2>&1 || true
grep -q '^| resume | stopped: over its budget | [0-9]* s | 1 s |$' "$tmp/overrun/summary.md" ||
	{ cat "$tmp/overrun.log" "$tmp/overrun/summary.md" >&2; echo "gpu-check dry run: an overrunning stage was not stopped and reported" >&2; exit 1; }

# What the check must have produced: every stage passed, both test binaries
# ran tests and passed, a bench row, the resume verdict; and the archive.
summary=$tmp/out/summary.md
fail() { echo "gpu-check dry run: $1" >&2 && cat "$summary" >&2 && exit 1; }
for stage in env shim tests bench released resume; do
	grep -q "^| $stage | pass |" "$summary" || fail "stage $stage did not pass"
done
grep -Eq '^\| torch-optim \| 0 \| [1-9][0-9]* \| 0 \|' "$summary" || fail "torch/optim's tests did not run and pass"
grep -Eq '^\| trainer-pretrain \| 0 \| 1 \| 0 \|' "$summary" || fail "trainer/pretrain's step-replay test did not run and pass"
grep -Eq '^\| fp32 \| [0-9,]+ \|' "$summary" || fail "no bench row"
grep -q 'then `--resume`: [0-9]* of [0-9]* records identical$' "$summary" || fail "no resume verdict"
archived=$(tar -tzf "$tmp/out/logs.tar.gz")
grep -qx './tests/trainer-pretrain.log' <<<"$archived" || fail "the logs are not archived"
rm -rf out/gpu-check-dry-run && mkdir -p out && cp -r "$tmp/out" out/gpu-check-dry-run
echo "gpu-check dry run: passed; its table and logs are in out/gpu-check-dry-run/"
