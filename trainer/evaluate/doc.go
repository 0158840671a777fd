// Package evaluate measures an encoder on the downstream benchmarks of
// docs/method.md §7: fine-tuning (Finetune), linear evaluation on frozen
// embeddings (LinearEval), and Suite, which runs either of them (a Protocol)
// over benchmarks, split protocols and encoders and tests the differences.
// Classification tasks are scored by ROC-AUC; regression tasks (labels other
// than 0 and 1, data.Dataset.TaskTypes) by RMSE and MAE, fine-tuned on
// standardised labels and probed with exact ridge regression (FitRidge).
package evaluate
