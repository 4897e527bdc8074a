package helpcenter

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// seoul is the help center's time zone (no daylight saving time).
var seoul = sync.OnceValue(func() *time.Location {
	if loc, err := time.LoadLocation("Asia/Seoul"); err == nil {
		return loc
	}
	return time.FixedZone("KST", 9*60*60)
})

type notice struct {
	id          int
	category    int
	isTop       bool
	title       map[string]string // per language; one "" key for notices added as-is
	content     map[string]string
	tags        []int
	display     time.Time
	created     time.Time
	updated     time.Time
	readCnt     int
	attachments []*attachment
}

type attachment struct {
	id          string
	fileName    string
	contentType string
	data        []byte
}

func (n *notice) text(m map[string]string, lang string) string {
	if s, ok := m[lang]; ok {
		return s
	}
	if s, ok := m[""]; ok {
		return s
	}
	return m[languages[0]]
}

// generate builds n notices dated before now, reproducibly from seed.
func generate(seed uint64, n int, now time.Time) []*notice {
	rng := rand.New(rand.NewPCG(seed, 0x6e6f74696365)) // "notice"
	totalWeight := 0
	for _, t := range templates {
		totalWeight += t.weight
	}
	out := make([]*notice, 0, n)
	usedCreated := map[int64]bool{}
	local := now.In(seoul())
	todayStart := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, seoul())
	for i := 0; i < n; i++ {
		w := rng.IntN(totalWeight)
		var tpl template
		for _, t := range templates {
			if w < t.weight {
				tpl = t
				break
			}
			w -= t.weight
		}
		p := products[rng.IntN(len(products))]
		// Dates are anchored to the start of the day (Seoul), not to the
		// moment the simulator started: every start on the same day
		// generates the same notices with the same times, so a digest run
		// against a fresh --sim sees nothing new, as against a real service.
		var display time.Time
		if i%40 == 7 { // a few dated today: isNew
			display = todayStart.Add(time.Duration(rng.IntN(60)) * time.Second)
		} else {
			display = todayStart.Add(-time.Duration(rng.Int64N(int64(180 * 24 * time.Hour))))
		}
		display = display.Truncate(time.Second)
		created := display.Add(-time.Duration(1+rng.IntN(72*3600)) * time.Second)
		for usedCreated[created.Unix()] {
			created = created.Add(-time.Second)
		}
		usedCreated[created.Unix()] = true
		// Never updated after the anchor (or after a notice dated today was
		// displayed): a notice added later is always the newest.
		limit := todayStart
		if display.After(limit) {
			limit = display
		}
		updated := created.Add(time.Duration(rng.IntN(10*24*3600))*time.Second + time.Duration(rng.IntN(1000))*time.Millisecond)
		if updated.After(limit) {
			updated = limit
		}
		start := 1 + rng.IntN(5)
		vars := strings.NewReplacer(
			"{product}", p.name,
			"{date}", display.In(seoul()).Format("2006.01.02"),
			"{start}", fmt.Sprintf("%02d:00", start),
			"{end}", fmt.Sprintf("%02d:00", start+1+rng.IntN(4)),
			"{version}", fmt.Sprintf("v%d.%d", 1+rng.IntN(3), rng.IntN(20)),
			"{pct}", strconv.Itoa(5+5*rng.IntN(6)),
		)
		nt := &notice{
			id: 1001 + i, category: tpl.category, isTop: i%97 == 3,
			title: map[string]string{}, content: map[string]string{},
			display: display, created: created, updated: updated,
		}
		for _, l := range languages {
			nt.title[l] = vars.Replace(tpl.title[l])
			nt.content[l] = vars.Replace(tpl.content[l])
		}
		if rng.IntN(10) < 7 { // most notices carry their product's tag
			nt.tags = append(nt.tags, p.tag)
			switch r := rng.IntN(10); {
			case r < 2:
				nt.tags = append(nt.tags, 11)
			case r < 3:
				nt.tags = append(nt.tags, 12)
			case r < 4 && tpl.category == catPricing:
				nt.tags = append(nt.tags, 6)
			case r < 5:
				nt.tags = append(nt.tags, 5)
			}
		}
		switch {
		case tpl.category == catPricing:
			nt.attachments = append(nt.attachments, priceTable(rng, p.slug, p.name))
		case tpl.category == catIncident && rng.IntN(2) == 0:
			nt.attachments = append(nt.attachments, incidentReport(rng, p.name, nt.title["en"]))
		case rng.IntN(10) == 0:
			nt.attachments = append(nt.attachments, screenshot(rng, p.slug))
			if rng.IntN(2) == 0 {
				nt.attachments = append(nt.attachments, &attachment{
					id: newAttachmentID(rng), fileName: "release-notes-" + p.slug + ".txt", contentType: "text/plain; charset=utf-8",
					data: []byte(nt.title["en"] + "\n\n" + stripTags(nt.content["en"]) + "\n"),
				})
			}
		}
		out = append(out, nt)
	}
	return out
}

func newAttachmentID(rng *rand.Rand) string {
	return fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
}

func stripTags(s string) string {
	var b strings.Builder
	in := false
	for _, r := range s {
		switch {
		case r == '<':
			in = true
		case r == '>':
			in = false
			b.WriteByte(' ')
		case !in:
			b.WriteRune(r)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// priceTable is a CSV file with a Korean file name (exercises RFC 2231
// encoding in Content-Disposition).
func priceTable(rng *rand.Rand, slug, product string) *attachment {
	var b strings.Builder
	b.WriteString("product,item,unit,price_before_krw,price_after_krw\n")
	for _, item := range []string{"standard", "high-memory", "storage-gb", "traffic-gb"} {
		before := 10 * (1 + rng.IntN(500))
		fmt.Fprintf(&b, "%s,%s,%s,%d,%d\n", product, item, "hour", before, before+before*(5*(1+rng.IntN(4)))/100)
	}
	return &attachment{id: newAttachmentID(rng), fileName: "요금표_" + slug + ".csv", contentType: "text/csv; charset=utf-8", data: []byte(b.String())}
}

// incidentReport is a small valid PDF with one page of text.
func incidentReport(rng *rand.Rand, product, title string) *attachment {
	text := strings.NewReplacer(`\`, `\\`, "(", `\(`, ")", `\)`).Replace(asciiOnly(title))
	stream := fmt.Sprintf("BT /F1 12 Tf 40 780 Td (%s) Tj ET", text)
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	name := fmt.Sprintf("incident-report-%s-%04d.pdf", strings.ToLower(strings.ReplaceAll(asciiOnly(product), " ", "-")), rng.IntN(10000))
	return &attachment{id: newAttachmentID(rng), fileName: name, contentType: "application/pdf", data: b.Bytes()}
}

func asciiOnly(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 0x20 && r < 0x7f {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// screenshot is a small PNG.
func screenshot(rng *rand.Rand, slug string) *attachment {
	img := image.NewRGBA(image.Rect(0, 0, 32, 20))
	base := color.RGBA{uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256)), 255}
	for y := 0; y < 20; y++ {
		for x := 0; x < 32; x++ {
			c := base
			if y < 4 {
				c = color.RGBA{30, 30, 40, 255}
			}
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return &attachment{id: newAttachmentID(rng), fileName: "console-" + slug + ".png", contentType: "image/png", data: b.Bytes()}
}
