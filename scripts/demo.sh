#!/usr/bin/env bash
# The job behind `make run`: micrograph end to end on its built-in synthetic
# dataset, sized for a few minutes on two CPU cores (a GPU is used when one
# works), answering "did pre-training learn something useful?" with the two
# measures the synthetic data's ground truth allows (docs/demo.md):
#
#   1. synth        2000 molecules of planted functional groups
#   2. pretrain     MICRO-Graph, 16 motif slots (one per planted group)
#   3. export       the encoder, for fine-tuning here or in PyTorch
#   4. linear-eval  frozen pre-trained encoder vs frozen random encoder of the
#                   same architecture, on 1 %, 5 %, 20 % and 100 % of the
#                   train labels (the same molecules for both), SEEDS seeds
#   5. motifs, plot the motif report with the NMI between motifs and planted
#                   groups after pre-training and before it; the loss curves
#   6. compare      the tables
#
# Everything goes to OUT (default out/demo), replaced on every run.
# EPOCHS and SEEDS override the sizes; MICROGRAPH overrides the binary.
set -euo pipefail

bin=${MICROGRAPH:-bin/micrograph}
out=${OUT:-out/demo}
epochs=${EPOCHS:-150}
seeds=${SEEDS:-5}
arch=(--hidden 128 --layers 3)
fractions=0.01,0.05,0.2,1

start=$SECONDS
rm -rf "$out"
mkdir -p "$out"

step() { printf '\n== %s\n' "$*" >&2; }

step "synthetic dataset → $out/synth"
"$bin" synth --out "$out/synth" --molecules 2000 --seed 1

step "pre-training, $epochs epochs → $out/run"
"$bin" pretrain --data "$out/synth" --run "$out/run" "${arch[@]}" --motifs 16 \
	--batch-size 64 --epochs "$epochs" --checkpoint-every 200 --log-every 5 --seed 1

step "export → $out/encoder.pt"
"$bin" export --run "$out/run" --out "$out/encoder.pt"

# The two evaluations run side by side, one thread each: the fits are too
# small to gain from a second thread, and a shared core slows them down.
step "linear evaluation on $fractions of the train labels, pre-trained and random encoders side by side, $seeds seeds each"
linear=(--data "$out/synth" --seeds "$seeds" --label-fractions "$fractions" --threads 1)
"$bin" linear-eval "${linear[@]}" --encoder "$out/encoder.pt" \
	--out "$out/linear-eval-pretrained.json" >"$out/linear-eval-pretrained.log" 2>&1 &
pretrained=$!
"$bin" linear-eval "${linear[@]}" "${arch[@]}" \
	--out "$out/linear-eval-random.json" >"$out/linear-eval-random.log" 2>&1 &
random=$!
status=0
wait "$pretrained" || status=$?
wait "$random" || status=$?
cat "$out/linear-eval-pretrained.log" "$out/linear-eval-random.log" >&2
if [ "$status" != 0 ]; then
	exit "$status"
fi

step "motif report and loss curves"
"$bin" motifs --run "$out/run" --out "$out/motifs.html" | tee "$out/motifs.txt"
"$bin" plot --run "$out/run" --out "$out/curves.svg"

checkpoint=$(ls "$out"/run/checkpoints/step-*.pt | tail -n 1)
step "did pre-training learn something useful?"
{
	echo "Motif recovery, NMI between the atoms' motifs and their planted groups (1: the motifs are the groups):"
	echo
	sed -n 's/^NMI between motifs and planted groups: /    /p' "$out/motifs.txt"
	echo
	echo "Linear probes on the frozen encoders (test ROC-AUC %, mean ± std over $seeds seeds):"
	echo
	"$bin" compare "$out/linear-eval-pretrained.json" "$out/linear-eval-random.json"
} | tee "$out/table.md"

cat <<EOF2

done in $((SECONDS - start)) s
  checkpoint     $checkpoint
  encoder        $out/encoder.pt (+ $out/encoder.json)
  motif report   $out/motifs.html
  loss curves    $out/curves.svg
  tables         $out/table.md
EOF2
