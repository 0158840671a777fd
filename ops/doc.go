// Package ops holds the graph operations of MICRO-Graph as libtorch tensor
// graphs: segment reductions over destination-sorted edges, pooling, cosine
// similarities, Sinkhorn assignment, motif-like subgraphs and the losses of
// docs/method.md §3–§6. One value is read back to the host per batch: how
// many subgraphs survive (Subgraphs.LiveSlots), so that the losses run over
// those alone; on CUDA that is the step's one wait for the device.
package ops
