// Package diagnose measures what an encoder makes of a fixed sample of
// molecules (collapse, motif usage, subgraph sizes, saturation, gradients per
// loss part, batch-norm drift, linear probes), to find why pre-training helps
// or does not (docs/fidelity.md).
package diagnose
