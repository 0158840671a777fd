#!/bin/bash
# The CPU scaling tables (issue 36), in one run: pre-training throughput of
# micrograph and of the PyTorch reference on 1, 2, 4, 8 and 16 cores (those
# the machine has), then what the second and further cores give the other
# compute-bound commands; alternated, three rounds. Meant for an idle
# machine: it records the CPU model (lscpu) and the load (uptime) before and
# after, and speed figures count only from a machine with a load well under 1.
#
# Pre-training: for each round, for each core count N, in this order, each
# under `taskset -c 0-(N-1)` (so that the defaults see N cores):
#   default    micrograph bench                          (what pretrain does by default)
#   ceiling    (N ≥ 2) N unrelated `micrograph bench --threads 1` at once, one
#              on each core (taskset -c i), their molecules/s summed: what any
#              split of the step over N cores could make at that moment
#   threads    micrograph bench --threads N              (one process of N threads)
#   nproc      micrograph bench --nproc N --threads 1    (N processes; N ≥ 2)
#   reference  OPENBLAS_NUM_THREADS=N python3 ref_micrograph.py --threads N
#   baseline   (--baseline BIN, on 1 core) BIN bench --threads 1: the build before,
#              for the one-thread figure's regression check
# bench prints molecules_per_s, threads and processes; the reference,
# graphs_per_s. table.md has the medians, the ratio to micrograph on one
# thread at one core, the ratio to the reference on as many cores, and for
# the default and nproc the ratio to the ceiling of the same round (each
# round's, then their median): the figure to quote, as it cancels what the
# machine's speed does from one moment to the next.
#
# Then the other commands, by default (no --threads) on each core count, the
# same rounds, timed whole (wall clock), with an encoder of the paper's
# architecture (made by one pre-training step on the dataset, exported; its
# weights do not matter to the time): embed of the whole dataset, finetune
# on ogbg-molbace (1 seed, 3 epochs), linear-eval on ogbg-molbace (1 seed),
# and featurize of MoleculeNet's HIV.csv.gz (RDKit, one goroutine per core).
# downstream.md has their medians and speed-ups over one core.
#
# Everything stays under --out: machine.txt, raw.tsv and downstream.tsv (one
# line per measurement), logs/ (each command's output), table.md and
# downstream.md.
#
# Usage: bash scripts/scaling.sh [--out DIR] [--data DIR] [--cores "1 2 4"]
#          [--rounds N] [--bin PATH] [--reference PATH|none] [--python PATH]
#          [--baseline BIN] [--no-downstream] [--smoke]
#   --out        where (default out/scaling)
#   --data       an OGB dataset folder (default ../shared/data/ogb/ogbg_molhiv)
#   --cores      the core counts (default: 1 2 4 8 16, those at hand)
#   --rounds     alternating rounds (default 3)
#   --bin        micrograph (default bin/micrograph)
#   --reference  ref_micrograph.py (default ../shared/bench/ref_micrograph.py;
#                none, or absent: micrograph only)
#   --python     the reference's Python (default /usr/bin/python3, Debian's PyTorch)
#   --baseline   a previous micrograph build, timed on one thread beside this one
#   --no-downstream  pre-training only
#   --smoke      the script's logic at tiny sizes, one round, on a synthetic
#                dataset when --data is not given (make test runs it; its
#                figures mean nothing)
# Time at the paper's sizes (20 timed steps after 3): about 40 s per
# micrograph run and 60 s per reference run on one core of a 2-core AMD EPYC,
# less on more cores, and about 2 minutes for the other commands: about
# 11 minutes a round for 1 and 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

out=out/scaling
shared=${MICROGRAPH_SHARED:-../shared}
data=""
cores=""
rounds=3
bin=bin/micrograph
reference=$shared/bench/ref_micrograph.py
python=/usr/bin/python3
smoke=0
downstream=1
baseline=""
while [[ $# -gt 0 ]]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	--data) data=$2; shift 2 ;;
	--cores) cores=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--bin) bin=$2; shift 2 ;;
	--reference) reference=$2; shift 2 ;;
	--python) python=$2; shift 2 ;;
	--no-downstream) downstream=0; shift ;;
	--baseline) baseline=$2; shift 2 ;;
	--smoke) smoke=1; shift ;;
	*) echo "scaling.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

