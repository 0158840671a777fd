package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/micrograph/micrograph/trainer"
)

// evaluation is what compare reads of a finetune or linear-eval result file.
type evaluation struct {
	Evaluation string                 `json:"evaluation"`
	Protocol   string                 `json:"protocol"`
	Dataset    trainer.DatasetSummary `json:"dataset"`
	Pretrained bool                   `json:"pretrained"`
	Test       trainer.Stat           `json:"test"`
	Valid      trainer.Stat           `json:"valid"`
	Seconds    float64                `json:"seconds"`
}

func runCompare(args []string) error {
	fs := newFlags("compare", "RESULT.json...",
		"Prints the results of finetune and linear-eval runs side by side as a Markdown table:\n"+
			"test and valid ROC-AUC (%, mean ± std over runs) of each, e.g. with and without pre-training.")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{fmt.Errorf("no result files")}
	}
	var rows []evaluation
	for _, path := range fs.Args() {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var e evaluation
		if err := json.Unmarshal(b, &e); err != nil || e.Evaluation == "" {
			return fmt.Errorf("%s is not a finetune or linear-eval result", path)
		}
		rows = append(rows, e)
	}
	printf("| result | dataset | evaluation | protocol | encoder | runs | test ROC-AUC (%%) | valid ROC-AUC (%%) |")
	printf("|:--|:--|:--|:--|:--|--:|--:|--:|")
	for i, e := range rows {
		encoder := "random (no pre-training)"
		if e.Pretrained {
			encoder = "pre-trained"
		}
		printf("| %s | %s | %s | %s | %s | %d | %s | %s |", filepath.Base(fs.Arg(i)), e.Dataset.Name,
			e.Evaluation, e.Protocol, encoder, e.Test.N, pct(e.Test), pct(e.Valid))
	}
	return nil
}

// pct writes a ROC-AUC summary in %; "—" when undefined (no valid part
// under cross-validation).
func pct(s trainer.Stat) string {
	if math.IsNaN(float64(s.Mean)) {
		return "—"
	}
	return fmt.Sprintf("%.2f ± %.2f", 100*s.Mean, 100*s.Std)
}
