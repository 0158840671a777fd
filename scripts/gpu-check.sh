#!/bin/bash
# The GPU check in one call (issue 36). On a fresh H100 or H200 machine with
# CUDA PyTorch and nvcc but no Go, no RDKit and no network, in the root of a
# checkout that carries .gpu/ (made by `make gpu-check` where Go and RDKit
# are: the binaries, the test binaries, the data, an RDKit recording), it
# rebuilds the shim there, runs every test with a CUDA path on the GPU, times
# pre-training against the reference trainer, runs the released objective,
# kills a run and resumes it, and writes one Markdown table and the logs:
#
#   bash scripts/gpu-check.sh --out "$OUT"
#
#   OUT/summary.md      the table: every stage, the tests, the speeds
#   OUT/logs.tar.gz     every stage's log and output
#   OUT/manifest.txt    what .gpu/ holds and where it was made
#
# Time budget: 8 minutes in all. Each stage runs under `timeout` with its own
# budget, cut further so that the whole ends by the deadline; a stage that
# overruns is stopped (SIGTERM to it and its children, SIGKILL 5 s later),
# marked so, and the next one starts. Expected times
# are estimates for one H100 (from the 2026-11-22 run of an older tree and
# this project's build times), not measurements:
#
#   stage     budget  expected  what
#   env         10 s      1 s   GPU, driver, nvcc, cores
#   shim       140 s     90 s   make shim against this PyTorch and nvcc, into build/gpu-check
#                               (kept between calls on a warm machine: a rerun relinks only)
#   tests      150 s    100 s   every carried test binary at once, MICROGRAPH_TEST_DEVICE=cuda
#   bench       95 s     70 s   bench and the reference, paper sizes, one epoch, fp32, bf16, tf32
#   released    25 s     10 s   pretrain --objective released, 50 steps
#   resume      40 s     25 s   100 --deterministic steps; the same run killed (SIGKILL) after
#                               45, resumed; the two logs compared bit for bit
#   report      10 s      2 s   summary.md, logs.tar.gz
#   total      470 s    300 s   (the rest of the 480: what a stopped stage may take to die)
#
# --dry-run is the same script on the CPU at small sizes (make test runs it:
# scripts/gpu-check-dry-run.sh). Options:
#   --out DIR      where the results go (default out/gpu-check)
#   --gpu DIR      the carried folder (default .gpu)
#   --data DIR     the dataset of bench, released and resume (default
#                  GPU/shared/data/ogb/ogbg_molhiv)
#   --build DIR    where the shim is built (default build/gpu-check)
#   --run REGEX    only the tests matching REGEX (go test -run)
#   --stages LIST  only these stages, e.g. "env shim bench report" for a rerun
#                  on a warm machine (the shim built by the first call is kept)
#   --budget NAME=SECONDS  another budget for a stage (repeatable)
#   --dry-run      --device cpu, small sizes, fp32 only
set -u

self=$(readlink -f "$0")
cd "$(dirname "$self")/.."
root=$PWD

# ---- Stages (each runs as `bash gpu-check.sh --stage NAME` under timeout,
# with the settings below exported; it writes its facts into $logs/NAME/). ----

# env: what the machine is (PyTorch's version: the shim stage and bench say).
stage_env() {
	if command -v nvidia-smi >/dev/null; then
		nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
	else
		echo "no nvidia-smi (no GPU driver)"
	fi
	if command -v nvcc >/dev/null; then nvcc --version | tail -n 1; else echo "no nvcc on PATH"; fi
	echo "$(nproc) cores, $(free -g | awk '/^Mem/ {print $2}') GiB"
}

# shim: libmgtorch.so (and the tests' libmgtorch_testing.so) against this
# machine's libtorch; the carried binaries link it by name and load it from
# LD_LIBRARY_PATH. A build folder made against another libtorch is emptied.
stage_shim() {
	local stamp="$build/libtorch.env" now
	now=$(sh third_party/libtorch.sh) || return 1
	if [[ -e $stamp ]] && [[ $(cat "$stamp") != "$now" ]]; then
		echo "$build was built against another libtorch: starting afresh"
		rm -rf "$build"
	fi
	mkdir -p "$build"
	echo "$now" >"$stamp"
	echo "$now"
	make -j"$(nproc)" --no-print-directory shim BUILD="$build" || return 1
	local loaded
	loaded=$(ldd "$bin/micrograph" | awk '/libmgtorch.so/ {print $3}')
	echo "bin/micrograph loads $loaded"
	[[ $loaded == "$build/lib/libmgtorch.so" ]] || { echo "not the shim just built" >&2; return 1; }
	"$bin/micrograph" version
}

