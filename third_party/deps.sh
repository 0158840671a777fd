#!/bin/sh
# Installs the Debian 12 packages micrograph needs and does not find. Versions
# are Debian 12's: libtorch-dev 1.13.1, librdkit-dev 2022.09, python3-torch 1.13.1.
#   libtorch-dev       the C++ libtorch, unless third_party/libtorch.sh finds another
#   librdkit-dev       RDKit's C++ library, with libboost-dev for its headers
#   python3-torch      torch.load in interoperability tests, unless $PYTHON has torch
#   python3-pandas     reading featurised folders the way OGB's loaders do, in data's tests
#   python3-sklearn    the reference ROC-AUC in trainer's tests
set -eu
cd "$(dirname "$0")/.."

need=""
want() { dpkg -s "$1" >/dev/null 2>&1 || need="$need $1"; }

if [ "$(sh third_party/libtorch.sh | sed -n 's/^TORCH_MODE=//p')" = none ]; then want libtorch-dev; fi
want librdkit-dev
want libboost-dev
want python3-pandas
want python3-sklearn
if ! ${PYTHON:-python3} -c 'import torch' 2>/dev/null; then want python3-torch; fi

if [ -z "$need" ]; then exit 0; fi
echo "installing:$need"
if [ "$(id -u)" != 0 ]; then sudo=sudo; else sudo=; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $need
