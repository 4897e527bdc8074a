package logncrash

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/runbook/runbook/internal/cloud/logncrash"
	"github.com/runbook/runbook/internal/sim"
)

func init() { sim.Register("logncrash", New) }

// Result codes of refusals.
const (
	CodeBadBody    = 4001 // not JSON, or not a log object / array
	CodeBadAppKey  = 4002 // projectName is not an accepted appkey
	CodeBadField   = 4003 // a required field missing or malformed, a bad custom field
	maxRequestBody = 8 << 20
)

// Entry is one received log: the object as sent, and when it arrived
// (simulated time).
type Entry struct {
	Received time.Time      `json:"received"`
	Log      map[string]any `json:"log"`
}

// Service is the simulated collector.
type Service struct {
	env *sim.Env

	mu      sync.Mutex
	appkeys map[string]bool
	logs    []Entry
}

var _ sim.Service = (*Service)(nil)

// New creates the collector of env's server.
func New(env *sim.Env) (sim.Service, error) {
	s := &Service{env: env, appkeys: map[string]bool{}}
	s.appkeys[s.AppKey()] = true
	return s, nil
}

// AppKey returns the appkey the connection hands out.
func (s *Service) AppKey() string { return fmt.Sprintf("sim-logncrash-appkey-%d", s.env.Seed) }

// AddAppKey accepts another appkey.
func (s *Service) AddAppKey(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appkeys[k] = true
}

// Logs returns every log received, oldest first.
func (s *Service) Logs() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.logs...)
}

// Reset forgets the received logs.
func (s *Service) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logs = nil
}

// Connection returns base_url and the accepted appkey.
func (s *Service) Connection(baseURL string) map[string]any {
	return map[string]any{"base_url": baseURL, "appkey": s.AppKey()}
}

// Handler serves POST /v2/log and the admin routes.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v2/log", s.post)
	mux.HandleFunc("GET /_admin/logs", func(w http.ResponseWriter, r *http.Request) {
		sim.WriteJSON(w, http.StatusOK, s.Logs())
	})
	mux.HandleFunc("DELETE /_admin/logs", func(w http.ResponseWriter, r *http.Request) {
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		envelope(w, http.StatusNotFound, false, 404, "Not Found")
	})
	return mux
}

func (s *Service) post(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil || len(raw) > maxRequestBody {
		envelope(w, http.StatusRequestEntityTooLarge, false, CodeBadBody, "request body too large")
		return
	}
	raw = bytes.TrimSpace(raw)
	var logs []map[string]any
	dec := func(v any) error {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		return d.Decode(v)
	}
	if len(raw) > 0 && raw[0] == '[' {
		err = dec(&logs)
	} else {
		var one map[string]any
		if err = dec(&one); err == nil {
			logs = []map[string]any{one}
		}
	}
	if err != nil || len(logs) == 0 {
		envelope(w, http.StatusBadRequest, false, CodeBadBody, "Invalid request body: expected a JSON log object or an array of them")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range logs {
		if code, msg := s.validate(l); code != 0 {
			if len(logs) > 1 {
				msg = fmt.Sprintf("log %d: %s", i, msg)
			}
			envelope(w, http.StatusBadRequest, false, code, msg)
			return
		}
	}
	now := s.env.Clock.Now().UTC()
	for _, l := range logs {
		s.logs = append(s.logs, Entry{Received: now, Log: l})
	}
	envelope(w, http.StatusOK, true, 0, "Success.")
}

// validate checks one log (s.mu held).
func (s *Service) validate(l map[string]any) (int, string) {
	str := func(k string) (string, bool) {
		v, ok := l[k].(string)
		return v, ok
	}
	pn, _ := str("projectName")
	if pn == "" {
		return CodeBadField, "projectName is required"
	}
	if !s.appkeys[pn] {
		return CodeBadAppKey, "Invalid appkey: " + pn
	}
	if v, _ := str("logVersion"); v != logncrash.LogVersion {
		return CodeBadField, fmt.Sprintf("logVersion must be %q", logncrash.LogVersion)
	}
	if v, _ := str("projectVersion"); v == "" {
		return CodeBadField, "projectVersion is required"
	}
	if v, _ := str("body"); v == "" {
		return CodeBadField, "body is required"
	}
	if v, ok := l["logLevel"]; ok {
		lv, _ := v.(string)
		if !logncrash.ValidLevel(lv) {
			return CodeBadField, fmt.Sprintf("logLevel %v is not one of DEBUG, INFO, WARN, ERROR, FATAL", v)
		}
	}
	known := map[string]bool{}
	for _, k := range []string{"projectName", "projectVersion", "logVersion", "body", "logLevel", "logSource", "logType", "host", "sendTime"} {
		known[k] = true
	}
	names := make([]string, 0, len(l))
	for k := range l {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if known[k] {
			continue
		}
		if msg := logncrash.ValidField(k); msg != "" {
			return CodeBadField, msg
		}
		switch l[k].(type) {
		case map[string]any, []any:
			return CodeBadField, fmt.Sprintf("field %q must be a string, number or boolean", k)
		}
	}
	return 0, ""
}

func envelope(w http.ResponseWriter, status int, ok bool, code int, msg string) {
	sim.WriteJSON(w, status, map[string]any{"header": map[string]any{"isSuccessful": ok, "resultCode": code, "resultMessage": msg}})
}
