// Command webhookload measures webhook-to-finished-run throughput of a real
// `runbook serve`: it starts the binary on loopback with a fresh state file
// and one playbook (the shipped sms-unsubscribe, or a one-step `log`
// playbook with -playbook log), posts signed UNSUBSCRIBE deliveries from
// many senders with the simulator's webhook sender, and waits until every
// run the deliveries started has finished. It prints the acknowledgement
// rate and latencies, the end-to-end rate (deliveries whose runs all
// finished per second), the state's growth, serve's peak RSS, and the
// processor time a run took of serve, of the senders and of PostgreSQL
// (when it runs on this machine), with the rate the machine's cores would
// allow at that much a run.
//
// -state runs serve on another state location, a PostgreSQL database
// (postgres://…, the URL runbook serve --state takes) instead of a fresh
// bbolt file: use an empty database or schema of its own (the runs stay
// there; a later run counts only its own).
//
// Everything runs on 127.0.0.1 and stops by itself (-timeout bounds the
// wait for the runs). `make bench` does not run it (it takes tens of
// seconds); run it as `go run ./tools/webhookload -n 20000 -c 32`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runbook/runbook/internal/sim/webhook"
	"github.com/runbook/runbook/tools/internal/serveproc"
)

const secret = "load-test-signature"

// logPlaybook is the engine-only case: one step that touches nothing.
const logPlaybook = `version: 1
name: sms-log
inputs:
  number: {type: string}
triggers:
  - webhook: {route: sms, event: UNSUBSCRIBE, each: hook}
    inputs:
      number: ${{ trigger.hook.recipientNo }}
steps:
  - id: note
    uses: log
    with: {message: "unsubscribed ${{ inputs.number }}"}
`

func main() {
	bin := flag.String("bin", "", "runbook binary (built into a temp dir when empty)")
	which := flag.String("playbook", "sms-unsubscribe", "sms-unsubscribe (the shipped playbook) or log (one log step)")
	count := flag.Int("n", 10000, "deliveries to send")
	conc := flag.Int("c", 32, "concurrent senders")
	rate := flag.Float64("rate", 0, "deliveries offered per second, evenly spaced (0: as fast as the senders are answered)")
	hooks := flag.Int("hooks", 1, "hooks per delivery (1..1000); each starts a run")
	timeout := flag.Duration("timeout", 5*time.Minute, "how long to wait for every run to finish")
	stateLoc := flag.String("state", "", "state location passed to serve --state, e.g. postgres://user:pass@127.0.0.1:5432/db (default: a fresh bbolt file)")
	maxRunning := flag.Int("max-running", 0, "the server's server.max_running, the runs executing at once (0: its default, 64 a core)")
	flag.Parse()
	if err := run(*bin, *which, *stateLoc, *count, *conc, *hooks, *maxRunning, *rate, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "webhookload:", err)
		os.Exit(1)
	}
}

func run(bin, which, stateLoc string, count, conc, hooks, maxRunning int, rate float64, timeout time.Duration) error {
	dir, err := os.MkdirTemp("", "runbook-webhookload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		if bin, err = serveproc.Build(dir); err != nil {
			return err
		}
	}
	if err := setUp(dir, which, maxRunning); err != nil {
		return err
	}
	srv, err := startServe(bin, dir, stateLoc)
	if err != nil {
		return err
	}
	defer srv.Stop()

	before := stateSize(dir, stateLoc)
	done, err := srv.finished() // runs a reused database already holds
	if err != nil {
		return err
	}
	pm, pmErr := postmaster(stateLoc)
	serves := []int{srv.Cmd.Process.Pid}
	cpu0 := serveproc.ReadUse(serves, pm)
	start := time.Now()
	rep, err := webhook.Send(context.Background(), webhook.Options{
		To: srv.URL + "/hooks/sms", Event: "UNSUBSCRIBE", Count: count, Secret: secret,
		Concurrency: conc, MaxHooks: hooks, Rate: rate, Seed: uint64(time.Now().UnixNano()),
	})
	if err != nil {
		return err
	}
	acked := time.Since(start)
	finished, err := srv.waitFinished(done, rep.Hooks, timeout)
	drained := time.Since(start)
	used := serveproc.ReadUse(serves, pm).Since(cpu0)
	fmt.Printf("playbook %s: %d deliveries (%d hooks) from %d senders\n", which, rep.Deliveries, rep.Hooks, conc)
	fmt.Printf("  answers:   %v in %s: %.0f deliveries/s; ack p50 %s, p90 %s, p99 %s, max %s\n",
		rep.ByStatus, acked.Round(time.Millisecond), rep.PerSec, rep.P50.Round(10*time.Microsecond),
		rep.P90.Round(10*time.Microsecond), rep.P99.Round(10*time.Microsecond), rep.Max.Round(10*time.Microsecond))
	fmt.Printf("  finished:  %d of %d runs after %s: %.0f deliveries/s end to end\n",
		finished, rep.Hooks, drained.Round(time.Millisecond), float64(rep.Deliveries)/drained.Seconds())
	where := "bbolt"
	if stateLoc != "" {
		where = "postgres"
	}
	fmt.Printf("  state:     %s +%.1f MB; serve peak RSS %.0f MB\n",
		where, float64(stateSize(dir, stateLoc)-before)/1e6, float64(srv.peakRSS())/1e6)
	fmt.Printf("  CPU a run: %s\n", cpuLine(used, rep.Hooks, pmErr))
	return err
}

