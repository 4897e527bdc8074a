package nks

import (
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"

	cloud "github.com/runbook/runbook/internal/cloud/nks"
	"github.com/runbook/runbook/internal/sim"
)

// adminRoutes serves the domain fault injection and settings, without a
// token (they are the simulator's, not the API's):
//
//	POST /_admin/fail-next {"operation": "NODEGROUP_UPGRADE", "cluster": "c1", "nodegroup": "ng", "contents": "..."}
//	POST /_admin/durations {"CLUSTER_CREATE": "30s", ...} (GET lists them)
//	POST /_admin/versions  {"v1.32.1": true, ...}
//	POST /_admin/subnets   {"<subnet uuid>": "10.0.0.0/24", ...}
func (s *Service) adminRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /_admin/fail-next", func(w http.ResponseWriter, r *http.Request) {
		var f Failure
		if !adminDecode(w, r, &f) {
			return
		}
		if _, ok := s.durationKnown(f.Operation); !ok {
			writeError(w, errorf(400, "Unknown operation %q: use a task type such as NODEGROUP_UPGRADE.", f.Operation))
			return
		}
		if f.Contents == "" {
			f.Contents = f.Operation + " failed (injected by the simulator)"
		}
		s.FailNext(f)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /_admin/durations", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		out := map[string]string{}
		for k, v := range s.durations {
			out[k] = v.String()
		}
		s.mu.Unlock()
		sim.WriteJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /_admin/durations", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		if !adminDecode(w, r, &body) {
			return
		}
		set := map[string]time.Duration{}
		for k, v := range body {
			typ, ok := s.durationKnown(k)
			if !ok {
				writeError(w, errorf(400, "Unknown operation %q: use a task type such as CLUSTER_CREATE.", k))
				return
			}
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				writeError(w, errorf(400, "Duration of %s must be like 90s or 5m (got %q).", k, v))
				return
			}
			set[typ] = d
		}
		for k, d := range set {
			s.SetDuration(k, d)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /_admin/versions", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]bool
		if !adminDecode(w, r, &body) {
			return
		}
		for v := range body {
			if err := cloud.CheckVersion(v); err != nil {
				writeError(w, invalid(err))
				return
			}
		}
		for v, ok := range body {
			s.SetVersion(v, ok)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /_admin/subnets", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		if !adminDecode(w, r, &body) {
			return
		}
		set := map[string]netip.Prefix{}
		for id, cidr := range body {
			p, err := cloud.ParseCIDR("subnet", cidr)
			if err != nil {
				writeError(w, invalid(err))
				return
			}
			set[id] = p
		}
		for id, p := range set {
			s.SetSubnet(id, p)
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// durationKnown normalises a task type and reports whether it is one the
// simulator runs.
func (s *Service) durationKnown(typ string) (string, bool) {
	typ = strings.ToUpper(strings.TrimSpace(typ))
	_, ok := DefaultDurations[typ]
	return typ, ok
}

func adminDecode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(v); err != nil {
		writeError(w, errorf(400, "Invalid JSON in the request body: %v.", err))
		return false
	}
	return true
}
