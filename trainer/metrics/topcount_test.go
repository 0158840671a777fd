package metrics

import (
	"fmt"
	"slices"
	"testing"
)

// Below its capacity the counter is exact; above it, the space-saving bounds
// hold: every item more frequent than total/capacity is kept, its count is
// at least its true count and at most that plus total/capacity, and
// count − over never exceeds the true count.
func TestTopCounter(t *testing.T) {
	c := NewTopCounter(4)
	for _, s := range []string{"b", "a", "b", "c", "b", "a"} {
		c.Add(s)
	}
	if got := c.Top(5); !slices.Equal(got, []Counted{{"b", 3, 0}, {"a", 2, 0}, {"c", 1, 0}}) {
		t.Errorf("exact counts %v", got)
	}

	c = NewTopCounter(10)
	truth := map[string]int64{}
	add := func(s string) { c.Add(s); truth[s]++ }
	for i := range 1000 {
		switch {
		case i%5 < 2:
			add("heavy") // 400
		case i%10 == 2:
			add("medium") // 100
		default:
			add(fmt.Sprintf("rare-%d", i)) // 500 distinct
		}
	}
	bound := c.Total() / int64(c.Capacity)
	top := c.Top(10)
	if len(top) != 10 || top[0].Item != "heavy" || top[1].Item != "medium" {
		t.Fatalf("top %v, want heavy, then medium", top)
	}
	for _, x := range top {
		n := truth[x.Item]
		if x.Count < n || x.Count > n+bound || x.Count-x.Over > n {
			t.Errorf("%s: count %d (over %d), true %d, bound %d", x.Item, x.Count, x.Over, n, bound)
		}
	}
}
