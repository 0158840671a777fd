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
