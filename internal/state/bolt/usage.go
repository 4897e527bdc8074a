package bolt

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	bbolt "go.etcd.io/bbolt"
)

// Usage is where a state file's bytes go: what each top-level bucket
// holds (keys and values, by kind inside run buckets) and the pages it
// takes. It answers "why is the file this big" and backs the layout
// tests' bounds on a run's footprint.
type Usage struct {
	PageSize int
	// FilePages is the file's high-water mark in pages; FreePages of them
	// are free for later writes.
	FilePages, FreePages int
	// Parts are the top-level buckets, then one line per kind of a run
	// bucket's keys ("rundata/E" event blocks, "rundata/s" step records, ...),
	// in name order.
	Parts []UsagePart
	// Runs counts run buckets; InlineRuns of them are stored inline in
	// their parent's leaf, InlineBytes in all.
	Runs, InlineRuns, InlineBytes int
}

// UsagePart is what one bucket, or one kind of key, holds.
type UsagePart struct {
	Name             string
	Keys             int
	KeyBytes         int
	ValueBytes       int
	LeafPages        int // leaf and overflow pages (0 for a kind)
	BranchPages      int
	LeafInuse        int // bytes of those pages in use
	InlineBucketUsed int // bytes of inline sub-buckets in its leaves
}

// Usage walks the whole file in one read transaction (it reads every
// page: a diagnostic, not for a hot path).
func (s *Store) Usage(ctx context.Context) (*Usage, error) {
	u := &Usage{}
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		u.PageSize = tx.DB().Info().PageSize
		u.FilePages = int(tx.Size()) / u.PageSize
		u.FreePages = tx.DB().Stats().FreePageN
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			st := b.Stats()
			p := UsagePart{
				Name:        string(name),
				LeafPages:   st.LeafPageN + st.LeafOverflowN,
				BranchPages: st.BranchPageN + st.BranchOverflowN,
				LeafInuse:   st.LeafInuse, InlineBucketUsed: st.InlineBucketInuse,
			}
			if string(name) == string(bucketRunData) {
				kinds, err := u.runData(b)
				if err != nil {
					return err
				}
				for _, k := range kinds {
					p.Keys += k.Keys
					p.KeyBytes += k.KeyBytes
					p.ValueBytes += k.ValueBytes
				}
				u.Parts = append(u.Parts, p)
				u.Parts = append(u.Parts, kinds...)
				return nil
			}
			countKeys(b, &p)
			u.Parts = append(u.Parts, p)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("usage of %s: %w", s.path, err)
	}
	return u, nil
}

// countKeys adds b's keys and values, sub-buckets' included, to p.
func countKeys(b *bbolt.Bucket, p *UsagePart) {
	_ = b.ForEach(func(k, v []byte) error {
		p.Keys++
		p.KeyBytes += len(k)
		if v == nil {
			countKeys(b.Bucket(k), p)
			return nil
		}
		p.ValueBytes += len(v)
		return nil
	})
}

// runData sums the run buckets' keys by kind (their first byte) and
// counts inline buckets.
func (u *Usage) runData(rundata *bbolt.Bucket) ([]UsagePart, error) {
	kinds := map[string]*UsagePart{}
	part := func(name string) *UsagePart {
		if kinds[name] == nil {
			kinds[name] = &UsagePart{Name: "rundata/" + name}
		}
		return kinds[name]
	}
	err := rundata.ForEach(func(id, v []byte) error {
		if v != nil {
			return nil
		}
		rb := rundata.Bucket(id)
		u.Runs++
		if rb.Root() == 0 {
			u.InlineRuns++
			u.InlineBytes += rb.Stats().InlineBucketInuse
		}
		return rb.ForEach(func(k, v []byte) error {
			name := string(k[:1])
			if len(k) == 0 {
				name = "(empty)"
			}
			p := part(name)
			p.Keys++
			p.KeyBytes += len(k)
			p.ValueBytes += len(v)
			return nil
		})
	})
	out := make([]UsagePart, 0, len(kinds))
	for _, p := range kinds {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b UsagePart) int { return strings.Compare(a.Name, b.Name) })
	return out, err
}

// Write prints u as a table.
func (u *Usage) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "part\tkeys\tkey bytes\tvalue bytes\tper key\tleaf pages\tbranch pages\tleaf fill\t\n")
	for _, p := range u.Parts {
		per, fill := 0, ""
		if p.Keys > 0 {
			per = (p.KeyBytes + p.ValueBytes) / p.Keys
		}
		if p.LeafPages > 0 {
			fill = fmt.Sprintf("%.0f%%", 100*float64(p.LeafInuse)/float64(p.LeafPages*u.PageSize))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", p.Name, p.Keys, p.KeyBytes, p.ValueBytes, per, p.LeafPages, p.BranchPages, fill)
	}
	fmt.Fprintf(tw, "\n")
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "file %d pages of %d bytes (%d free); %d run buckets, %d inline (%d bytes)\n",
		u.FilePages, u.PageSize, u.FreePages, u.Runs, u.InlineRuns, u.InlineBytes)
	return err
}
