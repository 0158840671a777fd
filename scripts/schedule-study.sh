#!/bin/bash
# The schedule study's runs (docs/schedule-study.md): featurising its benchmarks, the linear
# probes of the three 100-epoch encoders, the shipped model and random encoders, and the
# ten-seed fine-tuning, one `micrograph finetune` call per arm, benchmark and seed, each
# writing its own result file. A call makes only what is missing, so a stopped study is
# continued by the same command. Tables: scripts/finetune-study.py and
# scripts/schedule-study.py.
#
# Usage: bash scripts/schedule-study.sh OUT STEP [ARM ...]
#   OUT    the study's folder (outside the repository): data/, probes/, finetune/
#   STEP   data       featurise bbbp, clintox, sider, tox21 and toxcast into OUT/data
#          select     scaffold linear probes, probe seed 1, of the three 100-epoch encoders
#                     and their random encoders (the choice's valid figures; OUT/probes/100ep)
#          frozen     the frozen table's probes, scaffold and cv10: the three 100-epoch
#                     encoders and their random encoders, one seed each (a suite starting
#                     from select's runs, OUT/probes/100ep-frozen), and the shipped model
#                     at the same seeds (linear-eval, OUT/probes/v1-scaffold, v1-cv10)
#          finetune   ARMs at seeds 1–10 on bace, bbbp, clintox and sider, interleaved seed
#                     by seed so that what finishes is paired, $JOBS runs at a time
#   ARM    scratch | v1 | 100ep-sS (S = 1, 2, 3)
# Environment: MICROGRAPH_SHARED (default ../shared), BIN (default bin/micrograph), JOBS (2),
#   SEEDS (finetune's evaluation seeds, default "1 2 3 4 5 6 7 8 9 10").
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -ge 2 ] || { sed -n 2,22p "$0" >&2; exit 2; }
out=$1 step=$2
shift 2
shared=${MICROGRAPH_SHARED:-../shared}
bin=$(realpath "${BIN:-bin/micrograph}")
jobs=${JOBS:-2}
runs=$shared/runs/h200-100ep-2026-11-28
mkdir -p "$out"
out=$(realpath "$out")
mkdir -p "$out/probes"
data=$out/data
benchmarks="$shared/data/ogb/ogbg_molbace,$data/bbbp,$data/clintox,$shared/data/ogb/ogbg_molhiv,$data/sider,$data/tox21"

encoder() { # the --encoder of an arm, empty for scratch
	case $1 in
	scratch) ;;
	v1) echo micrograph-molhiv-v1 ;;
	100ep-s[123]) echo "$runs/seed-${1#100ep-s}/encoder.pt" ;;
	*) echo "unknown arm $1" >&2; exit 2 ;;
	esac
}

case $step in
data)
	mkdir -p "$data"
	for f in BBBP.csv:bbbp clintox.csv:clintox sider.csv:sider tox21.csv:tox21 toxcast.csv.gz:toxcast; do
		[ -e "$data/${f#*:}" ] || "$bin" featurize --csv "$shared/data/moleculenet/${f%%:*}" --out "$data/${f#*:}"
	done
	;;
select)
	"$bin" suite --encoder "$runs/seed-1/encoder.pt,$runs/seed-2/encoder.pt,$runs/seed-3/encoder.pt" \
		--evaluations linear --protocols scaffold --seeds 1 --datasets "$benchmarks" \
		--device cpu --threads 1 --jobs "$jobs" --out "$out/probes/100ep"
	;;
frozen)
	# A suite folder is one suite's: this one (scaffold and cv10) starts from
	# copies of select's runs, which it takes as its own (kept runs are keyed
	# by what they computed, not by the folder).
	mkdir -p "$out/probes/100ep-frozen/runs"
	[ -d "$out/probes/100ep/runs" ] && cp -n "$out/probes/100ep/runs/"*.json "$out/probes/100ep-frozen/runs/"
	"$bin" suite --encoder "$runs/seed-1/encoder.pt,$runs/seed-2/encoder.pt,$runs/seed-3/encoder.pt" \
		--evaluations linear --protocols scaffold,cv10 --seeds 1 --datasets "$benchmarks" \
		--device cpu --threads 1 --jobs "$jobs" --out "$out/probes/100ep-frozen"
	# The shipped model is one encoder: linear-eval probes it at the seeds
	# the 100-epoch encoders took (0, 1, 2; cv10's folds are drawn per seed).
	# A suite of it would pair it with random encoders of its own, and
	# --random-from takes none from a suite of other seeds.
	for protocol in scaffold cv10; do
		mkdir -p "$out/probes/v1-$protocol"
		for path in ${benchmarks//,/ }; do
			res=$out/probes/v1-$protocol/$(basename "$path").json
			[ -e "$res" ] || "$bin" linear-eval --data "$path" --encoder micrograph-molhiv-v1 --seeds 3 --seed 0 \
				--protocol "$protocol" --device cpu --threads 1 --jobs "$jobs" --out "$res"
		done
	done
	;;
finetune)
	[ $# -gt 0 ] || { echo "finetune: name the arms (scratch, v1, 100ep-sS)" >&2; exit 2; }
	mkdir -p "$out/finetune"
	for s in ${SEEDS:-1 2 3 4 5 6 7 8 9 10}; do
		for d in ogbg_molbace bbbp clintox sider; do
			path=$data/$d
			[ "$d" = ogbg_molbace ] && path=$shared/data/ogb/ogbg_molbace
			for arm in "$@"; do
				res=$out/finetune/$arm-$d-seed$s.json
				[ -e "$res" ] && continue
				enc=$(encoder "$arm")
				echo "$bin finetune --data $path ${enc:+--encoder $enc} --seeds 1 --seed $s --device cpu --threads 1 --patience 20 --out $res"
			done
		done
	done | xargs -P "$jobs" -I{} sh -c '{} > /dev/null 2>&1 || echo "failed: {}" >&2'
	;;
*)
	echo "unknown step $step" >&2
	exit 2
	;;
esac
