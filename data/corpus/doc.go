// Package corpus is the sharded, memory-mapped pre-training corpus: Featurize
// writes one from a SMILES file in shards (resumable), Open maps the shards
// without reading them, and OpenPretrainSet opens what pre-training reads, a
// corpus or a dataset of package data, with the pre-training filter applied.
package corpus
