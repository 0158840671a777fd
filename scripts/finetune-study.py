#!/usr/bin/python3
"""The fine-tuning recipe study's tables (docs/finetune-study.md).

    finetune-study.py candidates DIR...
        Every candidate's V (mean over the benchmarks of the mean over seeds of
        each run's best valid ROC-AUC), per arm, from the candidates' suite
        folders (named cand-NAME), and each arm's choice by the rule.

    finetune-study.py answer --pretrained RESULT... --random RESULT...
        The paired comparison: test ROC-AUC at each run's selected epoch,
        pre-trained minus from scratch, paired by seed, per benchmark and on
        the per-seed average over the benchmarks, with the 95 % t interval,
        the two-sided p and the smallest average Δ detectable with 80 % power
        at two-sided 5 %. A RESULT is a suite folder (its runs of that side
        are taken) or a finetune result file; runs of one benchmark and seed
        given twice must agree exactly. Only seeds with a run of every
        benchmark on both sides are compared (the others are named).
        --expect N: with fewer than N such seeds the table is marked
        incomplete and carries no reading. --labels A,B: the two sides'
        column names (default pre-trained,from scratch); a RESULT after
        --random need not be from scratch (e.g. another encoder's runs).

Reads only what micrograph wrote; prints Markdown.
"""
import json
import math
import os
import sys

from scipy import stats


def suite_runs(path, pretrained):
    """{(benchmark, seed): run} of one side of a suite's fine-tuning entries."""
    with open(os.path.join(path, "suite.json")) as f:
        res = json.load(f)
    out = {}
    for e in res["entries"]:
        if e["evaluation"] != "finetune" or e["pretrained"] != pretrained:
            continue
        for r in e["finetune"]["runs"]:
            out[(e["benchmark"], r["seed"])] = r
    return out, res["config"]["finetune"]


def benchmark_of(name):
    name = name.lower()
    for p in ("ogbg_mol", "ogbg-mol"):
        if name.startswith(p):
            name = name[len(p):]
    return name.removesuffix(".gz").removesuffix(".csv")


def finetune_runs(path):
    with open(path) as f:
        res = json.load(f)
    b = benchmark_of(res["dataset"]["name"])
    return {(b, r["seed"]): r for r in res["runs"]}, res["config"]


RECIPE_KEYS = ("lr", "encoder_lr", "linear_probe_start", "freeze_epochs", "weight_decay", "warmup_epochs",
               "average_with_start", "patience", "epochs", "batch_size", "dropout", "precision")


def recipe_of(cfg):
    return {k: cfg.get(k) for k in RECIPE_KEYS if cfg.get(k) not in (None, 0, False, "")}


def gather(paths, pretrained):
    runs, recipe = {}, None
    for p in paths:
        got, cfg = suite_runs(p, pretrained) if os.path.isdir(p) else finetune_runs(p)
        r = recipe_of(cfg)
        if recipe is not None and r != recipe:
            sys.exit(f"{p}: recipe {r}, but the others ran {recipe}")
        recipe = r
        for k, run in got.items():
            if k in runs and (runs[k]["test_at_best"], runs[k]["best_valid"]) != (run["test_at_best"], run["best_valid"]):
                sys.exit(f"{p}: {k} differs from the same run elsewhere")
            runs[k] = run
    return runs, recipe


def paired(deltas):
    n = len(deltas)
    mean = sum(deltas) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in deltas) / (n - 1)) if n > 1 else float("nan")
    se = sd / math.sqrt(n)
    t975 = stats.t.ppf(0.975, n - 1)
    p = 2 * stats.t.sf(abs(mean / se), n - 1) if se > 0 else float("nan")
    mde = (t975 + stats.t.ppf(0.80, n - 1)) * se
    return mean, mean - t975 * se, mean + t975 * se, p, mde


def reading(lo, hi):
    return "**gain**" if lo > 0 else ("**loss**" if hi < 0 else "no gain measured")


