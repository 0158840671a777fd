package runfolder_test

import (
	"testing"

	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// CheckResume names each shape setting a resume would change, with both
// values, and lets the run's length change.
func TestCheckResumeNamesShapeDifferences(t *testing.T) {
	saved := runfolder.DefaultConfig()
	for _, tc := range []struct {
		name  string
		alter func(*runfolder.Config)
		want  string
	}{
		{"length", func(c *runfolder.Config) { c.Epochs, c.MaxSteps = 7, 30 }, ""},
		{"width and motifs", func(c *runfolder.Config) { c.Model.Encoder.Hidden, c.Model.Motifs = 64, 10 },
			"the model's shape differs from the run's: model.encoder.hidden 300 in the run, 64 asked; model.motifs 20 in the run, 10 asked"},
		{"objective", func(c *runfolder.Config) { c.Model = model.ReleasedModelConfig() },
			"the model's shape differs from the run's: objective paper in the run, released asked"},
		{"learning rate", func(c *runfolder.Config) { c.LR = 0.01 },
			"lr is 0.001 in the run but 0.01 was asked; only the run's length and where it runs can change on resume"},
	} {
		asked := saved
		tc.alter(&asked)
		err := runfolder.CheckResume(saved, asked)
		if got := errString(err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
