package model

import (
	"embed"
	"fmt"
	"path"
	"slices"
	"strings"
)

// The shipped models: motif models trained by the product's own commands and
// embedded in the program, each a NAME.pt and its NAME.json in zoo/, usable
// by name wherever an encoder or a motif model is taken. docs/model-card.md
// says how each was made and what it is worth.
//
//go:embed zoo
var zoo embed.FS

// shipped is one shipped model's files.
type shipped struct {
	weights, info         []byte // the .pt's bytes, the .json's
	weightsName, infoName string // their names, for errors
}

// ShippedModels lists the names of the shipped models, sorted.
func ShippedModels() []string {
	entries, _ := zoo.ReadDir("zoo")
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".pt"); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// shippedModel is the shipped model called name, if there is one; only
// Resolve asks.
func shippedModel(name string) (shipped, bool) {
	if !slices.Contains(ShippedModels(), name) {
		return shipped{}, false
	}
	weights, err1 := zoo.ReadFile(path.Join("zoo", name+".pt"))
	info, err2 := zoo.ReadFile(path.Join("zoo", name+".json"))
	if err1 != nil || err2 != nil {
		panic(fmt.Sprintf("model: shipped model %s is incomplete: %v %v", name, err1, err2))
	}
	return shipped{weights: weights, info: info,
		weightsName: "shipped model " + name + " (.pt)", infoName: "shipped model " + name + " (.json)"}, true
}
