// Command waitload measures what waiting runs cost a real `runbook serve`
// on loopback (issue 20, item 4: waiting costs no goroutine): it starts
// --runs runs of a playbook that waits (an approval, or a one-hour sleep),
// waits until runbook_runs_parked says every one is parked, and reports
// serve's resident memory then; it stops serve (SIGTERM: the runs stay
// waiting in the state file) and starts it again over the same file,
// reporting the time until it listens (it has taken its runs up by then)
// and its memory once idle, with every run parked again.
//
// With -wait key the runs are queued on a concurrency key that one run,
// started first and waiting for an approval, holds (issue 20 item 4's
// runs queued on a key). After the restart the holder is approved and
// waitload reports how long the queued runs take to run, one at a time.
//
//	go run ./tools/waitload                      # 10,000 approval runs
//	go run ./tools/waitload -wait sleep -runs 10000
//	go run ./tools/waitload -wait key -runs 10000
//
// Linux only (resident memory is read from /proc).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runbook/runbook/tools/internal/serveproc"
)

const token = "waitload-token"

var playbooks = map[string]string{
	"approval": "version: 1\nname: waiting\nsteps:\n  - {id: gate, uses: approval, with: {message: \"go?\"}}\n",
	"sleep":    "version: 1\nname: waiting\nsteps:\n  - {id: nap, uses: sleep, with: {duration: 1h}}\n",
	"key":      "version: 1\nname: waiting\nconcurrency: {key: the-key, on_busy: queue}\nsteps:\n  - {id: one, uses: set, with: {ok: true}}\n",
}

// holder is the run that holds the key the runs of -wait key queue on.
const holder = "version: 1\nname: holder\nconcurrency: {key: the-key, on_busy: queue}\nsteps:\n  - {id: gate, uses: approval, with: {message: \"go?\"}}\n"

func main() {
	bin := flag.String("bin", "", "runbook binary (built into a temp dir when empty)")
	runs := flag.Int("runs", 10000, "waiting runs")
	wait := flag.String("wait", "approval", "what the runs wait on: approval, sleep or key (a concurrency key another run holds)")
	senders := flag.Int("c", 16, "concurrent API clients starting the runs")
	release := flag.Bool("drain", true, "with -wait key, release the key after the restart and time the queued runs")
	flag.Parse()
	src, ok := playbooks[*wait]
	if !ok {
		fail("-wait must be approval, sleep or key")
	}
	dir, err := os.MkdirTemp("", "runbook-waitload-")
	check(err)
	defer os.RemoveAll(dir)
	if *bin == "" {
		*bin, err = serveproc.Build(dir)
		check(err)
	}
	check(os.MkdirAll(filepath.Join(dir, "playbooks"), 0o700))
	check(os.WriteFile(filepath.Join(dir, "playbooks", "waiting.yaml"), []byte(src), 0o600))
	check(os.WriteFile(filepath.Join(dir, "playbooks", "holder.yaml"), []byte(holder), 0o600))
	check(os.WriteFile(filepath.Join(dir, "runbook.yaml"), []byte("server: {reload: false}\n"), 0o600))
	statePath := filepath.Join(dir, "state.db")

	s := serve(*bin, dir, statePath)
	time.Sleep(300 * time.Millisecond)
	idle, _, err := serveproc.RSS(s.Cmd.Process.Pid)
	check(err)
	want, holderID := *runs, ""
	if *wait == "key" {
		holderID = startRun(s, "holder")
		waitParked(s, 1, time.Minute)
		want++
	}
	t0 := time.Now()
	start(s, *runs, *senders)
	started := time.Since(t0)
	waitParked(s, want, 10*time.Minute)
	parked := time.Since(t0)
	time.Sleep(2 * time.Second) // let the runs' goroutines end and the heap settle
	rss, peak, err := serveproc.RSS(s.Cmd.Process.Pid)
	check(err)
	anon, file := rssParts(s.Cmd.Process.Pid)
	heap := s.metric("go_memstats_heap_inuse_bytes")
	gor := s.metric("go_goroutines")
	slots := fmt.Sprintf("%v executing with a slot, %v queued for one", s.metric("runbook_runs_executing")-s.metric("runbook_runs_parked"), s.metric("runbook_runs_queued"))
	s.Stop()

	t0 = time.Now()
	s = serve(*bin, dir, statePath)
	restart := time.Since(t0)
	again := s.metric("runbook_runs_parked")
	time.Sleep(2 * time.Second)
	rss2, peak2, err := serveproc.RSS(s.Cmd.Process.Pid)
	check(err)
	anon2, file2 := rssParts(s.Cmd.Process.Pid)
	heap2 := s.metric("go_memstats_heap_inuse_bytes")
	gor2 := s.metric("go_goroutines")
	var drained time.Duration
	if holderID != "" && *release {
		drained = drain(s, holderID, *runs+1)
	}
	s.Stop()

	mb := func(kib int64) string { return fmt.Sprintf("%.1f MB", float64(kib)*1024/1e6) }
	fi, err := os.Stat(statePath)
	check(err)
	fmt.Printf("%d runs waiting on %s under runbook serve (fsynced bbolt, state file %.1f MB)\n", *runs, *wait, float64(fi.Size())/1e6)
	fmt.Printf("started in %s, all parked after %s\n", started.Round(time.Millisecond), parked.Round(time.Millisecond))
	fmt.Printf("serve RSS idle %s; with every run parked %s (anon %s, file %s; peak %s), Go heap in use %.1f MB, %v goroutines; %s\n",
		mb(idle), mb(rss), mb(anon), mb(file), mb(peak), heap/1e6, gor, slots)
	fmt.Printf("restart: listening with its runs taken up in %s, %v parked; RSS %s (anon %s, file %s; peak %s), Go heap in use %.1f MB, %v goroutines\n",
		restart.Round(time.Millisecond), again, mb(rss2), mb(anon2), mb(file2), mb(peak2), heap2/1e6, gor2)
	if holderID != "" && *release {
		fmt.Printf("key released: the %d queued runs ran one at a time in %s (%.0f runs/s)\n", *runs, drained.Round(time.Millisecond), float64(*runs)/drained.Seconds())
	}
}

