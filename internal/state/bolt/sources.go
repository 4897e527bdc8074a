package bolt

import (
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/runbook/runbook/internal/state"
)

// bucketSources numbers the sources of runs: a run record
// names its playbook, the file it was loaded from and the hash of its
// snapshot by one number instead of spelling them (about 80 bytes, a
// third of a waiting run's record). Two kinds of key:
//
//	n<8-byte number>   the source (encodeSource)
//	k<source>          its number (8 bytes), to find it when writing
//
// Numbers come from the bucket's sequence. A source stays when its runs
// are deleted, as snapshots do: there are few.
var bucketSources = []byte("sources")

const (
	sourceByNumber = 'n'
	sourceByValue  = 'k'
)

// sourceKey is the key of a source's number (k<source>), encoded before
// the write transaction as the rest of a run's record is.
func sourceKey(src runSource) []byte {
	return append([]byte{sourceByValue}, encodeSource(src)...)
}

// sourceNumber returns the number of the source whose key (sourceKey) is
// key, numbering it if it is new, in the caller's write transaction.
func sourceNumber(tx *bbolt.Tx, key []byte) (uint64, error) {
	b := tx.Bucket(bucketSources)
	if v := b.Get(key); v != nil {
		if len(v) != 8 {
			return 0, fmt.Errorf("source number %x: %w", v, state.ErrCorrupt)
		}
		return binary.BigEndian.Uint64(v), nil
	}
	n, err := b.NextSequence()
	if err != nil {
		return 0, err
	}
	if err := b.Put(numKey(sourceByNumber, n), key[1:]); err != nil {
		return 0, err
	}
	return n, b.Put(key, binary.BigEndian.AppendUint64(nil, n))
}

// sourcesOf returns a sourceReader of tx that remembers what it read (a
// listing reads the few sources of many runs).
func sourcesOf(tx *bbolt.Tx) sourceReader {
	b := tx.Bucket(bucketSources)
	seen := map[uint64]runSource{}
	return func(n uint64) (runSource, error) {
		if src, ok := seen[n]; ok {
			return src, nil
		}
		v := b.Get(numKey(sourceByNumber, n))
		if v == nil {
			return runSource{}, fmt.Errorf("source %d is missing", n)
		}
		src, err := decodeSource(v)
		if err != nil {
			return runSource{}, fmt.Errorf("source %d: %w", n, err)
		}
		seen[n] = src
		return src, nil
	}
}
