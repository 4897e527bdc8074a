package bolt_test

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/state"
	"github.com/runbook/runbook/internal/state/bolt"
)

// boltFile edits the bytes of a bbolt file: its meta pages (at the start of
// pages 0 and 1, after a 16-byte page header) name the freelist page at
// offset 32 and the transaction at 48, and end with a FNV-64a checksum at
// 56; a page header has its flags at 8 and its element count at 10.
type boltFile struct {
	data     []byte
	pageSize int
}

var ne = binary.NativeEndian

func newBoltFile(data []byte) *boltFile {
	return &boltFile{data: data, pageSize: int(ne.Uint32(data[16+8:]))}
}

// meta returns the offset of the meta page body of the last transaction
// (inUse) or of the one before.
func (f *boltFile) meta(inUse bool) int {
	a, b := 16, f.pageSize+16
	if ne.Uint64(f.data[b+48:]) > ne.Uint64(f.data[a+48:]) {
		a, b = b, a
	}
	if inUse {
		return a
	}
	return b
}

func (f *boltFile) freelist() int { return int(ne.Uint64(f.data[f.meta(true)+32:])) }

// setFreelist points a meta page at another freelist page, with a valid
// checksum.
func (f *boltFile) setFreelist(inUse bool, id uint64) {
	m := f.meta(inUse)
	ne.PutUint64(f.data[m+32:], id)
	h := fnv.New64a()
	h.Write(f.data[m : m+56])
	ne.PutUint64(f.data[m+56:], h.Sum64())
}

// setCount sets the element count of the freelist page in use; with
// first, the count is 0xFFFF and first is the real count.
func (f *boltFile) setCount(count uint16, first ...uint64) {
	p := f.freelist() * f.pageSize
	ne.PutUint16(f.data[p+10:], count)
	for _, v := range first {
		ne.PutUint64(f.data[p+16:], v)
	}
}

func TestDamagedFreelist(t *testing.T) {
	good := populated(t)
	require.Equal(t, 0x10, int(ne.Uint16(good[newBoltFile(good).freelist()*newBoltFile(good).pageSize+8:])), "the meta in use names a freelist page")
	cases := []struct {
		name   string
		damage func(f *boltFile)
		err    string // "": the file opens
	}{
		{"a freelist page past the end of the file is refused", func(f *boltFile) {
			f.setFreelist(true, uint64(len(f.data)/f.pageSize))
		}, "past the end of the file"},
		{"a freelist page far past the end of the file is refused", func(f *boltFile) {
			f.setFreelist(true, 1<<40)
		}, "past the end of the file"},
		{"a freelist page ID naming a meta page is refused", func(f *boltFile) {
			f.setFreelist(true, 1)
		}, "page 1 is not the freelist page its metadata names"},
		{"a freelist listing more pages than the file holds is refused", func(f *boltFile) {
			f.setCount(0xFFFE)
		}, "more than the file holds"},
		{"a freelist whose long count lists more pages than the file holds is refused", func(f *boltFile) {
			f.setCount(0xFFFF, 1<<40)
		}, "more than the file holds"},
		{"a freelist whose long count is within the file opens", func(f *boltFile) {
			f.setCount(0xFFFF, 0)
		}, ""},
		{"a freelist listing pages up to the end of the file opens", func(f *boltFile) {
			f.setCount(uint16((len(f.data) - f.freelist()*f.pageSize - 16) / 8))
		}, ""},
		{"a freelist listing one page more than fits in the file is refused", func(f *boltFile) {
			f.setCount(uint16((len(f.data)-f.freelist()*f.pageSize-16)/8 + 1))
		}, "more than the file holds"},
		{"a freelist whose long count reaches the end of the file opens", func(f *boltFile) {
			f.setCount(0xFFFF, uint64((len(f.data)-f.freelist()*f.pageSize-24)/8))
		}, ""},
		{"a freelist whose long count is one page more than fits in the file is refused", func(f *boltFile) {
			f.setCount(0xFFFF, uint64((len(f.data)-f.freelist()*f.pageSize-24)/8+1))
		}, "more than the file holds"},
		{"damage in the meta page not in use is not read", func(f *boltFile) {
			f.setFreelist(false, 1<<40)
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newBoltFile(append([]byte(nil), good...))
			c.damage(f)
			path := filepath.Join(t.TempDir(), "state.db")
			require.NoError(t, os.WriteFile(path, f.data, 0o600))

			s, err := bolt.Open(path, bolt.Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
			if c.err == "" {
				require.NoError(t, err)
				runs, err := s.ListRuns(ctx, state.RunFilter{})
				require.NoError(t, err)
				assert.Len(t, runs, 40)
				require.NoError(t, s.Close())
				return
			}
			require.True(t, errors.Is(err, state.ErrCorrupt), "error = %v, want ErrCorrupt", err)
			assert.ErrorContains(t, err, c.err)
			assert.ErrorContains(t, err, path)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, f.data, after, "the file was left untouched")

			// A read-write open is refused too, and neither kept the file:
			// restored in place, it opens.
			_, err = bolt.Open(path, bolt.Options{Timeout: 200 * time.Millisecond})
			require.True(t, errors.Is(err, state.ErrCorrupt), "read-write open: error = %v, want ErrCorrupt", err)
			require.NoError(t, os.WriteFile(path, good, 0o600))
			s, err = bolt.Open(path, bolt.Options{Timeout: 200 * time.Millisecond})
			require.NoError(t, err, "open after restoring the file")
			require.NoError(t, s.Close())
		})
	}
}
