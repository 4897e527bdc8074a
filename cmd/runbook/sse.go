package main

import (
	"bufio"
	"io"
	"strings"
)

// sseEvent is one Server-Sent Event as the API's log streams send them.
type sseEvent struct {
	typ  string // "event:" ("" when the event named none)
	id   string // "id:"
	data string // its "data:" lines, joined by newlines
}

// readSSE reads the events of an SSE stream and calls each for every event
// with data, in order, until the stream ends or each returns false
// (stopped). A line starting with ':' is a comment (the server's
// heartbeat) and a blank line ends an event, as the SSE format says.
func readSSE(r io.Reader, each func(sseEvent) (bool, error)) (stopped bool, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ev sseEvent
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				ev.typ = value
			case "id":
				ev.id = value
			case "data":
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.WriteString(value)
			}
			continue
		}
		ev.data = data.String()
		data.Reset()
		next := ev
		ev.typ = "" // the id carries on, as the format says
		if next.data == "" {
			continue
		}
		more, err := each(next)
		if err != nil || !more {
			return true, err
		}
	}
	return false, sc.Err()
}
