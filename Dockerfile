# micrograph in an image. BASE picks the libtorch the shim is built against
# (third_party/libtorch.sh):
#
#   default  PyTorch's CUDA image: its PyTorch's libtorch (CUDA 12.8, NCCL),
#            for NVIDIA GPUs. Build: docker build -t micrograph .
#   Debian   a Debian 12 or 13 base (debian:12 or debian:13, or the one
#            scripts/image-test.sh makes with debootstrap): Debian's
#            libtorch, 1.13.1 or 2.6.0, CPU only.
#            Build: docker build --build-arg BASE=debian:13 -t micrograph:cpu .
#
# Go and Debian's RDKit are added to either.
ARG BASE=pytorch/pytorch:2.7.1-cuda12.8-cudnn9-devel
FROM ${BASE}

# Go comes from proxy.golang.org as the module golang.org/toolchain, the same
# archive `go` itself downloads when a go.mod asks for a newer toolchain (that
# proxy is reachable where go.dev is not). Module zips keep no file modes,
# hence the chmod.
ARG GO_VERSION=1.26.8
# A base whose Python has no PyTorch (Debian) gets Debian's: libtorch-dev to
# build against, libgloo-dev for c10d's Gloo backend, python3-torch to read
# exported encoders.
RUN torch=""; python3 -c 'import torch' 2>/dev/null || torch="libtorch-dev libgloo-dev python3-torch"; \
    apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates curl unzip g++ make librdkit-dev libboost-dev $torch \
 && rm -rf /var/lib/apt/lists/* \
 && curl -fsSL -o /tmp/go.zip "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go${GO_VERSION}.linux-amd64.zip" \
 && unzip -q /tmp/go.zip -d /tmp/go \
 && mv "/tmp/go/golang.org/toolchain@v0.0.1-go${GO_VERSION}.linux-amd64" /usr/local/go \
 && chmod +x /usr/local/go/bin/* /usr/local/go/pkg/tool/*/* \
 && rm -rf /tmp/go /tmp/go.zip
ENV PATH=/usr/local/go/bin:$PATH PYTHON=python

WORKDIR /opt/micrograph
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN make build && ln -s /opt/micrograph/bin/micrograph /usr/local/bin/micrograph
ENTRYPOINT ["micrograph"]
