package ptfile

import (
	"fmt"
	"io"
)

// Write writes entries, in order, as a torch.save file. It fails on a name
// used twice, a value of another type, or a tensor whose Data does not match
// its DType and Shape.
func Write(w io.Writer, entries []Entry) error {
	if err := write(w, entries); err != nil {
		return fmt.Errorf("ptfile: %w", err)
	}
	return nil
}

// Read reads a torch.save file of size bytes holding a state dict and
// returns its entries in the file's order. Tensors come back contiguous,
// whatever view of a storage the file describes, and share no memory with
// each other. Read refuses a file whose records and tensors would take more
// than Cap(size).
func Read(r io.ReaderAt, size int64) ([]Entry, error) {
	entries, err := read(r, size)
	if err != nil {
		return nil, fmt.Errorf("ptfile: %w", err)
	}
	return entries, nil
}
