#!/bin/bash
# Fine-tuning steps against the reference: rounds of `micrograph bench --finetune` (one or
# more binaries, e.g. before and after a change) and ref_micrograph.py --finetune --batch 32
# --dropout 0.5, one thread each, on ogbg-molbace, alternated so that a drift of the machine
# touches every side alike (docs/speed.md, "Fine-tuning against the reference"). Each run
# starts only once the one-minute load is under 0.3 (waiting up to 5 minutes), so that no
# run is timed in the wake of the one before, and prints that load; a line whose load is
# not well under 1 does not count.
#
# Usage: bash scripts/finetune-speed.sh [--rounds N] [--steps N] [BIN ...]
#   BIN      micrograph binaries to time, in this order each round (default bin/micrograph)
#   --rounds rounds (default 5)
#   --steps  timed steps per run, after 5 untimed (default 200)
# Output: one line per run, "load L micrograph BIN molecules_per_s" or "load L reference molecules_per_s".
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=5
steps=200
bins=()
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--steps) steps=$2; shift 2 ;;
	*) bins+=("$1"); shift ;;
	esac
done
[ ${#bins[@]} -gt 0 ] || bins=(bin/micrograph)
shared=${MICROGRAPH_SHARED:-../shared}
data=$shared/data/ogb/ogbg_molbace
python=/usr/bin/python3 # Debian's PyTorch, not the first python3 on PATH

# settle waits for a one-minute load under 0.3 and prints the load it started at.
settle() {
	local tries
	for tries in $(seq 1 60); do
		awk -v l="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN { exit !(l < 0.3) }' && break
		sleep 5
	done
	printf 'load %s ' "$(cut -d' ' -f1 /proc/loadavg)"
}

lscpu | grep -E 'Model name|^Model:|Flags' | cut -c1-160
for r in $(seq 1 "$rounds"); do
	echo "round $r"
	for b in "${bins[@]}"; do
		settle
		line=$("$b" bench --finetune --data "$data" --threads 1 --device cpu --steps "$steps" --warmup 5 2>/dev/null)
		echo "micrograph $b $(printf '%s' "$line" | sed -n 's/.*"molecules_per_s":\([0-9.]*\).*/\1/p')"
	done
	settle
	line=$(OPENBLAS_NUM_THREADS=1 "$python" "$shared/bench/ref_micrograph.py" "$data" --finetune --batch 32 \
		--dropout 0.5 --steps "$steps" --warmup 5 --threads 1 2>/dev/null | tail -1)
	echo "reference $(printf '%s' "$line" | sed -n 's/.*"graphs_per_s": *\([0-9.]*\).*/\1/p')"
done
