package ptfile

import (
	"archive/zip"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/micrograph/micrograph/internal/inputfile"
)

// archive gives access to the records of a torch.save zip file by their
// names inside its folder.
type archive struct {
	r      io.ReaderAt
	size   int64
	folder string // with the trailing slash
	files  map[string]*zip.File
	budget *budget // counts the records read: the zip's may overlap
}

func openArchive(r io.ReaderAt, size int64, b *budget) (*archive, error) {
	zr, err := zip.NewReader(r, size)
	// Names are only looked up, never used as paths, so an "insecure" one
	// (the reader still being valid) is no reason to refuse the file.
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		var magic [2]byte
		if n, _ := r.ReadAt(magic[:], 0); n == 2 && magic[0] == 0x80 {
			// A pickle: torch.save before PyTorch 1.6, or with
			// _use_new_zipfile_serialization=False.
			return nil, errors.New("legacy (pre-zip) torch.save format is not supported")
		}
		return nil, fmt.Errorf("not a torch.save zip archive: %w", err)
	}
	if len(zr.File) == 0 {
		return nil, errors.New("zip archive has no records")
	}
	// Like PyTorch, take the folder of the first record as the archive's.
	first := zr.File[0].Name
	i := strings.IndexByte(first, '/')
	if i <= 0 {
		return nil, fmt.Errorf("first record %s is not inside a folder", quote(first))
	}
	a := &archive{r: r, size: size, folder: first[:i+1], files: make(map[string]*zip.File, len(zr.File)), budget: b}
	for _, f := range zr.File {
		name, ok := strings.CutPrefix(f.Name, a.folder)
		if !ok {
			continue // PyTorch ignores records outside the folder too
		}
		if a.files[name] != nil {
			return nil, fmt.Errorf("record %s appears twice", quote(f.Name))
		}
		a.files[name] = f
	}
	return a, nil
}

func (a *archive) has(name string) bool { return a.files[name] != nil }

// name is the record called name inside the archive's folder, for a
// message: names come from the file, shortened (inputfile.Shorten).
func (a *archive) name(rec string) string { return inputfile.Shorten(a.folder + rec) }

// record returns the bytes of a record after checking its CRC-32.
func (a *archive) record(name string) ([]byte, error) {
	f := a.files[name]
	if f == nil {
		return nil, fmt.Errorf("record %s is missing", a.name(name))
	}
	full := a.name(name)
	if f.Method != zip.Store {
		return nil, fmt.Errorf("record %s is compressed (method %d); torch.save stores records uncompressed", full, f.Method)
	}
	if f.CompressedSize64 != f.UncompressedSize64 {
		return nil, fmt.Errorf("record %s: stored sizes disagree (%d and %d)", full, f.CompressedSize64, f.UncompressedSize64)
	}
	// DataOffset also checks the local header's signature.
	off, err := f.DataOffset()
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", full, err)
	}
	n := f.UncompressedSize64
	if off < 0 || off > a.size || n > uint64(a.size-off) {
		return nil, fmt.Errorf("record %s: %d bytes at offset %d run past the end of the %d-byte file (truncated?)", full, n, off, a.size)
	}
	if err := a.budget.take(int64(n), "record "+full); err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	if got, err := a.r.ReadAt(buf, off); got < len(buf) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("record %s: %w", full, err)
	}
	// Checked here rather than by archive/zip, which skips the check when
	// the stored CRC is 0 and a corrupted header could make it so.
	if sum := crc32.ChecksumIEEE(buf); sum != f.CRC32 {
		return nil, fmt.Errorf("record %s: CRC-32 is %08x, header says %08x (file is corrupt)", full, sum, f.CRC32)
	}
	return buf, nil
}
