package runfolder_test

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/micrograph/micrograph/trainer/metrics"
	"github.com/micrograph/micrograph/trainer/runfolder"
)

// A log line holds its fields in the documented order, the parts under
// their own names (so a paper run's lines are those written before parts
// had names), and reads back to the same record; a non-finite value is
// null and reads back as NaN.
func TestLogRecordLine(t *testing.T) {
	cases := []struct {
		rec  runfolder.LogRecord
		line string
	}{
		{runfolder.LogRecord{Step: 3, Epoch: 1, Loss: 2.5, Parts: paperParts(1, 0.5, 0.25, 4), Subgraphs: 12, MoleculesPerS: 100, LR: 0.001},
			`{"step":3,"epoch":1,"loss":2.5,"node_mot":1,"mot_sub":0.5,"reg":0.25,"contra":4,"subgraphs":12,"molecules_per_s":100,"lr":0.001}`},
		{runfolder.LogRecord{Step: 7, Epoch: 2, Loss: 0.5, Parts: []runfolder.LossPart{{Name: "motif", Value: 0.1}, {Name: "contra", Value: 8}, {Name: "sampler", Value: -0.6}},
			Subgraphs: 800, MoleculesPerS: 250.5, LR: 0.001, Skipped: true},
			`{"step":7,"epoch":2,"loss":0.5,"motif":0.1,"contra":8,"sampler":-0.6,"subgraphs":800,"molecules_per_s":250.5,"lr":0.001,"skipped":true}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.rec)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.line {
			t.Errorf("line\n got %s\nwant %s", b, c.line)
		}
		var back runfolder.LogRecord
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, c.rec) {
			t.Errorf("read back %+v, want %+v", back, c.rec)
		}
	}
	nan := runfolder.LogRecord{Step: 1, Loss: metrics.Value(math.Inf(1)), Parts: paperParts(math.NaN(), 1, 1, 1)}
	b, _ := json.Marshal(nan)
	var back runfolder.LogRecord
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(back.Loss)) || !math.IsNaN(float64(back.Part("node_mot"))) || back.Part("mot_sub") != 1 || !math.IsNaN(float64(back.Part("sampler"))) {
		t.Errorf("non-finite values: %s read back as %+v", b, back)
	}
	if err := json.Unmarshal([]byte(`[1,2]`), &back); err == nil {
		t.Error("a JSON array read as a log line")
	}
}

// paperParts are a log record's parts under the paper objective.
func paperParts(nodeMot, motSub, reg, contra float64) []runfolder.LossPart {
	return []runfolder.LossPart{{Name: "node_mot", Value: metrics.Value(nodeMot)}, {Name: "mot_sub", Value: metrics.Value(motSub)},
		{Name: "reg", Value: metrics.Value(reg)}, {Name: "contra", Value: metrics.Value(contra)}}
}
