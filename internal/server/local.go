package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/runbook/runbook/internal/api"
	"github.com/runbook/runbook/internal/auth"
	"github.com/runbook/runbook/internal/engine"
	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/runner"
	"github.com/runbook/runbook/internal/state"
)

// Local serves the runs routes of the API (list, show, events, logs,
// output, approve, cancel) on a unix socket beside the state file, for the
// `runbook run` that holds the file: the CLI's runs verbs use it as they
// use a server's API. It shares the server's handlers over the process's
// own engine and store; there is no scheduler, webhook intake, queue or
// playbook directory.
//
// The socket's mode (0600) is the credential: only the file's owner can
// connect, and on Linux the peer's uid is checked too (SO_PEERCRED). The
// caller is the OS user of the connecting process: an approval it answers
// is recorded under that name unless the answer names someone (--by), and
// the audit log names it local:USER, source "unix socket, pid N", as the
// CLI names its direct changes of the state file.
type Local struct {
	s       *Server
	holder  Holder
	file    string // the holder file
	srv     *http.Server
	ln      net.Listener
	stopped chan struct{}
}

// Holder is the content of the holder file a `runbook run` writes beside
// the state file it holds (HolderFile): who holds the file and where its
// socket is ("" when it could not listen).
type Holder struct {
	PID      int       `json:"pid"`
	Socket   string    `json:"socket,omitempty"`
	Playbook string    `json:"playbook,omitempty"`
	Started  time.Time `json:"started"`
}

// HolderFile is where the `runbook run` holding stateFile describes
// itself.
func HolderFile(stateFile string) string { return stateFile + ".run" }

// maxSocketPath is the longest unix socket path every platform binds
// (sun_path is 104 bytes on the BSDs, 108 on Linux, with its NUL).
const maxSocketPath = 103

// LocalSocket is the socket path for stateFile: stateFile + ".sock", or,
// when that path is too long to bind, a name in the temporary directory
// derived from it (the holder file names the path either way).
func LocalSocket(stateFile string) string {
	p := stateFile + ".sock"
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if len(p) <= maxSocketPath {
		return p
	}
	return filepath.Join(os.TempDir(), "runbook-"+hashOf([]byte(p))[:16]+".sock")
}

// localGrace bounds how long Close waits for the requests being answered.
const localGrace = 3 * time.Second

// LocalOptions configure a Local.
type LocalOptions struct {
	Store  state.Store
	Logger *slog.Logger
	// StateFile is the held state file; the holder file and the socket
	// go beside it.
	StateFile string
	// Playbook names what the process runs, for the holder file.
	Playbook string
}

// NewLocal returns the local API of a process whose run host is not
// built yet: give Observe to the engine's observer, then Start it.
func NewLocal(o LocalOptions) *Local {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		o: Options{Engine: engine.Options{Store: o.Store}, StateFile: o.StateFile, Logger: o.Logger}, log: o.Logger,
		store: o.Store, cat: newCatalog(""), events: newBroker(), ready: make(chan struct{}),
	}
	s.metrics = newMetrics(func() int { return 0 }, playbookSource{playbooks: s.cat.all})
	return &Local{
		s:       s,
		holder:  Holder{PID: os.Getpid(), Playbook: o.Playbook, Started: time.Now().UTC()},
		file:    HolderFile(o.StateFile),
		stopped: make(chan struct{}),
	}
}

// Observe passes an engine event to the log streams that follow the run.
func (l *Local) Observe(runID string, ev state.Event) { l.s.events.publish(runID, ev) }

