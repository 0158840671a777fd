#!/usr/bin/python3
"""The schedule study's choice of encoder (docs/schedule-study.md).

    schedule-study.py select SUITE
        Each pre-trained encoder's valid ROC-AUC (linear probe, scaffold) per
        benchmark and V, their mean over the benchmarks, with the random
        encoders' for scale; the choice by the rule: the highest V, a tie
        within 0.05 points going to the lower seed (replicate).

    schedule-study.py frozen PROTOCOL SUITE SHIPPED...
        The frozen table: test ROC-AUC of the linear probes under PROTOCOL
        (scaffold or cv10) of the 100-epoch encoders and their random
        encoders (SUITE, one encoder per seed) and of the shipped model
        (SHIPPED: its suite's folder, or its linear-eval result files, one
        per benchmark, at the same seeds); Δ 100 epochs − random and 100
        epochs − shipped, paired by seed (by seed and fold under cv10, as
        suite pairs them), with the 95 % t interval and two-sided p, per
        benchmark and on each pair's mean over the benchmarks; under cv10
        the average once more with one pair per seed, its folds' mean.

    schedule-study.py card SUITE...
        The suites' linear-probe rows in the model card's form: per protocol
        and benchmark, pre-trained and no pre-training (mean ± population std
        over the runs), Δ with its 95 % t interval and two-sided p as the
        suite paired it, and the reading.

    schedule-study.py runs RESULT...
        The fine-tuning runs made so far, one line each (arm from the file
        name ARM-BENCHMARK-seedS.json): best epoch, where patience stopped
        the run ("none": it ran every epoch), best valid and test ROC-AUC at
        the best epoch, seconds.

The fine-tuning table is scripts/finetune-study.py answer.
Reads only what micrograph wrote; prints Markdown.
"""
import json
import math
import os
import sys

from scipy import stats

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
        name = f"100 epochs, seed {rep + 1}" if pre else f"no pre-training, replicate {rep + 1} (for scale)"
        print(f"| {name} | " + " | ".join(f"{per[b]:.2f}" for b in benchmarks) + f" | {v:.2f} |")
        if pre and (best is None or v > best[1] + 0.05):
            best = (rep, v)
    print(f"\nChosen: **100 epochs, seed {best[0] + 1}** (V {best[1]:.2f}).")


def paired(a, b):
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    mean = sum(d) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n)
    t975 = stats.t.ppf(0.975, n - 1)
    p = 2 * stats.t.sf(abs(mean / se), n - 1) if se > 0 else float("nan")
    lo, hi = mean - t975 * se, mean + t975 * se
    read = "**gain**" if lo > 0 else ("**loss**" if hi < 0 else "no gain measured")
    return f"{mean:+.2f} [{lo:+.2f}, {hi:+.2f}], p {'< 0.001' if p < 0.001 else f'{p:.3f}'}: {read}"


def ms(xs):
    m = sum(xs) / len(xs)
    return f"{m:.2f} ± {math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs)):.2f}"


def suite_tests(path, protocol, pretrained):
    """{benchmark: {(seed, split): test %}} of a suite's linear entries under
    protocol, of the pre-trained encoders or the random ones."""
    with open(os.path.join(path, "suite.json") if os.path.isdir(path) else path) as f:
        res = json.load(f)
    out = {}
    for e in res["entries"]:
        if e["evaluation"] == "linear" and e["protocol"] == protocol and e["pretrained"] == pretrained:
            for r in e["linear"]["runs"]:
                out.setdefault(short(e["benchmark"]), {})[(r["seed"], r["split"])] = 100 * r["test_roc_auc"]
    return out


