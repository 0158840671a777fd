#!/usr/bin/env bash
# The job behind `make run`: micrograph end to end on its built-in synthetic
# dataset, sized for a few minutes on two CPU cores (a GPU is used when one
# works).
#
#   1. synth        2000 molecules of planted functional groups
#   2. pretrain     MICRO-Graph, 16 motif slots (one per planted group)
#   3. export       the encoder, for fine-tuning here or in PyTorch
#   4. linear-eval  frozen pre-trained encoder vs frozen random encoder of the
#                   same architecture, 3 seeds each
#   5. motifs, plot the motif report and the loss curves
#   6. compare      the table
#
# Everything goes to OUT (default out/demo), replaced on every run.
# EPOCHS and SEEDS override the sizes; MICROGRAPH overrides the binary.
set -euo pipefail

bin=${MICROGRAPH:-bin/micrograph}
out=${OUT:-out/demo}
epochs=${EPOCHS:-150}
seeds=${SEEDS:-3}
arch=(--hidden 128 --layers 3)

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

step "linear evaluation, pre-trained and random encoders, $seeds seeds each"
"$bin" linear-eval --data "$out/synth" --encoder "$out/encoder.pt" --seeds "$seeds" \
	--out "$out/linear-eval-pretrained.json"
"$bin" linear-eval --data "$out/synth" "${arch[@]}" --seeds "$seeds" \
	--out "$out/linear-eval-random.json"

step "motif report and loss curves"
"$bin" motifs --run "$out/run" --out "$out/motifs.html"
"$bin" plot --run "$out/run" --out "$out/curves.svg"

step "linear evaluation on the synthetic tasks (test at the best valid λ)"
"$bin" compare "$out/linear-eval-pretrained.json" "$out/linear-eval-random.json" | tee "$out/table.md"

checkpoint=$(ls "$out"/run/checkpoints/step-*.pt | tail -n 1)
cat <<EOF

done in $((SECONDS - start)) s
  checkpoint     $checkpoint
  encoder        $out/encoder.pt (+ $out/encoder.json)
  motif report   $out/motifs.html
  loss curves    $out/curves.svg
  table          $out/table.md
EOF
