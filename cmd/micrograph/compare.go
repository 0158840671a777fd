package main

import (
	"fmt"

	"github.com/micrograph/micrograph/trainer/evaluate/suite"
	"github.com/micrograph/micrograph/trainer/report"
)

func runCompare(args []string) error {
	fs := newFlags("compare", "RESULT.json... | [NAME=]SUITE...",
		"Prints the results of finetune and linear-eval runs side by side as a Markdown table:\n"+
			"test and valid ROC-AUC (%, mean ± std over runs) of each, e.g. with and without pre-training,\n"+
			"or RMSE for results on regression tasks (results of one metric only).\n"+
			"Results of linear-eval --label-fractions add a second table: test ROC-AUC by share of the\n"+
			"train labels fitted on, one column per share.\n"+
			"Given suite results instead (a suite's --out folder or its suite.json, each NAME=PATH or named\n"+
			"after its folder), sets pre-training methods side by side as the paper's Table 3 does: per\n"+
			"evaluation and protocol, each method's test ROC-AUC per benchmark and on average, its Δ against\n"+
			"its random encoders, and the first method minus each other one, paired by pre-training seed\n"+
			"(list every suite's --encoder files in the same seed order) with its p-value.")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{fmt.Errorf("no result files")}
	}
	if suite.IsArm(fs.Arg(0)) {
		return compareSuites(fs.Args())
	}
	return report.CompareResults(stdout, fs.Args())
}

// compareSuites prints suite.CompareArms of the suites named (suite.ParseArm).
func compareSuites(args []string) error {
	arms, err := suite.ReadArms(args)
	if err != nil {
		return fmt.Errorf("%w (compare suites with suites)", err)
	}
	c, err := suite.CompareArms(arms)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, c.Markdown())
	return nil
}
