package notice

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// watermark is the digest cursor: the newest update time (Unix ms) seen and
// the IDs of the notices updated at exactly that millisecond, so that two
// notices sharing a time are neither lost nor repeated. A notice is new
// when it was updated later, or at the same millisecond with another ID.
// An edited notice therefore comes back, as an update.
type watermark struct {
	UpdatedMs int64   `json:"updated_ms"`
	IDs       []int64 `json:"ids,omitempty"`
}

// isZero reports a watermark before every notice.
func (w watermark) isZero() bool { return w.UpdatedMs == 0 && len(w.IDs) == 0 }

// newer reports whether n is past the watermark.
func (w watermark) newer(n Notice) bool {
	t := n.stamp()
	return t > w.UpdatedMs || (t == w.UpdatedMs && !slices.Contains(w.IDs, n.ID))
}

// add moves the watermark over n (never backwards).
func (w watermark) add(n Notice) watermark {
	t := n.stamp()
	switch {
	case t > w.UpdatedMs:
		return watermark{UpdatedMs: t, IDs: []int64{n.ID}}
	case t == w.UpdatedMs && !slices.Contains(w.IDs, n.ID):
		ids := append(slices.Clone(w.IDs), n.ID)
		slices.Sort(ids)
		return watermark{UpdatedMs: t, IDs: ids}
	}
	return w
}

// merge returns the later of two watermarks (their ID sets joined when the
// times are equal): a resumed digest never moves a cursor back that
// another run moved on meanwhile.
func (w watermark) merge(o watermark) watermark {
	switch {
	case o.UpdatedMs > w.UpdatedMs:
		return o
	case o.UpdatedMs < w.UpdatedMs:
		return w
	}
	ids := slices.Clone(w.IDs)
	for _, id := range o.IDs {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return watermark{UpdatedMs: w.UpdatedMs, IDs: ids}
}

// time returns the watermark's time (zero for a zero watermark).
func (w watermark) time() time.Time {
	if w.UpdatedMs == 0 {
		return time.Time{}
	}
	return time.UnixMilli(w.UpdatedMs).UTC()
}

// output is the watermark as a step output.
func (w watermark) output() map[string]any {
	ids := make([]any, len(w.IDs))
	for i, id := range w.IDs {
		ids[i] = id
	}
	out := map[string]any{"updated_ms": w.UpdatedMs, "ids": ids, "updated_at": ""}
	if !w.time().IsZero() {
		out["updated_at"] = w.time().Format(time.RFC3339Nano)
	}
	return out
}

func parseWatermark(b []byte) (watermark, bool, error) {
	if len(b) == 0 {
		return watermark{}, false, nil
	}
	var w watermark
	if err := json.Unmarshal(b, &w); err != nil {
		return watermark{}, false, fmt.Errorf("the saved digest cursor is unreadable: %w", err)
	}
	return w, true, nil
}

// cursorKey names the cursor of one digest: connection, service and a hash
// of the filters, so that differently filtered digests keep apart.
func cursorKey(connection, service, name, language string, category, tag int64, query string) string {
	h := sha256.Sum256([]byte(strings.Join([]string{
		"name=" + name,
		"language=" + language,
		"category=" + strconv.FormatInt(category, 10),
		"tag=" + strconv.FormatInt(tag, 10),
		"query=" + query,
	}, "\x00")))
	return "notice.digest/" + connection + "/" + service + "/" + hex.EncodeToString(h[:8])
}

// digestID identifies one digest: the same cursor move over the same
// notices has the same identity.
func digestID(key string, before, after watermark, ids []int64) string {
	b, _ := json.Marshal(struct {
		Key    string    `json:"key"`
		Before watermark `json:"before"`
		After  watermark `json:"after"`
		IDs    []int64   `json:"ids"`
	}{key, before, after, ids})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// parseFirstRun reads first_run: "all", "none" or "since:<duration>",
// where the duration is Go's ("36h") or a number of days ("7d").
func parseFirstRun(s string) (mode string, since time.Duration, err error) {
	switch s {
	case "all", "none":
		return s, 0, nil
	}
	d, ok := strings.CutPrefix(s, "since:")
	if !ok {
		return "", 0, fmt.Errorf(`must be "all", "none" or "since:<duration>" like since:7d (got %q)`, s)
	}
	if days, ok := strings.CutSuffix(d, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > 3650 {
			return "", 0, fmt.Errorf("since: days must be a whole number from 1 to 3650 (got %q)", d)
		}
		return "since", time.Duration(n) * 24 * time.Hour, nil
	}
	dur, err := time.ParseDuration(d)
	if err != nil || dur <= 0 {
		return "", 0, fmt.Errorf("since: %q is not a positive duration like 36h or 7d", d)
	}
	return "since", dur, nil
}