have=$(nproc)
if [[ -z $cores ]]; then
	for n in 1 2 4 8 16; do ((n <= have)) && cores="$cores $n"; done
fi
for n in $cores; do
	((n >= 1 && n <= have)) || { echo "scaling.sh: $n cores asked, $have at hand" >&2; exit 2; }
done
mkdir -p "$out/logs"
rm -f "$out/logs/"*

# The paper's sizes (docs/method.md §1): batch 512, d 300, 5 layers, K 20.
mg_sizes=(--steps 20 --warmup 3)
ref_sizes=(--batch 512 --hidden 300 --layers 5 --motifs 20 --steps 20 --warmup 3)
labelled=$shared/data/ogb/ogbg_molbace
csv=$shared/data/moleculenet/HIV.csv.gz
epochs=3
arch=()
if ((smoke)); then
	rounds=1
	mg_sizes=(--batch-size 32 --hidden 16 --layers 2 --motifs 4 --steps 2 --warmup 1)
	ref_sizes=(--batch 32 --hidden 16 --layers 2 --motifs 4 --steps 2 --warmup 1)
	epochs=1
	arch=(--hidden 16 --layers 2 --motifs 4)
	if [[ -z $data ]]; then
		data=$out/synth
		rm -rf "$data"
		"$bin" synth --out "$data" --molecules 200 --seed 1 >/dev/null
	fi
	labelled=$data
	csv=$out/smoke.csv
	zcat "$data/mapping/mol.csv.gz" | cut -d, -f6 | sed -n 1,60p >"$csv"
fi
data=${data:-$shared/data/ogb/ogbg_molhiv}
[[ -d $data ]] || { echo "scaling.sh: no dataset folder $data (--data)" >&2; exit 2; }
if [[ $reference == none || ! -e $reference ]] || ! "$python" -c 'import torch' 2>/dev/null; then
	[[ $reference == none ]] || echo "scaling.sh: no reference ($reference with $python and PyTorch): micrograph only" >&2
	reference=none
fi
cache=$out/cache

{
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $have cores"
	echo "flags: $(lscpu | grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' | sort -u | tr '\n' ' ')"
	echo "uptime before: $(uptime)"
} >"$out/machine.txt"

# run ROUND N NAME LOG COMMAND...: the command on the first N cores, its
# output in LOG.out and LOG.err; the job ends if it fails.
run() {
	local round=$1 n=$2 name=$3 log=$4
	shift 4
	if ! taskset -c "0-$((n - 1))" "$@" >"$log.out" 2>"$log.err"; then
		echo "scaling.sh: round $round, $n cores, $name failed:" >&2
		tail -5 "$log.err" >&2
		exit 1
	fi
}

# measure ROUND N CONFIG COMMAND...: adds the rate the command prints as
# JSON (molecules_per_s or graphs_per_s) to raw.tsv.
measure() {
	local round=$1 n=$2 config=$3 log=$out/logs/r$1-c$2-$3
	shift 3
	run "$round" "$n" "$config" "$log" "$@"
	"$python" - "$log.out" "$round" "$n" "$config" >>"$out/raw.tsv" <<'PY'
import json, sys
path, round_, n, config = sys.argv[1:]
d = json.loads([l for l in open(path) if l.startswith("{")][-1])
rate = d.get("molecules_per_s", d.get("graphs_per_s"))
print(f"{round_}\t{n}\t{config}\t{rate:.1f}\t{d.get('threads', n)}\t{d.get('processes', 1)}")
PY
	echo "round $round, $n cores, $config: $(tail -1 "$out/raw.tsv" | cut -f4) molecules/s" >&2
}