def answer(args):
    side, lists = None, {"--pretrained": [], "--random": []}
    expect, labels = None, ("pre-trained", "from scratch")
    it = iter(args)
    for a in it:
        if a in lists:
            side = a
        elif a == "--expect":
            expect = int(next(it))
        elif a == "--labels":
            labels = tuple(next(it).split(","))
        elif side is None:
            sys.exit(f"{a}: give --pretrained or --random first")
        else:
            lists[side].append(a)
    pre, pre_recipe = gather(lists["--pretrained"], True)
    rnd, rnd_recipe = gather(lists["--random"], False)
    benchmarks = sorted({b for b, _ in pre} | {b for b, _ in rnd})
    all_seeds = sorted({s for _, s in pre} | {s for _, s in rnd})
    seeds = [s for s in all_seeds if all((b, s) in pre and (b, s) in rnd for b in benchmarks)]
    if not seeds:
        sys.exit("no seed has a run of every benchmark on both sides")
    partial = [s for s in all_seeds if s not in seeds]
    incomplete = expect is not None and len(seeds) < expect
    print(f"{labels[0]} recipe: {pre_recipe}  \n{labels[1]} recipe: {rnd_recipe}  \n"
          f"Seeds {', '.join(map(str, seeds))} ({len(seeds)}), test ROC-AUC (%) at each run's best valid epoch."
          + (f" Seeds {', '.join(map(str, partial))} lack a run on a side and are left out." if partial else "")
          + (f" **Incomplete: {len(seeds)} of {expect} seeds, no reading.**" if incomplete else "") + "\n")
    print(f"| benchmark | {labels[0]} | {labels[1]} | Δ (points) | 95 % interval | p | smallest detectable Δ | reading |")
    print("|---|--:|--:|--:|---|--:|--:|---|")
    avg = {s: 0.0 for s in seeds}

    def ms(xs):
        m = sum(xs) / len(xs)
        return f"{m:.2f} ± {math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs)):.2f}"

    def read(lo, hi):
        return f"incomplete ({len(seeds)} seeds)" if incomplete else reading(lo, hi)

    for b in benchmarks:
        p = [100 * pre[(b, s)]["test_at_best"] for s in seeds]
        r = [100 * rnd[(b, s)]["test_at_best"] for s in seeds]
        d = [x - y for x, y in zip(p, r)]
        for s, x in zip(seeds, d):
            avg[s] += x / len(benchmarks)
        mean, lo, hi, pv, mde = paired(d)
        print(f"| {b} | {ms(p)} | {ms(r)} | {mean:+.2f} | [{lo:+.2f}, {hi:+.2f}] | {pv:.3f} | {mde:.2f} | {read(lo, hi)} |")
    mean, lo, hi, pv, mde = paired([avg[s] for s in seeds])
    print(f"| **average** | | | {mean:+.2f} | [{lo:+.2f}, {hi:+.2f}] | {pv:.3f} | {mde:.2f} | {read(lo, hi)} |")


def candidates(dirs):
    print("| candidate | arm | " + " | ".join(["bace", "bbbp", "clintox", "sider"]) + " | V |")
    print("|---|---|--:|--:|--:|--:|--:|")
    best = {}
    for d in dirs:
        name = os.path.basename(os.path.normpath(d)).removeprefix("cand-")
        for pretrained in (True, False):
            runs, _ = suite_runs(d, pretrained)
            per = {}
            for (b, _), r in runs.items():
                per.setdefault(b, []).append(100 * r["best_valid"])
            means = {b: sum(v) / len(v) for b, v in per.items()}
            v = sum(means.values()) / len(means)
            arm = "pre-trained" if pretrained else "from scratch"
            print(f"| {name} | {arm} | " + " | ".join(f"{means[b]:.2f}" for b in sorted(means)) + f" | {v:.2f} |")
            if arm not in best or v > best[arm][1] + 0.01:
                best[arm] = (name, v)
    print()
    for arm, (name, v) in best.items():
        print(f"- {arm}: **{name}** (V {v:.2f})")


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("candidates", "answer"):
        sys.exit(__doc__)
    (candidates if sys.argv[1] == "candidates" else answer)(sys.argv[2:])
