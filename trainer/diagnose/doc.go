// Package diagnose measures what a pre-trained (or random) encoder makes of a
// fixed sample of molecules: collapse of graph and node embeddings, motif
// usage, subgraph sizes, saturation of the softmaxes, the gradient each loss
// part sends into the encoder, batch-norm drift, dropout, and linear probes
// with and without the projection W_e, to find why pre-training helps or
// does not (the figures of docs/fidelity.md). Run (diagnose.go) loads the
// model and drives the passes; types.go holds its options and result,
// accumulator.go the per-batch figures, probes.go the linear probes.
package diagnose