// Start writes the holder file and serves the API over the process's run
// host h on the socket. A socket that cannot be created is reported, and
// the holder file names the process anyway: the run goes on without it.
func (l *Local) Start(h *runner.Host) error {
	l.s.runs, l.s.eng = h, h.Engine()
	sock := LocalSocket(l.s.o.StateFile)
	ln, err := listenUnix(sock)
	if err == nil {
		l.ln, l.holder.Socket = ln, sock
	}
	if werr := l.writeHolder(); werr != nil && err == nil {
		err = fmt.Errorf("write %s: %w", l.file, werr)
	}
	if l.ln == nil {
		close(l.stopped)
		return err
	}
	l.srv = &http.Server{
		Handler: l.handler(), ReadHeaderTimeout: 10 * time.Second, ConnContext: withPeer,
		ErrorLog: slog.NewLogLogger(l.s.log.Handler(), slog.LevelWarn),
	}
	go func() {
		defer close(l.stopped)
		_ = l.srv.Serve(l.ln)
	}()
	return err
}

// Close stops serving and removes the socket and the holder file. The log
// streams of runs that ended send their end first (within ssePoll); others
// are cut after localGrace, their clients told to read on from the file.
func (l *Local) Close() {
	if l.srv != nil {
		_ = os.Remove(l.holder.Socket)
		ctx, cancel := context.WithTimeout(context.Background(), localGrace)
		if l.srv.Shutdown(ctx) != nil {
			l.s.events.close()
			_ = l.srv.Close()
		}
		cancel()
		<-l.stopped
	}
	l.s.events.close()
	if h, ok := ReadHolder(l.s.o.StateFile); ok && h.PID == l.holder.PID {
		_ = os.Remove(l.file)
	}
}

// ReadHolder reads the holder file beside stateFile.
func ReadHolder(stateFile string) (Holder, bool) {
	var h Holder
	b, err := os.ReadFile(HolderFile(stateFile))
	if err != nil || json.Unmarshal(b, &h) != nil || h.PID <= 0 {
		return h, false
	}
	return h, true
}

func (l *Local) writeHolder() error {
	b, _ := json.Marshal(l.holder)
	tmp := l.file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, l.file)
}

// listenUnix listens on a unix socket at path with mode 0600. A socket
// left by a process that is gone (nothing accepts on it) is replaced; one
// that answers is another process's and is left alone.
func listenUnix(path string) (net.Listener, error) {
	if _, err := os.Lstat(path); err == nil {
		c, derr := net.DialTimeout("unix", path, time.Second)
		if derr == nil {
			c.Close()
			return nil, fmt.Errorf("socket %s is in use by another process", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove the stale socket %s: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	// Closing the listener must not unlink a socket another process took
	// over after us; Close removes ours itself.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		_ = os.Remove(path)
		return nil, err
	}
	return ln, nil
}

// localRoutes are the API routes the local socket serves, with the
// server's handlers; localRefused are the API's other run routes, which
// need a server.
func (l *Local) localRoutes() map[string]http.HandlerFunc {
	s := l.s
	return map[string]http.HandlerFunc{
		"GET /api/v1/runs":               s.listRuns,
		"GET /api/v1/runs/{id}":          s.showRun,
		"GET /api/v1/runs/{id}/events":   s.runEvents,
		"GET /api/v1/runs/{id}/logs":     s.streamLogs,
		"GET /api/v1/runs/{id}/output":   s.runOutput,
		"POST /api/v1/runs/{id}/cancel":  l.cancel,
		"POST /api/v1/runs/{id}/approve": l.approve,
		"POST /api/v1/runs/{id}/retry":   l.refuse,
		"POST /api/v1/runs/{id}/resume":  l.refuse,
		"POST /api/v1/runs/{id}/rerun":   l.refuse,
		"GET /api/v1/state/backup":       s.backupState,
	}
}

func (l *Local) handler() http.Handler {
	mux := http.NewServeMux()
	for pattern, h := range l.localRoutes() {
		mux.HandleFunc(pattern, h)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, api.Health{Status: "ok"})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fault.NotFound, fmt.Sprintf("%s %s is not served by %s: its socket answers the runs routes only (list, show, events, logs, output, approve, cancel) and the state backup", r.Method, r.URL.Path, l.name()))
	})
	return l.authenticate(mux)
}

// name is how answers name this process.
func (l *Local) name() string { return fmt.Sprintf("runbook run (pid %d)", l.holder.PID) }