// startRun starts a run of playbook and returns its ID.
func startRun(s *server, playbook string) string {
	b := post(s, "/api/v1/playbooks/"+playbook+"/runs", "{}", http.StatusCreated)
	m := regexp.MustCompile(`"id":"([^"]+)"`).FindSubmatch(b)
	if m == nil {
		fail("no run ID in %s", b)
	}
	return string(m[1])
}

// drain approves the holder of the key and waits until n runs succeeded.
func drain(s *server, holderID string, n int) time.Duration {
	t0 := time.Now()
	post(s, "/api/v1/runs/"+holderID+"/approve", `{"approve": true, "by": "waitload"}`, http.StatusOK)
	for s.metric(`runbook_runs{status="succeeded"}`) < float64(n) {
		if time.Since(t0) > 30*time.Minute {
			fail("only %v of %d runs succeeded after 30 min", s.metric(`runbook_runs{status="succeeded"}`), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(t0)
}

func post(s *server, path, body string, want int) []byte {
	req, _ := http.NewRequest(http.MethodPost, s.URL+path, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	check(err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		fail("POST %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}

// rssParts reads RssAnon and RssFile (the state file's mapped pages are
// file memory) of a process, in KiB.
func rssParts(pid int) (anon, file int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	field := func(name string) int64 {
		m := regexp.MustCompile(`(?m)^` + name + `:\s+(\d+) kB`).FindSubmatch(b)
		if m == nil {
			return 0
		}
		v, _ := strconv.ParseInt(string(m[1]), 10, 64)
		return v
	}
	return field("RssAnon"), field("RssFile")
}

type server struct{ *serveproc.Server }

func serve(bin, dir, statePath string) *server {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "RUNBOOK_API_TOKEN=" + token}
	args := []string{"--listen", "127.0.0.1:0", "--config", filepath.Join(dir, "runbook.yaml"), "--state", statePath}
	s, err := serveproc.Start(bin, dir, args, env, os.Stderr, 120*time.Second)
	check(err)
	return &server{s}
}

// start starts n runs through the API with c concurrent clients.
func start(s *server, n, c int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				post(s, "/api/v1/playbooks/waiting/runs", "{}", http.StatusCreated)
			}
		})
	}
	wg.Wait()
}

// waitParked waits until n runs wait: parked (runbook_runs_parked), or,
// for a build without parking, recorded waiting or running (a sleep) with
// none pending.
func waitParked(s *server, n int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		if s.metric("runbook_runs_parked") >= float64(n) {
			return
		}
		if s.metric("runbook_runs_parked") <= 1 && s.metric("runbook_runs_executing")+s.metric("runbook_runs_queued") >= float64(n) &&
			time.Now().After(deadline.Add(-limit+30*time.Second)) {
			return // a build that does not park runs queued on a key: all taken, executing or queued for a slot
		}
		if !s.has("runbook_runs_parked") && s.metric(`runbook_runs{status="pending"}`) == 0 &&
			s.metric(`runbook_runs{status="waiting"}`)+s.metric(`runbook_runs{status="running"}`) >= float64(n) {
			time.Sleep(2 * time.Second) // the last ones record step.waiting
			return
		}
		if time.Now().After(deadline) {
			fail("only %v of %d runs parked after %s", s.metric("runbook_runs_parked"), n, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metric reads one gauge from /metrics (0 when absent: a build without
// it), name with its labels as written there.
func (s *server) metric(name string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(s.metrics())
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	check(err)
	return v
}

func (s *server) has(name string) bool {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` `).Match(s.metrics())
}

func (s *server) metrics() []byte {
	resp, err := http.Get(s.URL + "/metrics")
	check(err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	check(err)
	return b
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "waitload: "+format+"\n", args...)
	os.Exit(1)
}
