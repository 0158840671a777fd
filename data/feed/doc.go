// Package feed collates molecules into batches and feeds them to training:
// Batch and Collate, the Loader (shuffling, workers, prefetch) with its
// Position in the batch sequence, and putting a batch on a device
// (Batch.Graph, which makes the device batch of package graph; PinMemory).
package feed
