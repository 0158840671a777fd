#!/bin/bash
# Fine-tuning steps against the reference: rounds of `micrograph bench --finetune` (one or
# more binaries, e.g. before and after a change) and ref_micrograph.py --finetune --batch 32
# --dropout 0.5, one thread each, on ogbg-molbace, alternated so that a drift of the machine
# touches every side alike (docs/speed.md, "Fine-tuning against the reference"). Meant for
# an idle machine: it prints the CPU (lscpu) and the load (uptime) before each round; the
# figures count only from a machine whose load was well under 1 when it started.
#
# Usage: bash scripts/finetune-speed.sh [--rounds N] [--steps N] [BIN ...]
#   BIN      micrograph binaries to time, in this order each round (default bin/micrograph)
#   --rounds rounds (default 5)
#   --steps  timed steps per run, after 5 untimed (default 200)
# Output: one line per run, "micrograph BIN molecules_per_s" or "reference molecules_per_s".
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

lscpu | grep -E 'Model name|^Model:|Flags' | cut -c1-160
for r in $(seq 1 "$rounds"); do
	echo "round $r: $(uptime)"
	for b in "${bins[@]}"; do
		line=$("$b" bench --finetune --data "$data" --threads 1 --device cpu --steps "$steps" --warmup 5 2>/dev/null)
		echo "micrograph $b $(printf '%s' "$line" | sed -n 's/.*"molecules_per_s":\([0-9.]*\).*/\1/p')"
	done
	line=$(OPENBLAS_NUM_THREADS=1 "$python" "$shared/bench/ref_micrograph.py" "$data" --finetune --batch 32 \
		--dropout 0.5 --steps "$steps" --warmup 5 --threads 1 2>/dev/null | tail -1)
	echo "reference $(printf '%s' "$line" | sed -n 's/.*"graphs_per_s": *\([0-9.]*\).*/\1/p')"
done
