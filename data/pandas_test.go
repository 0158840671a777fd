package data_test

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/micrograph/micrograph/data"
	"github.com/micrograph/micrograph/data/synthetic"
	"github.com/micrograph/micrograph/internal/testenv"
)

// readLikeOGB reads a dataset folder with pandas, making the calls OGB's
// read_csv_graph_raw and get_idx_split make (read_csv with gzip compression
// and no header, then .values), and prints what it found as JSON.
const readLikeOGB = `
import json, sys
import numpy as np
import pandas as pd

def read(name):
    return pd.read_csv(sys.argv[1] + "/" + name, compression="gzip", header=None).values

nodes = read("raw/num-node-list.csv.gz")[:, 0]
bonds = read("raw/num-edge-list.csv.gz")[:, 0]
node_feat = read("raw/node-feat.csv.gz")
edge = read("raw/edge.csv.gz").T
edge_feat = read("raw/edge-feat.csv.gz")
labels = read("raw/graph-label.csv.gz").astype(np.float64)
groups = read("raw/node_group.csv.gz")[:, 0]
split = {p: read("split/scaffold/%s.csv.gz" % p)[:, 0].tolist() for p in ("train", "valid", "test")}
mapping = pd.read_csv(sys.argv[1] + "/mapping/mol.csv.gz")
json.dump({
    "nodes": nodes.tolist(), "bonds": bonds.tolist(),
    "node_feat": node_feat.ravel().tolist(), "node_feat_dtype": str(node_feat.dtype),
    "edge": edge.T.ravel().tolist(), "edge_feat": edge_feat.ravel().tolist(),
    "labels": [None if np.isnan(v) else v for v in labels.ravel()], "label_shape": list(labels.shape),
    "groups": groups.tolist(), "split": split,
    "tasks": list(mapping.columns[:-2]), "smiles": mapping["smiles"].tolist(),
}, sys.stdout)
`

// The folders micrograph writes are readable by OGB's loaders: pandas reads
// every file the way OGB does and finds exactly what micrograph wrote,
// missing labels as NaN included.
func TestPandasReadsFeaturizedFolder(t *testing.T) {
	python := testenv.Python(t, "pandas")
	out := filepath.Join(t.TempDir(), "synth")
	tab := synthetic.Table(synthetic.Options{Molecules: 60, Seed: 11})
	for i := 0; i < len(tab.Labels); i += 7 {
		tab.Labels[i] = float32(math.NaN())
	}
	if _, err := data.Featurize(tab, out, data.FeaturizeOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err := data.ReadOGB(out)
	if err != nil {
		t.Fatal(err)
	}
	js, err := python.Command("-c", readLikeOGB, out).Output()
	if err != nil {
		t.Fatalf("pandas: %v", err)
	}
	var got struct {
		Nodes         []int64            `json:"nodes"`
		Bonds         []int64            `json:"bonds"`
		NodeFeat      []int64            `json:"node_feat"`
		NodeFeatDtype string             `json:"node_feat_dtype"`
		Edge          []int64            `json:"edge"`
		EdgeFeat      []int64            `json:"edge_feat"`
		Labels        []*float64         `json:"labels"`
		LabelShape    []int              `json:"label_shape"`
		Groups        []int64            `json:"groups"`
		Split         map[string][]int32 `json:"split"`
		Tasks         []string           `json:"tasks"`
		SMILES        []string           `json:"smiles"`
	}
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatal(err)
	}
	counts := func(ptr []int64) []int64 {
		var c []int64
		for i := 1; i < len(ptr); i++ {
			c = append(c, ptr[i]-ptr[i-1])
		}
		return c
	}
	labelsAgree := len(got.Labels) == len(tab.Labels)
	for i, v := range tab.Labels {
		p := got.Labels[i]
		labelsAgree = labelsAgree && (p == nil) == (v != v) && (p == nil || float32(*p) == v)
	}
	checks := []struct {
		name string
		ok   bool
	}{
		{"num-node-list", slices.Equal(got.Nodes, counts(d.NodePtr))},
		{"num-edge-list", slices.Equal(got.Bonds, counts(d.BondPtr))},
		{"node-feat", slices.Equal(got.NodeFeat, widen(d.AtomFeat)) && got.NodeFeatDtype == "int64"},
		{"edge", slices.Equal(got.Edge, widen(d.BondAtoms))},
		{"edge-feat", slices.Equal(got.EdgeFeat, widen(d.BondFeat))},
		{"graph-label", labelsAgree && slices.Equal(got.LabelShape, []int{60, len(synthetic.Tasks)})},
		{"node_group", slices.Equal(got.Groups, widen(d.AtomGroup))},
		{"split", slices.Equal(got.Split["train"], d.Split.Train) && slices.Equal(got.Split["valid"], d.Split.Valid) && slices.Equal(got.Split["test"], d.Split.Test)},
		{"mapping", slices.Equal(got.Tasks, synthetic.Tasks) && slices.Equal(got.SMILES, tab.SMILES)},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("pandas reads %s differently from what was written", c.name)
		}
	}
}

func widen[T uint8 | int32](v []T) []int64 {
	w := make([]int64, len(v))
	for i, x := range v {
		w[i] = int64(x)
	}
	return w
}
