#!/bin/bash
# The wall time of one of the model card's fine-tuning suites (docs/model-card.md,
# "Evaluation": micrograph-molhiv-v1 against no pre-training, fine-tuned on ogbg-molbace
# and clintox, 3 seeds, scaffold split, both sides: 12 runs of 100 epochs), made as
# before runs were spread over the cores (--jobs 1: one process, the runs one after
# another, every core as libtorch threads) and by default (one process per core, each
# run on one thread). Meant for an idle machine: it records the CPU (lscpu) and the load
# (uptime) before and after each suite; the figures count only from a machine with a
# load well under 1. The two tables need not agree to the last digit: --jobs 1 runs each
# run on every core's threads, the default on one, and another thread count may sum in
# another order (docs/method.md §11); each is what its runs give alone with its threads.
#
# Everything stays under --out: machine.txt, clintox/ (MoleculeNet's clintox.csv
# featurised with its scaffold split, as the card did), jobs-1/ and default/ (each
# suite's --out, its stderr in log.txt), and times.tsv (one line per suite: name, wall
# seconds, jobs and threads as the suite said them).
#
# Usage: bash scripts/suite-walltime.sh [--out DIR] [--bin PATH] [--seeds N] [--epochs N]
#   --out     where (default out/suite-walltime; a folder that exists is refused, since
#             the suite would take the runs already in it)
#   --bin     micrograph (default bin/micrograph)
#   --seeds   seeds per side (default 3, the card's)
#   --epochs  fine-tuning epochs (default 100, the card's; --seeds 1 --epochs 1 is a
#             smoke run of the script's logic, whose figures mean nothing)
# Expected time on an idle 2-core machine like the card's: an epoch of bace at the paper's
# sizes is about 2.2 s on one core (issue 39), so 12 runs × 100 epochs are about 45 minutes
# on one thread; --jobs 1 (2 threads, about 1.2× one) about 35-40 minutes, the default (2
# processes of one thread) about 20-25 minutes: about an hour in all. (--seeds 1 --epochs 1
# took 8 s and 6 s on the loaded 2-core Sapphire Rapids machine, start-up included.)
set -euo pipefail
cd "$(dirname "$0")/.."

out=out/suite-walltime
bin=bin/micrograph
seeds=3
epochs=100
shared=${MICROGRAPH_SHARED:-../shared}
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	--bin) bin=$2; shift 2 ;;
	--seeds) seeds=$2; shift 2 ;;
	--epochs) epochs=$2; shift 2 ;;
	*) echo "usage: $0 [--out DIR] [--bin PATH] [--seeds N] [--epochs N]" >&2; exit 2 ;;
	esac
done
if [ -e "$out" ]; then
	echo "$0: $out exists: give a new --out (its suites would take the runs kept there)" >&2
	exit 2
fi
mkdir -p "$out"
{
	echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
	echo "flags: $(lscpu | grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' | sort -u | tr '\n' ' ')"
	echo "micrograph: $("$bin" version 2>&1 | head -1)"
	echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
} >"$out/machine.txt"

"$bin" featurize --csv "$shared/data/moleculenet/clintox.csv" --out "$out/clintox" >"$out/featurize.log" 2>&1
datasets="$shared/data/ogb/ogbg_molbace,$out/clintox"

printf 'suite\tseconds\tsplit\n' >"$out/times.tsv"
for name in jobs-1 default; do
	extra=()
	[ "$name" = jobs-1 ] && extra=(--jobs 1)
	echo "uptime before $name: $(uptime)" >>"$out/machine.txt"
	start=$(date +%s%N)
	"$bin" suite --encoder micrograph-molhiv-v1 --evaluations finetune --protocols scaffold \
		--seeds "$seeds" --epochs "$epochs" --datasets "$datasets" --device cpu \
		--out "$out/$name" "${extra[@]}" >"$out/$name.md.txt" 2>"$out/$name.log"
	end=$(date +%s%N)
	echo "uptime after $name: $(uptime)" >>"$out/machine.txt"
	split=$(grep -o -m1 '[0-9]* of the [0-9]* runs at a time, each in a process of [0-9]* libtorch thread(s)' "$out/$name.log" || echo "one process, the runs one after another")
	printf '%s\t%d\t%s\n' "$name" $(((end - start) / 1000000000)) "$split" >>"$out/times.tsv"
done
cat "$out/times.tsv"
