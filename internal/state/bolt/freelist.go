package bolt

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
)

// bbolt's on-disk layout, as far as checkFreelist reads it: a page starts
// with a 16-byte header (id uint64, flags uint16, count uint16, overflow
// uint32); a meta page's body is magic, version, page size, flags (uint32
// each), the root bucket (16 bytes), then the freelist page ID, the
// high-water page ID, the transaction ID and a FNV-64a checksum of what
// precedes it (uint64 each). Integers are in the machine's byte order.
const (
	pageHeaderSize   = 16
	metaFreelistAt   = 32
	metaTxidAt       = 48
	metaChecksumAt   = 56
	metaMagic        = 0xED0CDAED
	freelistPageFlag = 0x10
	noFreelist       = ^uint64(0)
)

// checkFreelist checks that the freelist page named by the meta page of
// transaction txid lies within the file, is a freelist page and lists no
// more IDs than the file holds. A read-write bbolt Open reads the freelist
// after mapping the file and panics on one that is not; the mapping (which
// holds the file's lock) then stays until the process exits, so a file
// refused that way could not be opened again, even once restored. It is
// called with the file open read-only (locked), so no writer changes it
// meanwhile.
func checkFreelist(path string, size int64, pageSize int, txid uint64) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open state file %s: %w", path, err)
	}
	defer f.Close()
	ne := binary.NativeEndian
	freelist, found := uint64(0), false
	for _, at := range []int64{0, int64(pageSize)} {
		var m [metaChecksumAt + 8]byte
		if _, err := f.ReadAt(m[:], at+pageHeaderSize); err != nil {
			continue
		}
		h := fnv.New64a()
		h.Write(m[:metaChecksumAt])
		if ne.Uint32(m[:]) == metaMagic && ne.Uint64(m[metaChecksumAt:]) == h.Sum64() && ne.Uint64(m[metaTxidAt:]) == txid {
			freelist, found = ne.Uint64(m[metaFreelistAt:]), true
		}
	}
	if !found || freelist == noFreelist {
		return nil // bbolt rebuilds a freelist it does not find
	}
	if pages := uint64(size) / uint64(pageSize); freelist >= pages {
		return corrupt(path, fmt.Errorf("freelist page %d is past the end of the file (%d pages)", freelist, pages))
	}
	pos := int64(freelist) * int64(pageSize)
	var hdr [pageHeaderSize + 8]byte
	if _, err := f.ReadAt(hdr[:], pos); err != nil {
		return corrupt(path, fmt.Errorf("freelist page %d: %w", freelist, err))
	}
	if ne.Uint16(hdr[8:]) != freelistPageFlag {
		return corrupt(path, fmt.Errorf("page %d is not the freelist page its metadata names", freelist))
	}
	// A count of 0xFFFF means the real count is the first element.
	count, ids := uint64(ne.Uint16(hdr[10:])), pos+pageHeaderSize
	if count == 0xFFFF {
		count, ids = ne.Uint64(hdr[pageHeaderSize:]), ids+8
	}
	if count > uint64(size-ids)/8 {
		return corrupt(path, fmt.Errorf("freelist page %d lists %d pages, more than the file holds", freelist, count))
	}
	return nil
}
