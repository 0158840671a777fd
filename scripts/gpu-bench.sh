#!/bin/sh
# Side-by-side GPU benchmark, for a machine with CUDA PyTorch (and PyTorch
# Geometric) but no Go: rebuilds only the shim against that PyTorch, then runs
# `micrograph bench` and the reference trainer (plain and --pyg) back to back
# on the same data and prints the ratio table.
#
#   scripts/gpu-bench.sh DATA REF_SCRIPT [OUT]
#
# DATA: an OGB folder (ogbg_molhiv); REF_SCRIPT: ref_micrograph.py; OUT: where
# the JSON lines and the table go (default out/gpu-bench). bin/micrograph must
# have been built elsewhere (make build) and carried along. Test binaries
# carried in bin/ (go test -c -o bin/ ./torch ./ops) run on CUDA first, so
# that the CUDA kernels are checked against the unfused ops before anything is
# timed. Extra bench arguments can be given in MICROGRAPH_BENCH_ARGS.
set -eu
data=$1 ref=$2 out=${3:-out/gpu-bench}
cd "$(dirname "$0")/.."
mkdir -p "$out"
PYTHON=${PYTHON:-python3}

make shim PYTHON="$PYTHON"
export LD_LIBRARY_PATH="$PWD/build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin/micrograph version | tee "$out/version.txt"

for t in bin/torch.test bin/ops.test; do
	[ -x "$t" ] || continue
	pkg=$(basename "$t" .test)
	if ! (cd "$pkg" && MICROGRAPH_TEST_DEVICE=cuda "../$t" -test.v) >"$out/$pkg-tests.log" 2>&1; then
		echo "$t failed on CUDA; see $out/$pkg-tests.log" >&2
		exit 1
	fi
	echo "$t: $(grep -c '^--- PASS' "$out/$pkg-tests.log") passed on CUDA"
done

# The paper's sizes (docs/method.md §1): batch 512, d 300, 5 layers, K 20; one epoch.
# shellcheck disable=SC2086
bin/micrograph bench --data "$data" --device cuda --batch-size 512 --hidden 300 --layers 5 --motifs 20 \
	--epoch --cache "$out/cache" ${MICROGRAPH_BENCH_ARGS:-} | tee "$out/micrograph.json"

# The reference does not report memory: run it under a wrapper that does.
for impl in torch pyg; do
	flag=""
	[ "$impl" = pyg ] && flag=--pyg
	"$PYTHON" - "$ref" "$data" --device cuda --batch 512 --epoch $flag <<'PY' | tail -n 1 | tee "$out/ref-$impl.json"
import io, json, runpy, sys, contextlib, torch
script, args = sys.argv[1], sys.argv[2:]
sys.argv = [script] + args
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    runpy.run_path(script, run_name="__main__")
res = json.loads(buf.getvalue().strip().splitlines()[-1])
res["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
print(json.dumps(res))
PY
done

"$PYTHON" - "$out" <<'PY' | tee "$out/table.md"
import json, sys
out = sys.argv[1]
mg = json.load(open(f"{out}/micrograph.json"))
rows = [("micrograph", mg["molecules_per_s"], mg["s_per_epoch"], mg["peak_memory_bytes"], mg["data_wait_fraction"])]
for impl in ("torch", "pyg"):
    r = json.load(open(f"{out}/ref-{impl}.json"))
    rows.append((f"reference ({impl})", r["graphs_per_s"], r["s_per_step"] * r["steps"], r["peak_memory_bytes"], None))
print(f"GPU benchmark, ogbg-molhiv, batch 512, d 300, 5 layers, K 20 ({mg['device']}, libtorch {mg['libtorch']})\n")
print("| trainer | molecules/s | s/epoch | peak GPU memory | data wait | micrograph speed-up |")
print("|---|---:|---:|---:|---:|---:|")
for name, mps, spe, mem, wait in rows:
    w = "" if wait is None else f"{100 * wait:.1f}%"
    print(f"| {name} | {mps:,.0f} | {spe:.2f} | {mem / 2**30:.2f} GiB | {w} | {rows[0][1] / mps:.2f}× |")
PY