# tests: every carried test binary, in its package's folder, all at once;
# each stops itself 10 s before the stage's budget and prints where it was.
# Each leaves its exit status in tests/NAME.rc; the report counts the rest.
# RDKit is the recording; the shared files are GPU/shared (the tests on them
# skip without it); a test needing a Python module the machine lacks
# (scikit-learn, say) skips; two libtorch threads each, sleeping when idle.
stage_tests() {
	local t name pkg failed=0
	for t in "$bin"/*.test; do
		name=$(basename "$t" .test)
		pkg=${name//-//}
		(
			cd "$pkg" && MICROGRAPH_TEST_DEVICE=$device MICROGRAPH_CHEM_RECORDING=$gpu/chem.rec \
				MICROGRAPH_SHARED=$shared MICROGRAPH_PYTHON_OPTIONAL=1 OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE \
				"$t" -test.v -test.count=1 -test.timeout=$((budget - 10))s ${run:+-test.run "$run"} \
				>"$logs/tests/$name.log" 2>&1
			echo $? >"$logs/tests/$name.rc"
		) &
	done
	wait
	for t in "$logs"/tests/*.rc; do
		echo "$(basename "$t" .rc): exit $(cat "$t")"
		[[ $(cat "$t") == 0 ]] || failed=1
	done
	return $failed
}

# bench: micrograph and the reference alternated, each precision in turn.
# The reference's precision is PyTorch's own: --bf16 (autocast), and TF32
# through torch.backends' switches; its peak memory is read after it.
stage_bench() {
	local p out=$logs/bench failed=0 ref=$shared/bench/ref_micrograph.py
	mkdir -p "$out"
	for p in $precisions; do
		echo "micrograph bench --precision $p"
		# shellcheck disable=SC2086
		"$bin/micrograph" bench --data "$data" --device "$device" --cache "$work/cache" --precision "$p" \
			$bench_sizes >"$out/micrograph-$p.json" 2>"$out/micrograph-$p.err" || failed=1
		if [[ ! -e $ref ]]; then
			echo "no $ref: the reference is not run"
			continue
		fi
		echo "reference $p"
		# shellcheck disable=SC2086
		(cd / && "$python" -I - "$ref" "$data" --device "$device" $ref_sizes \
			$([[ $p == bf16 ]] && echo --bf16) >"$out/reference-$p.json" 2>"$out/reference-$p.err") <<PY || failed=1
import contextlib, io, json, runpy, sys, torch
script, args = sys.argv[1], sys.argv[2:]
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = "$p" == "tf32"
sys.argv = [script] + args
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    runpy.run_path(script, run_name="__main__")
res = json.loads(buf.getvalue().strip().splitlines()[-1])
res["precision"] = "$p"
res["peak_memory_bytes"] = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else None
print(json.dumps(res))
PY
	done
	return $failed
}

# released: the formulation of the authors' released code, a short run.
stage_released() {
	# shellcheck disable=SC2086
	"$bin/micrograph" pretrain --data "$data" --run "$work/released" --objective released --seed 1 \
		--device "$device" --cache "$work/cache" --max-steps "$released_steps" \
		--checkpoint-every "$released_steps" $run_sizes || return 1
	cp "$work/released/log.jsonl" "$logs/released/log.jsonl"
}

# resume: an uninterrupted run, then the same run killed with SIGKILL once it
# has logged $kill_after steps and resumed; log.jsonl must hold the same
# records bit for bit (molecules/s aside). --deterministic: without it CUDA's
# scatter-adds sum in a varying order and two runs differ from the first step.
stage_resume() {
	local flags=(--data "$data" --device "$device" --cache "$work/cache" --seed 3 --deterministic
		--max-steps "$resume_steps" --checkpoint-every "$resume_every" --keep 100)
	# shellcheck disable=SC2206
	flags+=($run_sizes)
	"$bin/micrograph" pretrain "${flags[@]}" --run "$work/full" || return 1
	"$bin/micrograph" pretrain "${flags[@]}" --run "$work/killed" &
	local pid=$! logged=0
	while kill -0 "$pid" 2>/dev/null; do
		logged=$(cat "$work/killed/log.jsonl" 2>/dev/null | wc -l)
		((logged >= kill_after)) && break
		sleep 0.02
	done
	if ! kill -9 "$pid" 2>/dev/null; then
		echo "the run ended before it could be killed" >&2
		return 1
	fi
	wait "$pid"
	echo "killed (SIGKILL) after $logged logged steps; checkpoints: $(ls "$work/killed/checkpoints" | paste -sd ' ')"
	"$bin/micrograph" pretrain --run "$work/killed" --resume --device "$device" --cache "$work/cache" || return 1
	cp "$work/full/log.jsonl" "$logs/resume/uninterrupted.jsonl"
	cp "$work/killed/log.jsonl" "$logs/resume/resumed.jsonl"
	echo "$logged" >"$logs/resume/killed-after"
	(cd / && "$python" -I - "$logs/resume") <<'PY'
import json, sys
d = sys.argv[1]
def records(name):
    with open(f"{d}/{name}.jsonl") as f:
        return [{k: v for k, v in json.loads(line).items() if k != "molecules_per_s"} for line in f]
a, b = records("uninterrupted"), records("resumed")
same = sum(x == y for x, y in zip(a, b))
first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
verdict = f"{same} of {len(a)} records identical" + ("" if len(a) == len(b) else f"; the resumed log has {len(b)}")
if first is not None:
    verdict += f"; first difference at step {a[first]['step']}: {a[first]} vs {b[first]}"
print(verdict)
with open(f"{d}/verdict", "w") as f:
    f.write(verdict + "\n")
sys.exit(0 if first is None and len(a) == len(b) else 1)
PY
}

# report: summary.md from the stages' facts, and the logs as one archive.
stage_report() {
	(cd / && "$python" -I - "$logs" "$gpu/manifest.txt" "$start") >"$out/summary.md" <<'PY'
import glob, json, math, os, statistics, sys, time
logs, manifest, start = sys.argv[1], sys.argv[2], int(sys.argv[3])

def read(path, default=""):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default

def last_json(path):
    try:
        return json.loads(read(path).splitlines()[-1])
    except (ValueError, IndexError):
        return None

def gib(b):
    return f"{b / 2**30:.2f} GiB" if b else "—"

machine = read(f"{logs}/env.log").splitlines()[:2]
commit = next((l for l in read(manifest).splitlines() if l.startswith("commit")), "commit unknown")
print(f"# GPU check: {'; '.join(machine) or 'machine unknown'}\n")
print(f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(start))}; carried tree: {commit}. "
      f"Wall time to the report: {int(time.time()) - start} s.\n")
print("| stage | result | took | budget |")
print("|---|---|--:|--:|")
for line in read(f"{logs}/stages.tsv").splitlines():
    name, result, took, budget = line.split("\t")
    print(f"| {name} | {result} | {took} s | {budget} s |")

print("\n## Tests on the device\n")
print("| test binary | exit | passed | failed | skipped | failing, or running when stopped |")
print("|---|--:|--:|--:|--:|---|")
for log in sorted(glob.glob(f"{logs}/tests/*.log")):
    name = os.path.basename(log)[:-4]
    lines = read(log).splitlines()
    count = lambda tag: sum(l.startswith(f"--- {tag}: ") for l in lines)
    which = [l.split()[2] for l in lines if l.startswith("--- FAIL: ")]
    if "\trunning tests:" in lines:  # go test -timeout's report: the tests, one a line, tab-indented
        after = lines[lines.index("\trunning tests:") + 1:]
        which += [l.split()[0] + " (timed out)" for l in after[:next((i for i, l in enumerate(after) if not l.startswith("\t\t")), len(after))]]
    rc = read(f"{logs}/tests/{name}.rc", "stopped")
    print(f"| {name} | {rc} | {count('PASS')} | {count('FAIL')} | {count('SKIP')} | {' '.join(which)} |")

print("\n## Pre-training speed against the reference\n")
print("| precision | micrograph molecules/s | s/epoch | peak memory | operators/step | reference molecules/s | reference peak memory | micrograph/reference |")
print("|---|--:|--:|--:|--:|--:|--:|--:|")
first = None
for path in sorted(glob.glob(f"{logs}/bench/micrograph-*.json")):
    p = os.path.basename(path)[len("micrograph-"):-len(".json")]
    mg, ref = last_json(path), last_json(f"{logs}/bench/reference-{p}.json")
    if mg is None:
        why = (read(path[:-5] + ".err").splitlines() or ["no output"])[-1]
        print(f"| {p} | failed: {why} | | | | | | |")
        continue
    first = first or mg
    rate = mg["molecules_per_s"]
    r = ref["graphs_per_s"] if ref else None
    print(f"| {p} | {rate:,.0f} | {mg['s_per_epoch']:.2f} | {gib(mg['peak_memory_bytes'])} | {mg['ops_per_step']} | "
          + (f"{r:,.0f} | {gib(ref.get('peak_memory_bytes'))} | {rate / r:.2f}× |" if r else "— | — | — |"))
if first:
    print(f"\nmicrograph on {first['device']}, libtorch {first['libtorch']}: batch {first['batch_size']}, "
          f"{first['steps']} timed steps, {first['threads']} thread(s) × {first['processes']} process(es); "
          "the reference is ref_micrograph.py with the same sizes (bf16: --bf16, autocast; tf32: torch.backends' switches).")

print("\n## Released objective, kill and resume\n")
recs = [json.loads(l) for l in read(f"{logs}/released/log.jsonl").splitlines()]
if recs:
    finite = all(math.isfinite(r["loss"]) for r in recs)
    speed = statistics.median(r["molecules_per_s"] for r in recs[len(recs) // 2:])
    print(f"- `--objective released`: {len(recs)} steps, loss {recs[0]['loss']:.4f} → {recs[-1]['loss']:.4f}, "
          f"{'every loss finite' if finite else 'a loss NOT FINITE'}, {speed:,.0f} molecules/s (median, second half)")
else:
    print("- `--objective released`: no log")
print(f"- `--deterministic`, SIGKILL after {read(f'{logs}/resume/killed-after', '?')} logged steps, then `--resume`: "
      f"{read(f'{logs}/resume/verdict', 'no verdict')}")
PY
	tar -C "$logs" -czf "$out/logs.tar.gz" .
	cp "$gpu/manifest.txt" "$out/manifest.txt" 2>/dev/null
	cat "$out/summary.md"
}

# ---- One stage, as the main part below starts it ----
if [[ ${1:-} == --stage ]]; then
	mkdir -p "$logs/$2"
	"stage_$2"
	exit
fi

# ---- Settings ----
start=$(date +%s)
out=out/gpu-check gpu=.gpu data="" build=build/gpu-check run="" dry=""
stages="env shim tests bench released resume report"
declare -A budgets
while (($#)); do
	case $1 in
	--stages) stages=$2 && shift ;;
	--budget) budgets[${2%%=*}]=${2#*=} && shift ;;
	--out) out=$2 && shift ;;
	--gpu) gpu=$2 && shift ;;
	--data) data=$2 && shift ;;
	--build) build=$2 && shift ;;
	--run) run=$2 && shift ;;
	--dry-run) dry=1 ;;
	*) echo "usage: gpu-check.sh [--out DIR] [--gpu DIR] [--data DIR] [--build DIR] [--run REGEX] [--stages LIST] [--budget NAME=SECONDS] [--dry-run]" >&2 && exit 2 ;;
	esac
	shift
done
mkdir -p "$out" "$build"
rm -f "$out/summary.md" "$out/logs.tar.gz"
out=$(readlink -f "$out") gpu=$(readlink -f "$gpu") build=$(readlink -f "$build")
data=$(readlink -f "${data:-$gpu/shared/data/ogb/ogbg_molhiv}")
shared=$gpu/shared
[[ -d $shared ]] || shared=""
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
logs=$work/logs bin=$work/bin
mkdir -p "$logs" "$bin"
trap 'rm -rf "$work"' EXIT

if [[ -n $dry ]]; then
	# The CPU dry run: small sizes, fp32 (the CPU may lack bf16; tf32 is GPU-only).
	device=cpu precisions=fp32
	bench_sizes="--batch-size 32 --hidden 16 --layers 2 --motifs 4 --steps 3 --warmup 1 --threads 1"
	ref_sizes="--batch 32 --hidden 16 --layers 2 --motifs 4 --steps 3 --warmup 1 --threads 1"
	run_sizes="--batch-size 32 --hidden 16 --layers 2 --motifs 4 --threads 1"
	released_steps=4 resume_steps=200 resume_every=20 kill_after=30
else
	# The paper's sizes (docs/method.md §1), micrograph's defaults: batch 512, d 300, 5 layers, K 20.
	device=cuda precisions="fp32 bf16 tf32"
	bench_sizes="--epoch --warmup 3"
	ref_sizes="--batch 512 --hidden 300 --layers 5 --motifs 20 --epoch --warmup 3"
	run_sizes=""
	released_steps=50 resume_steps=100 resume_every=20 kill_after=45
fi

# python: $PYTHON, else the first of python3 and /usr/bin/python3 with
# PyTorch and numpy (checked isolated from this folder, whose torch/ is not
# PyTorch); the reference trainer and the report run in it.
python=""
for p in ${PYTHON:-python3 /usr/bin/python3}; do
	if (cd / && "$p" -I "$root/third_party/pymodules.py" torch numpy >/dev/null 2>&1); then
		python=$(command -v "$p")
		break
	fi
done
[[ -n $python ]] || python=$(command -v python3)

export start out gpu shared data build work logs bin run device precisions bench_sizes ref_sizes run_sizes python \
	released_steps resume_steps resume_every kill_after
export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# ---- Main: the carried binaries unpacked, then each stage within the deadline ----
deadline=$((start + 480))
tar -C "$bin" -xzf "$gpu/bin.tar.gz" || { echo "no $gpu/bin.tar.gz: run make gpu-check where Go is" >&2 && exit 1; }

# run_stage NAME BUDGET: runs stage NAME, if asked for, for at most BUDGET
# seconds (or --budget's), fewer if it would otherwise end after the
# deadline, less the report's 15 s, counting the 5 s timeout gives a stopped
# stage to die; and records the result.
failures=0
run_stage() {
	local name=$1 budget=${budgets[$1]:-$2} left began rc result
	[[ " $stages " == *" $name "* ]] || return 0
	left=$((deadline - 5 - $(date +%s)))
	[[ $name == report ]] || left=$((left - 15))
	# Under 3 s left is no time for a stage; a smaller --budget is the user's.
	((budget > left)) && budget=$left
	if ((left < 3)); then
		printf '%s\tskipped: no time left\t0\t0\n' "$name" >>"$logs/stages.tsv"
		failures=$((failures + 1))
		return
	fi
	began=$(date +%s)
	echo "== $name (budget $budget s)"
	budget=$budget timeout -k 5 "$budget" bash "$self" --stage "$name" >"$logs/$name.log" 2>&1
	rc=$?
	case $rc in
	0) result=pass ;;
	124 | 137) result="stopped: over its budget" ;;
	*) result="FAILED (exit $rc)" ;;
	esac
	((rc == 0)) || failures=$((failures + 1))
	printf '%s\t%s\t%s\t%s\n' "$name" "$result" "$(($(date +%s) - began))" "$budget" >>"$logs/stages.tsv"
	echo "   $result; log: $name.log"
}

run_stage env 10
run_stage shim 140
run_stage tests 150
run_stage bench 95
run_stage released 25
run_stage resume 40
run_stage report 10
[[ -e $out/logs.tar.gz ]] || tar -C "$logs" -czf "$out/logs.tar.gz" .
echo "total $(($(date +%s) - start)) s; $failures stage(s) not passed; results in $out"
((failures == 0))
