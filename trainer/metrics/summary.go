package metrics

import (
	"encoding/json"
	"math"
)

// Value is a logged number; NaN and ±Inf, which JSON cannot hold, are
// written as null and read back as NaN.
type Value float64

// MarshalJSON writes null for non-finite values.
func (v Value) MarshalJSON() ([]byte, error) {
	f := float64(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

// UnmarshalJSON reads null as NaN.
func (v *Value) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = Value(math.NaN())
		return nil
	}
	var f float64
	err := json.Unmarshal(b, &f)
	*v = Value(f)
	return err
}

// Stat is a metric over runs: mean and population standard deviation (as
// numpy's std, which the papers of docs/method.md §7 report) of the defined values,
// and how many there were.
type Stat struct {
	Mean Value `json:"mean"`
	Std  Value `json:"std"`
	N    int   `json:"n"`
}

// StatOf summarises xs, leaving out NaN (a task without both classes in a run).
func StatOf(xs []float64) Stat {
	var sum float64
	n := 0
	for _, x := range xs {
		if !math.IsNaN(x) {
			sum += x
			n++
		}
	}
	if n == 0 {
		return Stat{Mean: Value(math.NaN()), Std: Value(math.NaN())}
	}
	mean := sum / float64(n)
	var sq float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			sq += (x - mean) * (x - mean)
		}
	}
	return Stat{Mean: Value(mean), Std: Value(math.Sqrt(sq / float64(n))), N: n}
}

// Mean is the mean of xs.
func Mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// IsFinite reports whether v is neither NaN nor ±Inf.
func IsFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