// cpuLine says u, the processor time of runs runs, a run, and the rate
// the machine's cores allow at that much a run; dbErr says why
// PostgreSQL's part is not measured (nil on bbolt, where it has none).
func cpuLine(u serveproc.Use, runs int, dbErr error) string {
	if runs <= 0 {
		return "no runs"
	}
	u = u.Per(runs)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	out := fmt.Sprintf("serve %.3f ms, senders %.3f ms", ms(u.Serve), ms(u.Self))
	switch {
	case dbErr != nil:
		out += fmt.Sprintf(", PostgreSQL not measured (%v)", dbErr)
	case u.Database > 0:
		out += fmt.Sprintf(", PostgreSQL %.3f ms", ms(u.Database))
	}
	cores := runtime.NumCPU()
	return out + fmt.Sprintf("; %.3f ms in all: at most %.0f runs/s on %d cores", ms(u.All()), u.Allows(cores), cores)
}

// postmaster returns the process of the PostgreSQL server at stateLoc,
// when it runs on this machine; 0 and no error on bbolt.
func postmaster(stateLoc string) (int, error) {
	if stateLoc == "" {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, stateLoc)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	return serveproc.Postmaster(ctx, conn)
}

// setUp writes the config and the playbook directory into dir.
func setUp(dir, which string, maxRunning int) error {
	pbDir := filepath.Join(dir, "playbooks")
	if err := os.MkdirAll(pbDir, 0o755); err != nil {
		return err
	}
	var src []byte
	switch which {
	case "sms-unsubscribe":
		b, err := os.ReadFile("playbooks/sms-unsubscribe.yaml")
		if err != nil {
			return fmt.Errorf("run from the repository root: %w", err)
		}
		src = b
	case "log":
		src = []byte(logPlaybook)
	default:
		return fmt.Errorf("-playbook %q: want sms-unsubscribe or log", which)
	}
	if err := os.WriteFile(filepath.Join(pbDir, which+".yaml"), src, 0o644); err != nil {
		return err
	}
	running := "" // the server's default
	if maxRunning > 0 {
		running = fmt.Sprintf("  max_running: %d\n", maxRunning)
	}
	config := `playbooks: playbooks
state: state.db
server:
  listen: 127.0.0.1:0
  token_secret: LOAD_API_TOKEN
  max_body: 1MiB
` + running + `webhooks:
  routes:
    sms:
      secret: LOAD_SMS_SECRET
schedules: false
`
	return os.WriteFile(filepath.Join(dir, "runbook.yaml"), []byte(config), 0o644)
}

// server is a running `runbook serve`.
type server struct {
	*serveproc.Server
	token string
}

func startServe(bin, dir, stateLoc string) (*server, error) {
	env := append(os.Environ(),
		"LOAD_API_TOKEN=load-token", "LOAD_SMS_SECRET="+secret,
		"SMS_SUPPRESSION_FILE="+filepath.Join(dir, "suppression.txt"), "RUNBOOK_FILE_ROOTS="+dir, "HOME="+dir, "XDG_STATE_HOME="+dir)
	args := []string{"--config", filepath.Join(dir, "runbook.yaml")}
	if stateLoc != "" {
		args = append(args, "--state", stateLoc)
	}
	s, err := serveproc.Start(bin, dir, args, env, os.Stderr, 30*time.Second)
	if err != nil {
		return nil, err
	}
	return &server{Server: s, token: "load-token"}, nil
}

// waitFinished polls the run counts of /metrics until want runs more
// than before have a final status or timeout passes, and returns how many
// had.
func (s *server) waitFinished(before, want int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		n, err := s.finished()
		if err != nil {
			return 0, err
		}
		n -= before
		if n >= want {
			return n, nil
		}
		if time.Now().After(deadline) {
			return n, fmt.Errorf("%d of %d runs finished within %s", n, want, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var finalRuns = regexp.MustCompile(`(?m)^runbook_runs\{status="(succeeded|failed|cancelled)"\} ([0-9.e+]+)$`)

func (s *server) finished() (int, error) {
	req, err := http.NewRequest(http.MethodGet, s.URL+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, m := range finalRuns.FindAllStringSubmatch(string(body), -1) {
		f, _ := strconv.ParseFloat(m[2], 64)
		total += int(f)
	}
	return total, nil
}

// peakRSS is serve's peak resident set in bytes, 0 when unknown.
func (s *server) peakRSS() int64 {
	_, peak, err := serveproc.RSS(s.Cmd.Process.Pid)
	if err != nil {
		return 0
	}
	return peak * 1024
}

// stateSize is the size of the state in bytes: the bbolt file's, or the
// PostgreSQL database's (pg_database_size).
func stateSize(dir, stateLoc string) int64 {
	if stateLoc == "" {
		return fileSize(filepath.Join(dir, "state.db"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, stateLoc)
	if err != nil {
		return 0
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&n); err != nil {
		return 0
	}
	return n
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}
