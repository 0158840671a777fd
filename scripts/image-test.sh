#!/usr/bin/env bash
# `make image-test`: builds ./Dockerfile on a Debian base (Debian's CPU
# libtorch: 1.13 on Debian 12, 2.6 on Debian 13) and runs micrograph in the
# image, on a machine with neither a Docker daemon nor Docker Hub: buildah
# builds and runs the image, debootstrap makes the base from Debian's mirror.
#
#   scripts/image-test.sh [--debian 12|13]     (default 12; make image-test DEBIAN=13)
#
#   1. base     debootstrap Debian N (minbase) once, kept as
#               .cache/image/debian-N.tar, imported into buildah as
#               localhost/micrograph-base:debian-N (PATH set as debian:N sets it)
#   2. build    buildah bud --build-arg BASE=that -t localhost/micrograph:debian-N
#   3. run      in a container of the image: micrograph version; synth; a
#               20-step pretrain killed (SIGKILL) after its first checkpoint,
#               then --resume to step 20; export; python3's torch.load of the
#               export with weights_only=True
#
# Everything buildah stores stays in .cache/image/ (git-ignored; delete it to
# start over); the machine's apt sources are not touched. Needs root; installs
# Debian's buildah and debootstrap where they are missing. buildah
# runs with the vfs storage driver and chroot isolation, which need no kernel
# overlay support, no user namespaces and no OCI runtime. The container is
# removed on exit, nothing is left running.
set -euo pipefail
cd "$(dirname "$0")/.."

debian=12
while (($#)); do
	case $1 in
	--debian) debian=$2 && shift ;;
	*) echo "usage: image-test.sh [--debian 12|13]" >&2 && exit 2 ;;
	esac
	shift
done
case $debian in
12) suite=bookworm ;;
13) suite=trixie ;;
*) echo "image-test: --debian takes 12 or 13, not $debian" >&2 && exit 2 ;;
esac

cache=$PWD/.cache/image
base=localhost/micrograph-base:debian-$debian
image=localhost/micrograph:debian-$debian
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
bah() { buildah --root "$cache/storage" --runroot "$cache/run" --storage-driver vfs "$@"; }

missing=""
for c in buildah debootstrap; do command -v "$c" >/dev/null || missing="$missing $c"; done
if [ -n "$missing" ]; then
	echo "image-test: installing Debian's$missing" >&2
	# shellcheck disable=SC2086 # a list of package names
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
fi
mkdir -p "$cache"
start=$SECONDS
step() { printf '\n== [%ss] %s\n' "$((SECONDS - start))" "$*" >&2; }

# 1. The base, made once. debootstrap writes into a scratch folder that is
# tarred and deleted, so a half-made base is never taken for a whole one.
if [ ! -e "$cache/debian-$debian.tar" ]; then
	step "debootstrap Debian $debian → $cache/debian-$debian.tar"
	rm -rf "$cache/rootfs"
	debootstrap --variant=minbase "$suite" "$cache/rootfs" "$mirror"
	rm -rf "$cache/rootfs/var/cache/apt/archives/"*.deb "$cache/rootfs/var/lib/apt/lists/"*_Packages
	tar -C "$cache/rootfs" -cf "$cache/debian-$debian.tar.part" .
	mv "$cache/debian-$debian.tar.part" "$cache/debian-$debian.tar"
	rm -rf "$cache/rootfs"
fi
if ! bah inspect --type image "$base" >/dev/null 2>&1; then
	step "import the base as $base"
	ctr=$(bah from scratch)
	bah add "$ctr" "$cache/debian-$debian.tar" /
	bah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd bash "$ctr"
	bah commit --rm "$ctr" "$base"
fi

# 2. The image, from the same Dockerfile as the CUDA one. Where HTTPS goes
# through a proxy that re-signs it (as on the machine this was written on),
# the build must trust that proxy's CA as the host does: the host's local CAs
# are mounted read-only where Debian's ca-certificates, which the Dockerfile's
# first RUN installs, adds them to the image's bundle (so this test image's
# bundle keeps them).
ca=()
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
	ca=(-v /usr/local/share/ca-certificates:/usr/local/share/ca-certificates:ro)
fi
# No --layers: with vfs every layer is a full copy of the file system (about
# 2.5 GB each here), so the steps run in one container committed once; and
# --force-rm removes that container when a step fails.
step "build $image from ./Dockerfile (BASE=$base)"
bah bud --isolation chroot --pull=never --layers=false --force-rm "${ca[@]}" --build-arg BASE="$base" -t "$image" .
bah images "$image"

# 3. micrograph in a container of the image.
ctr=$(bah from --pull=never "$image")
trap 'bah rm "$ctr" >/dev/null' EXIT
step "run in $ctr"
# shellcheck disable=SC2016 # expanded by the container's bash
bah run --isolation chroot "$ctr" -- bash -euo pipefail -c '
	cd /tmp && rm -rf synth run encoder.pt encoder.json
	micrograph version
	micrograph synth --out synth --molecules 300 --seed 1
	# The default architecture, one thread: slow enough that the kill lands
	# well before step 20.
	flags=(--data synth --run run --batch-size 16 --max-steps 20 --checkpoint-every 5 --threads 1 --seed 1)
	micrograph pretrain "${flags[@]}" &
	pid=$!
	until [ -e run/checkpoints/step-000000005.pt ]; do sleep 0.1; done
	kill -KILL "$pid"
	wait "$pid" && { echo "pretrain was not killed" >&2; exit 1; } || echo "pretrain killed (status $?) after $(wc -l <run/log.jsonl) logged steps; checkpoints: $(ls run/checkpoints)"
	micrograph pretrain --run run --resume
	tail -n 1 run/log.jsonl | grep -q "^{\"step\":20," || { echo "the resumed run did not reach step 20" >&2; exit 1; }
	micrograph export --run run --out encoder.pt
	ls -l encoder.pt encoder.json
	if command -v python3 >/dev/null && python3 -c "import torch" 2>/dev/null; then
		python3 -c "import torch; sd = torch.load(\"encoder.pt\", weights_only=True); print(\"torch\", torch.__version__, \"read\", len(sd), \"tensors, e.g.\", next(iter(sd)), tuple(next(iter(sd.values())).shape))"
	else
		echo "no PyTorch in the image: the export was not read back"
	fi
'
step "image test passed"
