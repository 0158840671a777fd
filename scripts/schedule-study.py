#!/usr/bin/python3
"""The schedule study's choice of encoder (docs/schedule-study.md).

    schedule-study.py select SUITE
        Each pre-trained encoder's valid ROC-AUC (linear probe, scaffold) per
        benchmark and V, their mean over the benchmarks, with the random
        encoders' for scale; the choice by the rule: the highest V, a tie
        within 0.05 points going to the lower seed (replicate).

The frozen table is `micrograph compare` of the suites and each suite's own
suite.md; the fine-tuning table is scripts/finetune-study.py answer.
Reads only what micrograph wrote; prints Markdown.
"""
import json
import os
import sys

ORDER = ["bace", "bbbp", "clintox", "hiv", "sider", "tox21", "toxcast"]


def short(name):
    name = os.path.basename(name.rstrip("/")).lower()
    for p in ("ogbg_mol", "ogbg-mol"):
        name = name.removeprefix(p)
    return name.removesuffix(".gz").removesuffix(".csv")


def select(path):
    if os.path.isdir(path):
        path = os.path.join(path, "suite.json")
    with open(path) as f:
        res = json.load(f)
    valid = {}  # (pretrained, replicate) -> {benchmark: valid ROC-AUC %}
    for e in res["entries"]:
        if e["evaluation"] != "linear" or e["protocol"] != "scaffold":
            continue
        v = e["linear"]["valid"]["mean"]
        valid.setdefault((e["pretrained"], e["replicate"]), {})[short(e["benchmark"])] = 100 * v
    benchmarks = [b for b in ORDER if any(b in per for per in valid.values())]
    print("| encoder | " + " | ".join(benchmarks) + " | V |")
    print("|---|" + "--:|" * (len(benchmarks) + 1))
    best = None
    for (pre, rep), per in sorted(valid.items(), key=lambda kv: (not kv[0][0], kv[0][1])):
        if set(per) != set(benchmarks):
            sys.exit(f"replicate {rep}: valid figures for {sorted(per)}, not {benchmarks}")
        v = sum(per.values()) / len(per)
        name = f"100 epochs, seed {rep + 1}" if pre else f"random, seed {rep + 1} (for scale)"
        print(f"| {name} | " + " | ".join(f"{per[b]:.2f}" for b in benchmarks) + f" | {v:.2f} |")
        if pre and (best is None or v > best[1] + 0.05):
            best = (rep, v)
    print(f"\nChosen: **100 epochs, seed {best[0] + 1}** (V {best[1]:.2f}).")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "select":
        sys.exit(__doc__)
    select(sys.argv[2])
