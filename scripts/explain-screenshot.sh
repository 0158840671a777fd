#!/usr/bin/env bash
# The screenshot of explain's page in docs/images/explain.png: the shipped model explains
# a few well-known drugs, and Debian's Chromium, headless, renders the page it writes.
#
#   scripts/explain-screenshot.sh [OUT.png]
#
# Needs bin/micrograph (make) and chromium (apt-get install chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/images/explain.png}
bin=${MICROGRAPH:-bin/micrograph}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/drugs.csv" <<'CSV'
name,smiles
aspirin,CC(=O)Oc1ccccc1C(=O)O
caffeine,CN1C=NC2=C1C(=O)N(C(=O)N2C)C
paracetamol,CC(=O)Nc1ccc(O)cc1
ibuprofen,CC(C)Cc1ccc(cc1)C(C)C(=O)O
nicotine,CN1CCC[C@H]1c1cccnc1
sulfamethoxazole,Cc1cc(NS(=O)(=O)c2ccc(N)cc2)no1
zidovudine,Cc1cn([C@H]2C[C@H](N=[N+]=[N-])[C@@H](CO)O2)c(=O)[nH]c1=O
diazepam,CN1C(=O)CN=C(c2ccccc2)c2cc(Cl)ccc21
CSV
"$bin" explain --data "$tmp/drugs.csv" --out "$tmp/drugs.jsonl" --page "$tmp/drugs.html" --device cpu
mkdir -p "$(dirname "$out")"
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync \
	--user-data-dir="$tmp/profile" --hide-scrollbars --window-size=1240,1500 \
	--screenshot="$out" "file://$tmp/drugs.html" 2>/dev/null
echo "screenshot: $out"
