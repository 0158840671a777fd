package metrics

import (
	"cmp"
	"slices"
)

// TopCounter counts items of a stream in bounded memory and reports the most
// frequent ones: the space-saving algorithm of Metwally, Agrawal and El
// Abbadi (2005). It keeps at most Capacity counters; an item that arrives
// when all are taken replaces the one with the smallest count and inherits
// that count as its possible overcount. Counts are exact while no more than
// Capacity distinct items have been seen; after that every item whose true
// count exceeds the total over Capacity is kept, with a count at most that
// much too high.
type TopCounter struct {
	Capacity int
	counts   map[string]*topCount
	total    int64
}

type topCount struct {
	count, over int64 // count, and how much of it may belong to items it replaced
}

// NewTopCounter keeps at most capacity counters.
func NewTopCounter(capacity int) *TopCounter {
	return &TopCounter{Capacity: capacity, counts: make(map[string]*topCount, capacity)}
}

// Add counts one occurrence of item.
func (t *TopCounter) Add(item string) {
	t.total++
	if c, ok := t.counts[item]; ok {
		c.count++
		return
	}
	if len(t.counts) < t.Capacity {
		t.counts[item] = &topCount{count: 1}
		return
	}
	// Replace the smallest counter (the earliest in item order on ties, so
	// that the result does not depend on map iteration).
	var least string
	var smallest *topCount
	for k, c := range t.counts {
		if smallest == nil || c.count < smallest.count || c.count == smallest.count && k < least {
			least, smallest = k, c
		}
	}
	delete(t.counts, least)
	t.counts[item] = &topCount{count: smallest.count + 1, over: smallest.count}
}

// Total is the number of occurrences counted.
func (t *TopCounter) Total() int64 { return t.total }

// Counted is an item and its count; Over is how much of Count may belong to
// other items (0: exact).
type Counted struct {
	Item        string
	Count, Over int64
}

// Top is the n items with the largest counts, largest first, ties by item.
func (t *TopCounter) Top(n int) []Counted {
	out := make([]Counted, 0, len(t.counts))
	for k, c := range t.counts {
		out = append(out, Counted{Item: k, Count: c.count, Over: c.over})
	}
	slices.SortFunc(out, func(a, b Counted) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Item, b.Item)
	})
	return out[:min(n, len(out))]
}
