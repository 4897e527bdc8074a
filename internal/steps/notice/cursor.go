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

// lookback is how far below the newest update time the cursor still
// remembers notice IDs: a notice that shows up late with an older update
// time (a scheduled notice becoming visible, clock skew) is still caught.
const lookback = 14 * 24 * time.Hour

// watermark is the digest cursor. Floor is the update time (Unix ms) at and
// below which every notice counts as seen; Seen holds the update time of
// each notice seen above it; UpdatedMs is the newest update time seen. A
// notice is new when it is above Floor and either unseen or updated since
// it was seen, so list position (pinned notices first) never matters, two
// notices sharing a millisecond are both caught, and an edited notice comes
// back as an update.
type watermark struct {
	UpdatedMs int64           `json:"updated_ms"`
	Floor     int64           `json:"floor_ms"`
	Seen      map[int64]int64 `json:"seen,omitempty"`
}

// isZero reports a watermark before every notice.
func (w watermark) isZero() bool { return w.UpdatedMs == 0 && w.Floor == 0 && len(w.Seen) == 0 }

// newer reports whether n is past the watermark.
func (w watermark) newer(n Notice) bool {
	t := n.stamp()
	if t <= w.Floor && !w.isZero() {
		return false
	}
	seen, ok := w.Seen[n.ID]
	return !ok || t > seen
}

// add records n as seen (the watermark never moves back).
func (w watermark) add(n Notice) watermark {
	return w.merge(watermark{UpdatedMs: n.stamp(), Floor: w.Floor, Seen: map[int64]int64{n.ID: n.stamp()}})
}

// merge joins two watermarks: a resumed digest never moves a cursor back
// that another run moved on meanwhile.
func (w watermark) merge(o watermark) watermark {
	out := watermark{UpdatedMs: max(w.UpdatedMs, o.UpdatedMs), Floor: max(w.Floor, o.Floor), Seen: map[int64]int64{}}
	out.Floor = max(out.Floor, out.UpdatedMs-lookback.Milliseconds())
	for _, m := range []map[int64]int64{w.Seen, o.Seen} {
		for id, t := range m {
			if t > out.Floor && t > out.Seen[id] {
				out.Seen[id] = t
			}
		}
	}
	return out
}

// ids lists the notices seen at the newest update time.
func (w watermark) ids() []int64 {
	var out []int64
	for id, t := range w.Seen {
		if t == w.UpdatedMs {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
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
	newest := w.ids()
	ids := make([]any, len(newest))
	for i, id := range newest {
		ids[i] = id
	}
	out := map[string]any{"updated_ms": w.UpdatedMs, "ids": ids, "seen": len(w.Seen), "updated_at": ""}
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