def frozen(protocol, suite, shipped):
    pre, rnd = suite_tests(suite, protocol, True), suite_tests(suite, protocol, False)
    if len(shipped) == 1 and os.path.isdir(shipped[0]):
        v1 = suite_tests(shipped[0], protocol, True)
    else:
        v1 = {}
        for path in shipped:
            with open(path) as f:
                r = json.load(f)
            if r["protocol"] != protocol:
                sys.exit(f"{path}: protocol {r['protocol']}, not {protocol}")
            for run in r["runs"]:
                v1.setdefault(short(r["dataset"]["name"]), {})[(run["seed"], run["split"])] = 100 * run["test_roc_auc"]
    benchmarks = [b for b in ORDER if b in pre and b in v1]
    if not benchmarks:
        sys.exit(f"no benchmark with {protocol} runs on both sides")
    pairs = sorted(pre[benchmarks[0]])
    for b in benchmarks:
        if sorted(pre[b]) != pairs or sorted(rnd.get(b, {})) != pairs or sorted(v1[b]) != pairs:
            sys.exit(f"{b}: runs {sorted(pre[b])}, {sorted(rnd.get(b, {}))} and {sorted(v1[b])}, not {pairs} on every side")
    seeds = sorted({s for s, _ in pairs})
    by = "seed" if len(pairs) == len(seeds) else f"seed and fold ({len(pairs)} pairs)"
    print(f"Linear probes, {protocol}, test ROC-AUC (%), seeds {', '.join(map(str, seeds))}; "
          f"Δ paired by {by}, 95 % t interval, two-sided p.\n")
    print("| benchmark | 100 epochs | shipped (20 epochs) | no pre-training | 100 epochs − no pre-training | 100 epochs − shipped |")
    print("|---|--:|--:|--:|---|---|")
    avg = {k: [sum(side[b][q] for b in benchmarks) / len(benchmarks) for q in pairs] for k, side in
           (("pre", pre), ("rnd", rnd), ("v1", v1))}
    for b in benchmarks:
        p, r, v = ([side[b][q] for q in pairs] for side in (pre, rnd, v1))
        print(f"| {b} | {ms(p)} | {ms(v)} | {ms(r)} | {paired(p, r)} | {paired(p, v)} |")
    print(f"| **average** | {ms(avg['pre'])} | {ms(avg['v1'])} | {ms(avg['rnd'])} | {paired(avg['pre'], avg['rnd'])} | "
          f"{paired(avg['pre'], avg['v1'])} |")
    if len(pairs) > len(seeds):
        # The folds of one seed share its encoder: the average's Δ again with
        # one pair per seed (its mean over the folds), the encoders' spread.
        per_seed = {k: [sum(v for q, v in zip(pairs, xs) if q[0] == s) / sum(q[0] == s for q in pairs) for s in seeds]
                    for k, xs in avg.items()}
        print(f"| **average**, one pair per seed | {ms(per_seed['pre'])} | {ms(per_seed['v1'])} | {ms(per_seed['rnd'])} | "
              f"{paired(per_seed['pre'], per_seed['rnd'])} | {paired(per_seed['pre'], per_seed['v1'])} |")


def card(suites):
    print("| protocol | benchmark | pre-trained | no pre-training | Δ (points) | 95 % interval | p | pairs | reading |")
    print("|---|---|--:|--:|--:|---|--:|--:|---|")
    for path in suites:
        with open(os.path.join(path, "suite.json") if os.path.isdir(path) else path) as f:
            res = json.load(f)
        tests = {}
        for e in res["entries"]:
            if e["evaluation"] == "linear":
                tests.setdefault((e["protocol"], short(e["benchmark"]), e["pretrained"]), []).extend(
                    100 * v for v in e["run_tests"])
        for g in res["gains"] + res["average"]:
            if g["evaluation"] != "linear":
                continue
            t, b = g["test"], short(g["benchmark"])
            side = ["", ""] if b == "average" else [ms(tests[(g["protocol"], b, k)]) for k in (True, False)]
            read = "**gain**" if t["low_95"] > 0 else ("**loss**" if t["hi_95"] < 0 else "no gain measured")
            p = "< 0.001" if t["p"] < 0.001 else f"{t['p']:.3f}"
            name = "**average**" if b == "average" else b
            print(f"| {g['protocol']} | {name} | {side[0]} | {side[1]} | {100 * t['mean']:+.2f} | "
                  f"[{100 * t['low_95']:+.2f}, {100 * t['hi_95']:+.2f}] | {p} | {t['n']} ({g['paired_by']}) | {read} |")


def runs(paths):
    print("| arm | benchmark | seed | best epoch | stopped at | best valid | test at best | seconds |")
    print("|---|---|--:|--:|--:|--:|--:|--:|")
    for path in sorted(paths):
        with open(path) as f:
            res = json.load(f)
        arm = os.path.basename(path).split("-" + res["dataset"]["name"])[0]
        for r in res["runs"]:
            print(f"| {arm} | {short(res['dataset']['name'])} | {r['seed']} | {r['best_epoch']} | {r.get('stopped_at', 'none')} | "
                  f"{100 * r['best_valid']:.2f} | {100 * r['test_at_best']:.2f} | {r['seconds']:.0f} |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "select":
        select(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "runs":
        runs(sys.argv[2:])
    elif len(sys.argv) >= 3 and sys.argv[1] == "card":
        card(sys.argv[2:])
    elif len(sys.argv) >= 5 and sys.argv[1] == "frozen":
        frozen(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        sys.exit(__doc__)
