package state

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// RunCursor is a position in the newest-first listing of runs (by
// CreatedAt, then ID, both descending): the creation time and ID of the
// last run of a page. RunFilter.Before lists the runs after it, the next
// page, as an index range however deep it is (keyset paging); a run
// created meanwhile neither shifts the pages nor repeats a run. The
// position is kept to the nanosecond.
type RunCursor struct {
	CreatedAt time.Time
	ID        string
}

// CursorAfter returns the position just past r in the listing: with r the
// last run of a page, RunFilter{Before: CursorAfter(r)} lists the next.
func CursorAfter(r *Run) *RunCursor {
	return &RunCursor{CreatedAt: r.CreatedAt, ID: r.ID}
}

// CursorBefore returns the position of the runs created before t: the
// listing from there starts with the newest run created before t.
func CursorBefore(t time.Time) *RunCursor { return &RunCursor{CreatedAt: t} }

// Follows reports whether r comes after c in the newest-first listing
// (created earlier, or at the same time with a smaller ID, bytewise): the
// runs RunFilter{Before: c} lists. Every store orders runs so.
func (c *RunCursor) Follows(r *Run) bool {
	if c == nil {
		return true
	}
	a, b := r.CreatedAt.UnixNano(), c.CreatedAt.UnixNano()
	if a != b {
		return a < b
	}
	return r.ID < c.ID
}

// String is the cursor as an opaque token for an API's paging ("before"):
// the creation time in Unix nanoseconds and the ID, "1732521600000000000.ID".
func (c RunCursor) String() string {
	return strconv.FormatInt(c.CreatedAt.UnixNano(), 10) + "." + c.ID
}

// ParseRunCursor reads a cursor written by RunCursor.String. It also
// reads the earlier "offset.nanos.ID" form of the API's page cursors
// (the offset, a hint, is ignored), so a page link made by an earlier
// build still works.
func ParseRunCursor(s string) (*RunCursor, error) {
	first, rest, ok := strings.Cut(s, ".")
	nanos, err := strconv.ParseInt(first, 10, 64)
	if !ok || err != nil || rest == "" {
		return nil, fmt.Errorf("cursor %q is not a cursor from a page's next", s)
	}
	if second, id, ok := strings.Cut(rest, "."); ok && id != "" && nanos >= 0 {
		if n, err := strconv.ParseInt(second, 10, 64); err == nil && isDigits(second) {
			nanos, rest = n, id // the earlier form: offset.nanos.ID
		}
	}
	return &RunCursor{CreatedAt: time.Unix(0, nanos), ID: rest}, nil
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
