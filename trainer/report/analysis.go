package report

import (
	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/feed"
	"github.com/micrograph/micrograph/model"
	"github.com/micrograph/micrograph/torch"
)

// AtomMotifs runs the model in evaluation mode over the molecules graphs, in
// batches of batchSize, and returns each of their atoms' motif (docs/method.md §3:
// the argmax of the Sinkhorn-balanced assignment, balanced within each batch),
// in the order of the molecules and their atoms. Under the released
// objective an atom's motif is that of its subgraph (docs/method.md §12.6),
// -1 for an atom in none.
func AtomMotifs(m *model.MicroGraph, ds *data.Dataset, graphs []int32, batchSize int, dev torch.Device) ([]int, error) {
	reader, err := model.AsMotifReader(m.Objective)
	if err != nil {
		return nil, err
	}
	var motifs []int
	var b feed.Batch
	for lo := 0; lo < len(graphs); lo += batchSize {
		if err := feed.Collate(ds, graphs[lo:min(lo+batchSize, len(graphs))], &b); err != nil {
			return nil, err
		}
		motifs = append(motifs, torch.ScopedValue(func() []int { return reader.ReadMotifs(b.Graph(dev)).AtomMotif })...)
	}
	return motifs, nil
}
