package ops

// PoolSorted exposes the pooling of devices without the CPU kernel, so that
// tests compare both.
var PoolSorted = (*Subgraphs).poolSorted

// SinkhornComposed exposes the Sinkhorn assignment of devices without the CPU
// kernel.
var SinkhornComposed = sinkhornComposed

// MinCutComposed exposes the MinCut regulariser of devices without the CPU
// kernel.
var MinCutComposed = minCutComposed
