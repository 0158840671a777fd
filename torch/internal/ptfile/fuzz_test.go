package ptfile

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// FuzzRead feeds Read mutations of valid files. Read must never panic, and
// whatever it accepts must survive Write and Read unchanged.
func FuzzRead(f *testing.F) {
	rng := rand.New(rand.NewPCG(13, 14))
	var small []Entry
	for _, d := range allDTypes {
		small = append(small, Entry{d.String(), randTensor(rng, d, 2, 3)})
	}
	small = append(small,
		Entry{"scalar", randTensor(rng, Float64)},
		Entry{"empty", randTensor(rng, Int8, 0, 4)},
		Entry{"4d", randTensor(rng, Int16, 1, 2, 3, 2)},
		Entry{"step", int64(-1 << 40)}, Entry{"lr", 0.5}, Entry{"name", "ü"}, Entry{"flag", true})
	for _, es := range [][]Entry{nil, small, small[:1], small[10:]} {
		var b bytes.Buffer
		if err := Write(&b, es); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	// Views of shared storages, which Write never produces.
	s0 := randTensor(rng, Float32, 12).Data
	f.Add(buildArchive(f, "v",
		record{"data.pkl", viewPickle(
			view{"t", Float32, "0", 12, 0, []int64{4, 3}, []int64{1, 4}},
			view{"s", Float32, "0", 12, 5, []int64{2, 2}, []int64{3, 1}},
			view{"e", Float32, "0", 12, 2, []int64{3, 2}, []int64{0, 1}})},
		record{"byteorder", []byte("little")},
		record{"data/0", s0},
		record{"version", []byte("3\n")}))

	// Keep a mutated stride-0 view from allocating gigabytes per input.
	defer func(old int64) { expandFloor = old }(expandFloor)
	expandFloor = 1 << 20

	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := readBytes(data)
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := Write(&b, es); err != nil {
			t.Fatalf("Read accepted what Write refuses: %v", err)
		}
		again, err := readBytes(b.Bytes())
		if err != nil {
			t.Fatalf("rewritten file does not read: %v", err)
		}
		sameEntries(t, again, es)
	})
}
