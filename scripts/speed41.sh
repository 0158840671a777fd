#!/bin/bash
# Issue 41's measurement, in one run on an idle machine (about 15 minutes at
# the paper's sizes on 2 cores): does the default's second core pay here?
#
#   1. The machine: lscpu's model and flags, the commits, uptime before and
#      after (figures count only from a load well under 1).
#   2. The per-rank profile of the default split (bench's ranks: atoms and
#      molecules per step, seconds computing, waiting for batches and in each
#      kind of collective), with the build before issue 41's changes to the
#      split (--before: main with only the profile added) and with this one.
#   3. --rounds alternating rounds (default 3) of: this build on one thread
#      (core 0); the default on the --cores first cores with the build before
#      and with this one; the ceiling, --cores unrelated one-thread benches at
#      once, one per core, their molecules/s summed. Per round, the ratios of
#      the default to one thread and to the ceiling: the acceptance asks
#      ≥ 1.6× and ≥ 0.85 on 2 cores.
#   4. `pretrain --nproc 1 --threads 1` for --check-steps steps (default 30)
#      with --main (main before issue 41) and with this build: log.jsonl's
#      losses must be the same bits (its timing field aside).
#
# Everything stays under --out: machine.txt, profile-*.json, raw.tsv, the
# runs' logs, and summary.md, which it prints at the end.
#
# Usage: bash scripts/speed41.sh --before BIN --main BIN [--bin BIN] [--out DIR]
#          [--data DIR] [--cores N] [--rounds N] [--check-steps N] [--smoke]
#   --before       micrograph built at the commit that added the profile, before
#                  the split's changes (its bench reports ranks)
#   --main         micrograph of main before issue 41 (for the bit-for-bit check)
#   --bin          this build (default bin/micrograph)
#   --data         an OGB dataset folder (default ../shared/data/ogb/ogbg_molhiv)
#   --cores        cores for the default and the ceiling (default 2)
#   --smoke        the script's logic at tiny sizes on a synthetic dataset (its
#                  figures mean nothing)
set -euo pipefail
cd "$(dirname "$0")/.."

out=out/speed41
shared=${MICROGRAPH_SHARED:-../shared}
data=""
bin=bin/micrograph
before=""
main=""
cores=2
rounds=3
check_steps=30
smoke=0
python=/usr/bin/python3
while [[ $# -gt 0 ]]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	--data) data=$2; shift 2 ;;
	--bin) bin=$2; shift 2 ;;
	--before) before=$2; shift 2 ;;
	--main) main=$2; shift 2 ;;
	--cores) cores=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--check-steps) check_steps=$2; shift 2 ;;
	--smoke) smoke=1; shift ;;
	*) echo "speed41.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
for b in "$bin" "$before" "$main"; do
	[[ -n $b && -x $b ]] || { echo "speed41.sh: --before and --main are needed, and each must be a micrograph binary ($b)" >&2; exit 2; }
done
((cores >= 2 && cores <= $(nproc))) || { echo "speed41.sh: --cores $cores: 2 to $(nproc)" >&2; exit 2; }
mkdir -p "$out/logs"
rm -rf "$out/logs/"* "$out/check-"*

sizes=(--steps 20 --warmup 3)
if ((smoke)); then
	rounds=1
	check_steps=3
	# A batch of 128: the default gives each process at least 64 molecules.
	sizes=(--batch-size 128 --hidden 16 --layers 2 --motifs 4 --steps 2 --warmup 1)
	if [[ -z $data ]]; then
		data=$out/synth
		rm -rf "$data"
		"$bin" synth --out "$data" --molecules 200 --seed 1 >/dev/null
	fi
fi
data=${data:-$shared/data/ogb/ogbg_molhiv}
[[ -d $data ]] || { echo "speed41.sh: no dataset folder $data (--data)" >&2; exit 2; }
cache=$out/cache
all=0-$((cores - 1))

