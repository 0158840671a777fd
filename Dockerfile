# micrograph on NVIDIA GPUs. The base image's PyTorch provides the CUDA
# libtorch the shim is built against (third_party/libtorch.sh, pip mode); Go and
# RDKit are added. Build: docker build -t micrograph .
FROM pytorch/pytorch:2.7.1-cuda12.8-cudnn9-devel

ARG GO_VERSION=1.26.8
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates curl g++ make librdkit-dev libboost-dev \
 && rm -rf /var/lib/apt/lists/* \
 && curl -fsSL "https://go.dev/dl/go${GO_VERSION}.linux-amd64.tar.gz" | tar -C /usr/local -xz
ENV PATH=/usr/local/go/bin:$PATH PYTHON=python

WORKDIR /opt/micrograph
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN make build && ln -s /opt/micrograph/bin/micrograph /usr/local/bin/micrograph
ENTRYPOINT ["micrograph"]