// authenticate admits the socket's peer when it is this process's user
// (or root) and makes it the caller: an admin named after the OS user.
// State-changing requests are audited like the server's.
func (l *Local) authenticate(mux *http.ServeMux) http.Handler {
	s := l.s
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := peerOf(r.Context())
		if p.known && p.uid != os.Getuid() && p.uid != 0 {
			writeError(w, http.StatusForbidden, fault.Unauthorized, fmt.Sprintf("uid %d may not use the socket of %s (uid %d)", p.uid, l.name(), os.Getuid()))
			return
		}
		// Named as the CLI names its direct changes of the state file.
		id := &auth.Identity{Name: "local:" + p.user(), Kind: auth.KindServer, Grants: []auth.Grant{{Role: auth.RoleAdmin}}}
		_, pattern := mux.Handler(r)
		rt := routeOf(r, pattern)
		az := &authz{id: id, perm: rt.perm, labels: s.labelsOf}
		r = r.WithContext(context.WithValue(r.Context(), authzKey{}, az))
		r.RemoteAddr = "unix socket"
		if p.known {
			r.RemoteAddr = "unix socket, pid " + strconv.Itoa(p.pid)
		}
		rec := &auditRecorder{ResponseWriter: w, status: http.StatusOK}
		mux.ServeHTTP(rec, r)
		if rt.action != "" && !l.refused(pattern) {
			s.auditRequest(r, az, pattern, rt.action, rec.status)
		}
	})
}

func (l *Local) refused(pattern string) bool {
	switch pattern {
	case "POST /api/v1/runs/{id}/retry", "POST /api/v1/runs/{id}/resume", "POST /api/v1/runs/{id}/rerun":
		return true
	}
	return false
}

// refuse answers the run routes that need a server: a retry, a resume or
// a rerun would execute a run in this process, which runs one playbook and exits.
func (l *Local) refuse(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusConflict, fault.Conflict, fmt.Sprintf("%s holds the state file and executes only its own run: %s needs the file; try again when that process ends, or use runbook serve", l.name(), r.URL.Path))
}

// approve answers through the server's handler; an answer that names no
// one is recorded under the caller's OS user. The answer of a run this
// process does not execute is refused: nothing would continue it until
// the file is free.
func (l *Local) approve(w http.ResponseWriter, r *http.Request) {
	if !l.executes(w, r, "answer") {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAPIBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, fault.Invalid, "reading the body failed: "+err.Error())
		return
	}
	var req api.ApproveRequest
	if json.Unmarshal(body, &req) == nil && req.By == "" {
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) == nil {
			by, _ := json.Marshal(peerOf(r.Context()).user())
			m["by"] = by
			body, _ = json.Marshal(m)
			r.ContentLength = int64(len(body))
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	l.s.approveRun(w, r)
}

// cancel cancels through the server's handler, naming the caller.
func (l *Local) cancel(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("by") == "" {
		q := r.URL.Query()
		q.Set("by", peerOf(r.Context()).user())
		r.URL.RawQuery = q.Encode()
	}
	l.s.cancelRun(w, r)
}

// executes reports whether this process executes the run of the request
// (or the run it belongs to); otherwise it answers 409.
func (l *Local) executes(w http.ResponseWriter, r *http.Request, what string) bool {
	id := r.PathValue("id")
	cur := id
	for range 16 {
		if l.s.executing(cur) {
			return true
		}
		run, err := l.s.store.GetRun(r.Context(), cur)
		if errors.Is(err, state.ErrNotFound) {
			writeError(w, http.StatusNotFound, fault.NotFound, fmt.Sprintf("no run %q", id))
			return false
		}
		if err != nil {
			writeErr(w, err)
			return false
		}
		if run.ParentID == "" {
			break
		}
		cur = run.ParentID
	}
	writeError(w, http.StatusConflict, fault.Conflict, fmt.Sprintf("run %s is not executed by %s, which holds the state file: nothing would continue it now; %s it when that process ends", id, l.name(), what))
	return false
}