{
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown) (this build: $bin; before: $before; main: $main)"
	echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores at hand, $cores used"
	echo "cpu family/model: $(lscpu | sed -n 's/^CPU family: *//p' | head -1)/$(lscpu | sed -n 's/^Model: *//p' | head -1); vendor $(lscpu | sed -n 's/^Vendor ID: *//p' | head -1); hypervisor $(lscpu | sed -n 's/^Hypervisor vendor: *//p' | head -1)"
	echo "flags: $(lscpu | grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' | sort -u | tr '\n' ' ')"
	echo "uptime before: $(uptime)"
} >"$out/machine.txt"
lscpu >"$out/lscpu.txt"

# bench LOG CPUS BIN ARGS...: one bench on CPUS, its JSON line in LOG.json.
bench() {
	local log=$1 cpus=$2 b=$3
	shift 3
	if ! taskset -c "$cpus" "$b" bench --data "$data" --device cpu --cache "$cache" "${sizes[@]}" "$@" \
		>"$log.out" 2>"$log.err"; then
		echo "speed41.sh: $log failed:" >&2
		tail -5 "$log.err" >&2
		exit 1
	fi
	grep '^{' "$log.out" | tail -1 >"$log.json"
}

rate() { "$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["molecules_per_s"])' "$1"; }

# 2. The profiles (the default on the cores).
bench "$out/profile-before" "$all" "$before"
bench "$out/profile-after" "$all" "$bin"
echo "profiles: before $(rate "$out/profile-before.json"), after $(rate "$out/profile-after.json") molecules/s" >&2

# 3. The rounds.
printf 'round\tconfig\tmolecules_per_s\n' >"$out/raw.tsv"
for round in $(seq 1 "$rounds"); do
	l=$out/logs/r$round
	bench "$l-one" 0 "$bin" --threads 1
	printf '%s\tone\t%s\n' "$round" "$(rate "$l-one.json")" >>"$out/raw.tsv"
	bench "$l-before" "$all" "$before"
	printf '%s\tdefault_before\t%s\n' "$round" "$(rate "$l-before.json")" >>"$out/raw.tsv"
	bench "$l-after" "$all" "$bin"
	printf '%s\tdefault\t%s\n' "$round" "$(rate "$l-after.json")" >>"$out/raw.tsv"
	pids=()
	for ((i = 0; i < cores; i++)); do
		bench "$l-ceiling-$i" "$i" "$bin" --threads 1 &
		pids+=($!)
	done
	sum=0
	for i in "${!pids[@]}"; do
		wait "${pids[$i]}" || { echo "speed41.sh: round $round, ceiling copy $i failed" >&2; exit 1; }
		sum=$("$python" -c "print($sum + $(rate "$l-ceiling-$i.json"))")
	done
	printf '%s\tceiling\t%s\n' "$round" "$sum" >>"$out/raw.tsv"
	echo "round $round: $(tail -4 "$out/raw.tsv" | cut -f2,3 | tr '\t\n' ' ')" >&2
done

# 4. --nproc 1 --threads 1, bit for bit against main.
for who in main this; do
	b=$bin
	[[ $who == main ]] && b=$main
	arch=()
	((smoke)) && arch=(--batch-size 128 --hidden 16 --layers 2 --motifs 4)
	if ! taskset -c 0 "$b" pretrain --data "$data" --run "$out/check-$who" --device cpu --cache "$cache" \
		--nproc 1 --threads 1 --max-steps "$check_steps" --seed 1 "${arch[@]}" >"$out/logs/check-$who.out" 2>&1; then
		echo "speed41.sh: the $who build's pretrain failed:" >&2
		tail -5 "$out/logs/check-$who.out" >&2
		exit 1
	fi
done
echo "uptime after: $(uptime)" >>"$out/machine.txt"

"$python" - "$out" >"$out/summary.md" <<'PY'
import collections, json, statistics, sys
out = sys.argv[1]
print(open(f"{out}/machine.txt").read().rstrip().replace("\n", "  \n"))
print()
kinds = ["sinkhorn", "norm_forward", "norm_backward", "negatives_forward", "negatives_backward",
         "loss_weights", "losses", "gradients", "other"]
print("**Per-rank profile of the default** (ms per step; collectives: time issuing and waiting, calls per step in brackets)")
print()
print("| build | molecules/s | rank | atoms | molecules | step | computing | data wait | in collectives | " + " | ".join(kinds) + " |")
print("|---|--:|--:|--:|--:|--:|--:|--:|--:|" + "--:|" * len(kinds))
for build in ["before", "after"]:
    d = json.load(open(f"{out}/profile-{build}.json"))
    if not d.get("ranks"):
        print(f"| {build} | {d['molecules_per_s']:,.0f} | (one process: no split) |" + " |" * (7 + len(kinds)))
    for r in d.get("ranks", []):
        cells = []
        for k in kinds:
            c = r["collectives"].get(k)
            cells.append(f"{1e3 * c['s_per_step']:.1f} ({c['calls_per_step']:g})" if c else "—")
        print(f"| {build} | {d['molecules_per_s']:,.0f} | {r['rank']} | {r['atoms_per_step']:,.0f} | {r['molecules_per_step']:g} | "
              f"{1e3 * r['s_per_step']:.1f} | {1e3 * r['compute_s_per_step']:.1f} | {1e3 * r['data_wait_s_per_step']:.1f} | "
              f"{1e3 * r['collectives_s_per_step']:.1f} | " + " | ".join(cells) + " |")
print()
rows = [l.rstrip("\n").split("\t") for l in open(f"{out}/raw.tsv")][1:]
by = collections.defaultdict(dict)
for round_, config, rate in rows:
    by[int(round_)][config] = float(rate)
print("**Rounds** (molecules/s; the default and the ceiling on the same cores, one thread on one core)")
print()
print("| round | one thread | default before | default | ceiling | default / one thread | default / ceiling | before / ceiling |")
print("|--:|--:|--:|--:|--:|--:|--:|--:|")
ratios = collections.defaultdict(list)
for r in sorted(by):
    v = by[r]
    a, b, c = v["default"] / v["one"], v["default"] / v["ceiling"], v["default_before"] / v["ceiling"]
    for k, x in (("one", a), ("ceiling", b), ("before", c)):
        ratios[k].append(x)
    print(f"| {r} | {v['one']:,.0f} | {v['default_before']:,.0f} | {v['default']:,.0f} | {v['ceiling']:,.0f} | {a:.2f}× | {b:.2f} | {c:.2f} |")
med = {k: statistics.median(v) for k, v in ratios.items()}
print(f"| median | | | | | **{med['one']:.2f}×** | **{med['ceiling']:.2f}** | {med['before']:.2f} |")
print()
print(f"Acceptance (2 cores): default ≥ 1.6× one thread: {'met' if min(ratios['one']) >= 1.6 else 'NOT met'} in every round "
      f"({sum(x >= 1.6 for x in ratios['one'])} of {len(ratios['one'])}); ≥ 0.85 of the ceiling: "
      f"{'met' if min(ratios['ceiling']) >= 0.85 else 'NOT met'} in every round ({sum(x >= 0.85 for x in ratios['ceiling'])} of {len(ratios['ceiling'])}).")
print()
def losses(run):
    recs = [json.loads(l) for l in open(f"{out}/check-{run}/log.jsonl")]
    for r in recs:
        r.pop("molecules_per_s", None)
    return recs
a, b = losses("main"), losses("this")
same = a == b
print(f"`pretrain --nproc 1 --threads 1`, {len(b)} steps: log.jsonl (without molecules_per_s) "
      + ("**identical** to main's, bit for bit." if same else f"**differs** from main's (first at step {next((x['step'] for x, y in zip(a, b) if x != y), '?')})."))
PY
cat "$out/summary.md"
