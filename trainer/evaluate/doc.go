// Package evaluate measures one encoder on one downstream dataset of
// docs/method.md §7 under one split protocol (Protocol): fine-tuning
// (Finetune) and linear evaluation on frozen embeddings (LinearEval), both
// an Evaluation. Package trainer/evaluate/suite runs them over benchmarks,
// protocols and encoders and tests the differences.
// Classification tasks are scored by ROC-AUC; regression tasks (labels other
// than 0 and 1, data.Dataset.TaskTypes) by RMSE and MAE, fine-tuned on
// standardised labels and probed with exact ridge regression (linfit.FitRidge).
package evaluate