# ceiling ROUND N COMMAND...: N copies of the command at once, copy i on core
# i alone; adds their summed rate to raw.tsv as the round's ceiling.
ceiling() {
	local round=$1 n=$2 log=$out/logs/r$1-c$2-ceiling i pids=()
	shift 2
	for ((i = 0; i < n; i++)); do
		taskset -c "$i" "$@" >"$log-$i.out" 2>"$log-$i.err" &
		pids+=($!)
	done
	for i in "${!pids[@]}"; do
		if ! wait "${pids[$i]}"; then
			echo "scaling.sh: round $round, $n cores, ceiling copy $i failed:" >&2
			tail -5 "$log-$i.err" >&2
			exit 1
		fi
	done
	"$python" - "$log" "$n" "$round" >>"$out/raw.tsv" <<'PY'
import json, sys
log, n, round_ = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rates = [json.loads([l for l in open(f"{log}-{i}.out") if l.startswith("{")][-1])["molecules_per_s"] for i in range(n)]
print(f"{round_}\t{n}\tceiling\t{sum(rates):.1f}\t1\t{n}")
PY
	echo "round $round, $n cores, ceiling: $(tail -1 "$out/raw.tsv" | cut -f4) molecules/s" >&2
}

# timed ROUND N NAME COMMAND...: adds the command's wall-clock seconds to
# downstream.tsv.
timed() {
	local round=$1 n=$2 name=$3 log=$out/logs/r$1-c$2-$3 began
	shift 3
	began=$(date +%s.%N)
	run "$round" "$n" "$name" "$log" "$@"
	printf '%s\t%s\t%s\t%.2f\n' "$round" "$n" "$name" "$(echo "$(date +%s.%N) - $began" | bc)" >>"$out/downstream.tsv"
	echo "round $round, $n cores, $name: $(tail -1 "$out/downstream.tsv" | cut -f4) s" >&2
}

printf 'round\tcores\tconfig\tmolecules_per_s\tthreads\tprocesses\n' >"$out/raw.tsv"
for round in $(seq 1 "$rounds"); do
	for n in $cores; do
		bench=("$bin" bench --data "$data" --device cpu --cache "$cache" "${mg_sizes[@]}")
		measure "$round" "$n" default "${bench[@]}"
		if ((n > 1)); then
			ceiling "$round" "$n" "${bench[@]}" --threads 1
		fi
		measure "$round" "$n" threads "${bench[@]}" --threads "$n"
		if [[ -n $baseline && $n == 1 ]]; then
			measure "$round" 1 baseline "$baseline" bench --data "$data" --device cpu --cache "$cache" "${mg_sizes[@]}" --threads 1
		fi
		if ((n > 1)); then
			measure "$round" "$n" nproc "${bench[@]}" --nproc "$n" --threads 1
		fi
		if [[ $reference != none ]]; then
			measure "$round" "$n" reference env OPENBLAS_NUM_THREADS="$n" "$python" "$reference" "$data" \
				--threads "$n" "${ref_sizes[@]}"
		fi
	done
done

if ((downstream)); then
	printf 'round\tcores\tcommand\tseconds\n' >"$out/downstream.tsv"
	scratch=$out/scratch
	model=$out/encoder.pt
	rm -rf "$out/encoder-run"
	"$bin" pretrain --data "$data" --run "$out/encoder-run" --max-steps 1 --batch-size 32 --device cpu --threads 1 \
		--cache "$cache" "${arch[@]}" >"$out/logs/encoder.out" 2>&1 || { cat "$out/logs/encoder.out" >&2; exit 1; }
	"$bin" export --run "$out/encoder-run" --out "$model" >>"$out/logs/encoder.out" 2>&1 ||
		{ cat "$out/logs/encoder.out" >&2; exit 1; }
	for round in $(seq 1 "$rounds"); do
		for n in $cores; do
			rm -rf "$scratch" && mkdir -p "$scratch"
			timed "$round" "$n" embed "$bin" embed --data "$data" --encoder "$model" --out "$scratch/e.npy" --device cpu --cache "$cache"
			timed "$round" "$n" finetune "$bin" finetune --data "$labelled" --encoder "$model" --out "$scratch/ft.json" \
				--seeds 1 --epochs "$epochs" --device cpu --cache "$cache"
			timed "$round" "$n" linear-eval "$bin" linear-eval --data "$labelled" --encoder "$model" \
				--out "$scratch/le.json" --seeds 1 --device cpu --cache "$cache"
			timed "$round" "$n" featurize "$bin" featurize --csv "$csv" --out "$scratch/featurized"
		done
	done
