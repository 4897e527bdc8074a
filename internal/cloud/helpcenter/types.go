package helpcenter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Heading is a notice category.
type Heading struct {
	CategoryID int               `json:"categoryId"`
	Parent     int               `json:"parent"`
	Name       string            `json:"name"`
	Level      int               `json:"level"`
	Path       string            `json:"path"`
	OrderNo    int               `json:"orderNo"`
	Languages  map[string]string `json:"languages,omitempty"`
}

// Tag is a notice tag.
type Tag struct {
	TagID     int               `json:"tagId"`
	Tag       string            `json:"tag"`
	Languages map[string]string `json:"languages,omitempty"`
}

// Notice is a notice summary, one item of the notice list.
type Notice struct {
	ID           int         `json:"noticeId"`
	CategoryID   int         `json:"categoryId"`
	CategoryName string      `json:"categoryName"`
	IsTop        Flag        `json:"isTop"`
	Title        string      `json:"title"`
	Content      string      `json:"content"`
	DisplayDt    DisplayTime `json:"displayDt"`
	UpdatedDt    EpochMillis `json:"updatedDt"`
	// Tags holds tagStr split at commas; empty when the field is absent.
	Tags  TagList `json:"tagStr,omitempty"`
	IsNew Flag    `json:"isNew"`
}

// NoticeDetail is one notice as the detail operation returns it.
type NoticeDetail struct {
	ID             int          `json:"noticeId"`
	CategoryID     int          `json:"categoryId"`
	CategoryName   string       `json:"categoryName"`
	IsTop          Flag         `json:"isTop"`
	Title          string       `json:"title"`
	Content        string       `json:"content"`
	DisplayDt      DisplayTime  `json:"displayDt"`
	UpdatedDt      EpochMillis  `json:"updatedDt"`
	HasAttachments Flag         `json:"attachmentYn"`
	ReadCount      int          `json:"readCnt"`
	Attachments    []Attachment `json:"attachments"`
	Tags           []NoticeTag  `json:"tags"`
	IsNew          Flag         `json:"isNew"`
}

// Attachment describes a file attached to a notice.
type Attachment struct {
	ID          string `json:"attachmentId"`
	FileName    string `json:"fileName"`
	ContentType string `json:"contentType"`
	Size        int64  `json:"size"`
}

// NoticeTag is a tag of a notice detail.
type NoticeTag struct {
	TagID int    `json:"tagId"`
	Tag   string `json:"tag"`
}

// Page is one page of the notice list.
type Page struct {
	Notices  []Notice `json:"contents"`
	Total    int      `json:"total"`
	Pages    int      `json:"pages"`
	PageNum  int      `json:"pageNum"`
	PageSize int      `json:"pageSize"`
}

// Flag is a boolean the API sends as true/false, "true"/"false" or "Y"/"N".
type Flag bool

// UnmarshalJSON accepts a boolean, "true"/"false", "Y"/"N", "1"/"0" and
// null (false).
func (f *Flag) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	if s == "null" {
		*f = false
		return nil
	}
	if uq, err := strconv.Unquote(s); err == nil {
		s = strings.TrimSpace(uq)
	}
	switch strings.ToLower(s) {
	case "true", "y", "yes", "1":
		*f = true
	case "false", "n", "no", "0", "":
		*f = false
	default:
		return fmt.Errorf("helpcenter: flag: want true/false or Y/N, got %s", b)
	}
	return nil
}

// EpochMillis is a time in epoch milliseconds (updatedDt), sent as a number
// or a numeric string.
type EpochMillis int64

// UnmarshalJSON accepts a number, a numeric string, "" and null (zero).
func (m *EpochMillis) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	if uq, err := strconv.Unquote(s); err == nil {
		s = strings.TrimSpace(uq)
	}
	if s == "null" || s == "" {
		*m = 0
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return fmt.Errorf("helpcenter: epoch milliseconds: got %s", b)
		}
		n = int64(f)
	}
	*m = EpochMillis(n)
	return nil
}

// Time returns the instant (zero time for 0).
func (m EpochMillis) Time() time.Time {
	if m == 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(m))
}

// TagList is tagStr: tag names, comma-separated in the API (its stated type
// is Integer, its values text).
type TagList []string

// UnmarshalJSON accepts a comma-separated string, a number, an array of
// strings and null.
func (t *TagList) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	if s == "null" {
		*t = nil
		return nil
	}
	if strings.HasPrefix(s, "[") {
		var list []string
		if err := json.Unmarshal(b, &list); err != nil {
			return fmt.Errorf("helpcenter: tagStr: %w", err)
		}
		*t = clean(list)
		return nil
	}
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	}
	*t = clean(strings.Split(s, ","))
	return nil
}

func clean(in []string) TagList {
	var out TagList
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Display time layouts: the stated format and the form the samples show.
const (
	LayoutDisplay = "20060102150405" // yyyyMMddHHmmss
	LayoutDotted  = "2006.01.02"     // yyyy.MM.dd
)

// DisplayTime is displayDt: the raw text and the time it denotes in the
// help center's location (Config.Location). A dotted date denotes midnight.
type DisplayTime struct {
	Time time.Time
	Raw  string
}

// UnmarshalJSON parses either layout in Asia/Seoul; the client re-parses in
// Config.Location when another is configured. Unknown forms keep Raw and a
// zero Time rather than failing the whole response.
func (d *DisplayTime) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	if s == "null" {
		*d = DisplayTime{}
		return nil
	}
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	}
	*d = ParseDisplayTime(s, nil)
	return nil
}

// MarshalJSON writes the raw text back.
func (d DisplayTime) MarshalJSON() ([]byte, error) { return json.Marshal(d.Raw) }

// ParseDisplayTime parses s as yyyyMMddHHmmss, yyyy.MM.dd (also with a
// time, "yyyy.MM.dd HH:mm[:ss]") or RFC 3339 in loc (nil: Asia/Seoul). The
// result's Time is zero when no form matches.
func ParseDisplayTime(s string, loc *time.Location) DisplayTime {
	if loc == nil {
		loc = Seoul()
	}
	d := DisplayTime{Raw: s}
	v := strings.TrimSpace(s)
	for _, layout := range []string{LayoutDisplay, LayoutDotted, "2006.01.02 15:04:05", "2006.01.02 15:04", "20060102", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, loc); err == nil {
			d.Time = t
			return d
		}
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		d.Time = t.In(loc)
	}
	return d
}

// Seoul is the default location of display times (KST has no daylight
// saving time, so a fixed zone is exact when tzdata is missing), loaded
// on first use: reading the zone file at start cost every runbook
// process a blocking read and a thread.
var Seoul = sync.OnceValue(func() *time.Location {
	if loc, err := time.LoadLocation("Asia/Seoul"); err == nil {
		return loc
	}
	return time.FixedZone("KST", 9*60*60)
})
