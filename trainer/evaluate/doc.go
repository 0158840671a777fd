// Package evaluate measures an encoder on the downstream benchmarks of
// docs/method.md §7: fine-tuning (Finetune), linear evaluation on frozen
// embeddings (LinearEval), and Suite, which runs either of them (a Protocol)
// over benchmarks, split protocols and encoders and tests the differences.
package evaluate