fi
echo "uptime after: $(uptime)" >>"$out/machine.txt"

"$python" - "$out" >"$out/table.md" <<'PY'
import collections, statistics, sys
out = sys.argv[1]
rows = [l.rstrip("\n").split("\t") for l in open(f"{out}/raw.tsv")][1:]
rates, shape, by_round = collections.defaultdict(list), {}, {}
for round_, n, config, rate, threads, procs in rows:
    rates[(int(n), config)].append(float(rate))
    shape[(int(n), config)] = f"{procs} × {threads}"
    by_round[(int(round_), int(n), config)] = float(rate)
median = {k: statistics.median(v) for k, v in rates.items()}
one = median.get((1, "threads"))
print(open(f"{out}/machine.txt").read().rstrip().replace("\n", "  \n"))
print()
print("| cores | configuration | processes × threads | molecules/s (each round) | median | / micrograph, 1 thread | / reference, same cores | / ceiling, same round (each; median) |")
print("|--:|---|--:|---|--:|--:|--:|---|")
names = {"default": "micrograph, default", "ceiling": "ceiling: N unrelated one-thread processes at once (sum)",
         "threads": "micrograph --threads N", "baseline": "previous build (--baseline), --threads 1",
         "nproc": "micrograph --nproc N --threads 1", "reference": "reference (OPENBLAS_NUM_THREADS=N)"}
for n, config in sorted(median, key=lambda k: (k[0], list(names).index(k[1]))):
    m, ref = median[(n, config)], median.get((n, "reference"))
    speedup = f"{m / one:.2f}×" if one and config not in ("reference", "ceiling") else "—"
    vs_ref = f"{m / ref:.2f}×" if ref and config not in ("reference", "ceiling") else "—"
    vs_ceiling = "—"
    ratios = [by_round[(r, n, config)] / by_round[(r, n, "ceiling")] for (r, k, c) in sorted(by_round)
              if k == n and c == config and (r, n, "ceiling") in by_round]
    if ratios and config in ("default", "nproc"):
        vs_ceiling = ", ".join(f"{x:.2f}" for x in ratios) + f"; **{statistics.median(ratios):.2f}**"
    each = ", ".join(f"{r:,.0f}" for r in rates[(n, config)])
    print(f"| {n} | {names[config]} | {shape[(n, config)]} | {each} | {m:,.0f} | {speedup} | {vs_ref} | {vs_ceiling} |")
PY
if ((downstream)); then
	"$python" - "$out" >"$out/downstream.md" <<'PY'
import collections, statistics, sys
out = sys.argv[1]
rows = [l.rstrip("\n").split("\t") for l in open(f"{out}/downstream.tsv")][1:]
secs = collections.defaultdict(list)
for round_, n, name, s in rows:
    secs[(name, int(n))].append(float(s))
median = {k: statistics.median(v) for k, v in secs.items()}
order = ["embed", "finetune", "linear-eval", "featurize"]
print("| command | cores | seconds (each round) | median | speed-up over 1 core |")
print("|---|--:|---|--:|--:|")
for name, n in sorted(median, key=lambda k: (order.index(k[0]), k[1])):
    one = median.get((name, 1))
    up = f"{one / median[(name, n)]:.2f}×" if one else "—"
    print(f"| {name} | {n} | {', '.join(f'{s:.1f}' for s in secs[(name, n)])} | {median[(name, n)]:.1f} | {up} |")
PY
fi
cat "$out/table.md"
if ((downstream)); then
	echo
	cat "$out/downstream.md"
fi
