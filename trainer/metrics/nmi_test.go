package metrics_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/micrograph/micrograph/internal/testenv"
	"github.com/micrograph/micrograph/trainer/metrics"
)

func TestNMIHandComputed(t *testing.T) {
	tests := []struct {
		name string
		a, b []int
		want float64
	}{
		{"same partition, other names", []int{0, 0, 1, 1, 2}, []int{5, 5, 3, 3, 9}, 1},
		{"independent", []int{0, 0, 1, 1}, []int{0, 1, 0, 1}, 0},
		{"both constant", []int{1, 1, 1}, []int{4, 4, 4}, 1},
		// a = {0,0,1,1}, b = {0,0,0,1}: H(a) = ln 2, H(b) = −(¾ln¾ + ¼ln¼),
		// I = H(b) − H(b|a) = H(b) − ½·ln 2.
		{"refinement", []int{0, 0, 1, 1}, []int{0, 0, 0, 1},
			func() float64 {
				hb := -(0.75*math.Log(0.75) + 0.25*math.Log(0.25))
				return (hb - 0.5*math.Log(2)) / ((math.Log(2) + hb) / 2)
			}()},
	}
	for _, tc := range tests {
		if got := metrics.NMI(tc.a, tc.b); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: NMI = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNMIMatchesScikitLearn(t *testing.T) {
	py := testenv.Python(t, "sklearn")
	r := rand.New(rand.NewPCG(3, 1))
	var cases [][2][]int
	var ours []float64
	for range 20 {
		n, ka, kb := 10+r.IntN(300), 1+r.IntN(8), 1+r.IntN(8)
		a, b := make([]int, n), make([]int, n)
		for i := range a {
			a[i] = r.IntN(ka)
			b[i] = (a[i]*3 + r.IntN(kb)) % (kb + 2) // correlated with a
		}
		cases = append(cases, [2][]int{a, b})
		ours = append(ours, metrics.NMI(a, b))
	}
	in, _ := json.Marshal(cases)
	cmd := py.Command("-c", `
import json, sys
from sklearn.metrics import normalized_mutual_info_score as nmi
print(json.dumps([nmi(a, b) for a, b in json.loads(sys.stdin.read())]))`)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var theirs []float64
	if err := json.Unmarshal(out, &theirs); err != nil {
		t.Fatal(err)
	}
	for i := range ours {
		if math.Abs(ours[i]-theirs[i]) > 1e-9 {
			t.Errorf("case %d: NMI %.12f, scikit-learn %.12f", i, ours[i], theirs[i])
		}
	}
}
