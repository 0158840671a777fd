#!/bin/bash
# Does an ensemble's spread mean something (issue 42 §3)? On one
# classification set (ogbg-molbace) and one regression set (MoleculeNet's
# ESOL, its target column named), ten fine-tuning runs of the shipped
# encoder (seeds 1..10, finetune's defaults: 100 epochs, the scaffold split,
# each run's model kept at its best valid epoch) make a 10-member ensemble;
# predict gives every molecule the members' mean and standard deviation; the
# test molecules are ranked by that deviation, and the error of the most
# uncertain fifth is set against that of the least uncertain fifth.
#
# Errors: on bace the Brier score (mean squared difference between the
# mean probability and the 0/1 label) and the share misclassified at 0.5;
# on ESOL the RMSE and MAE of the mean, in log mol/L. A fifth is
# floor(n/5) test molecules (bace 30 of 152, ESOL 22 of 113); ties in the
# deviation are broken by row. The last column is the rank correlation
# (Spearman's ρ) of the deviation with the absolute error over all test
# molecules.
#
# Runs that exist already (OUT/NAME/seed-S) are kept, so an interrupted
# check continues; two run at a time, each on one thread under nice.
#
# Usage: bash scripts/ensemble-spread.sh [--out DIR] [--bin PATH] [--shared DIR]
#          [--encoder NAME|FILE] [--seeds N] [--jobs N] [--python PATH]
#   --out      where everything goes (default out/ensemble-spread)
#   --bin      micrograph (default bin/micrograph)
#   --shared   the shared data folder (default ../shared)
#   --encoder  the pre-trained encoder (default micrograph-molhiv-v1)
#   --seeds    members per ensemble (default 10)
#   --jobs     fine-tuning runs at once (default 2)
#   --python   a Python with NumPy (default /usr/bin/python3)
# It writes OUT/NAME/seed-S (each a saved model, with its result and log),
# OUT/NAME/ensemble.json, OUT/NAME-preds.csv (predict over the whole
# dataset) and OUT/spread.md, the table.
set -euo pipefail

out=out/ensemble-spread bin=bin/micrograph shared=../shared encoder=micrograph-molhiv-v1 seeds=10 jobs=2 python=/usr/bin/python3
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2 ;;
	--bin) bin=$2 ;;
	--shared) shared=$2 ;;
	--encoder) encoder=$2 ;;
	--seeds) seeds=$2 ;;
	--jobs) jobs=$2 ;;
	--python) python=$2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
	shift 2
done
bin=$(realpath "$bin")
mkdir -p "$out/data" "$out/cache"
esol=$out/data/esol
[ -d "$esol" ] || "$bin" featurize --csv "$shared/data/moleculenet/esol.csv" \
	--target-columns "measured log solubility in mols per litre" --out "$esol"
bace=$shared/data/ogb/ogbg_molbace

# finetune NAME DATA SEED: one run, its model kept.
finetune() {
	local dir=$out/$1
	mkdir -p "$dir"
	[ -d "$dir/seed-$3" ] && return 0
	nice -n 10 "$bin" finetune --data "$2" --encoder "$encoder" --seeds 1 --seed "$3" --threads 1 \
		--out "$dir/seed-$3.json" --save "$dir/seed-$3" --cache "$out/cache" >"$dir/seed-$3.log" 2>&1
}
export -f finetune
export out bin encoder
for s in $(seq 1 "$seeds"); do
	echo "bace $bace $s"
	echo "esol $esol $s"
done | xargs -P "$jobs" -L 1 bash -c 'finetune "$@"' _

for name in bace esol; do
	# ensemble.json, from each run's result (the saved model's seed, epoch and figures).
	"$python" - "$out/$name" "$seeds" <<'EOF'
import json, sys
folder, seeds = sys.argv[1], int(sys.argv[2])
members = []
for s in range(1, seeds + 1):
    res = json.load(open(f"{folder}/seed-{s}.json"))
    saved = res["saved"]
    members.append({"dir": f"seed-{s}", "seed": saved["seed"], "split": res["dataset"]["split"],
                    "epoch": saved["epoch"], "valid": saved["valid"], "test": saved["test"]})
json.dump({"format": "micrograph-ensemble", "version": 1, "members": members,
           "selection": "every seed", "metric": res["metric"]}, open(f"{folder}/ensemble.json", "w"), indent=1)
EOF
done
"$bin" predict --model "$out/bace" --data "$bace" --out "$out/bace-preds.csv" --threads 1 --cache "$out/cache"
"$bin" predict --model "$out/esol" --data "$esol" --out "$out/esol-preds.csv" --threads 1 --cache "$out/cache"

"$python" - "$out" "$bace" "$esol" <<'EOF' | tee "$out/spread.md"
import csv, gzip, json, sys
import numpy as np
out, folders = sys.argv[1], {"bace": sys.argv[2], "esol": sys.argv[3]}

def column(path):
    with gzip.open(path, "rt") as f:
        return [line.strip() for line in f]

def ranks(x):
    r = np.empty(len(x))
    r[np.argsort(x, kind="stable")] = np.arange(len(x))
    return r

print("| set, test molecules | error | least uncertain fifth | most uncertain fifth | all test | spread (std) least / most fifth | Spearman ρ(spread, abs. error) |")
print("|---|---|--:|--:|--:|--:|--:|")
for name, folder in folders.items():
    test = [int(i) for i in column(f"{folder}/split/scaffold/test.csv.gz")]
    labels = np.array([float(v) if v else np.nan for v in column(f"{folder}/raw/graph-label.csv.gz")])
    rows = list(csv.reader(open(f"{out}/{name}-preds.csv")))
    header, body = rows[0], rows[1:]
    task = header[2]
    mean = np.array([float(r[header.index(task)]) for r in body])
    std = np.array([float(r[header.index(task + "_std")]) for r in body])
    members = {r[header.index("members")] for r in body}
    test = [i for i in test if not np.isnan(labels[i])]
    order = sorted(test, key=lambda i: (std[i], i))
    k = len(test) // 5
    parts = {"least": order[:k], "most": order[-k:], "all": test}
    if name == "bace":
        errors = {"Brier score": lambda idx: float(np.mean((mean[idx] - labels[idx]) ** 2)),
                  "misclassified at 0.5": lambda idx: float(np.mean((mean[idx] >= 0.5) != (labels[idx] == 1)))}
    else:
        errors = {"RMSE": lambda idx: float(np.sqrt(np.mean((mean[idx] - labels[idx]) ** 2))),
                  "MAE": lambda idx: float(np.mean(np.abs(mean[idx] - labels[idx])))}
    rho = np.corrcoef(ranks(std[test]), ranks(np.abs(mean[test] - labels[test])))[0, 1]
    for what, f in errors.items():
        print(f"| {name}, {len(test)} (fifths of {k}; {'/'.join(sorted(members))} members) | {what} | "
              f"{f(parts['least']):.3f} | {f(parts['most']):.3f} | {f(parts['all']):.3f} | "
              f"{np.mean(std[parts['least']]):.3f} / {np.mean(std[parts['most']]):.3f} | {rho:.2f} |")
EOF
