// Command hookload measures what one large webhook delivery costs a real
// `runbook serve` on loopback: the SMS unsubscribe playbook of the repo
// (one run per hook) receives one UNSUBSCRIBE delivery of --hooks hooks.
// It reports the answer time, the growth of the state file when the answer
// arrives and once every run has finished, serve's resident memory (now
// and peak), a listing of the last 1,000 runs (time and bytes), and a
// restart over the grown file (time to listen, memory once idle). Since
// bbolt grows a small file by doubling it, the file's size says little of
// what a delivery adds: it also reports the bytes of the pages in use
// (bolt's Store.Usage, read once serve stopped) at the start, once every
// run ended and, in a second delivery to a fresh file whose serve is
// killed as it answers, at the answer.
//
//	go run ./tools/hookload                # build the binary, 1,000 hooks, once
//	go run ./tools/hookload -n 3 -hooks 300
//
// Linux only (resident memory is read from /proc).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/runbook/runbook/internal/state/bolt"
	"github.com/runbook/runbook/tools/internal/serveproc"
)

const (
	secret = "hookload-secret"
	token  = "hookload-token"
)

func main() {
	bin := flag.String("bin", "", "runbook binary (built into a temp dir when empty)")
	hooks := flag.Int("hooks", 1000, "hooks in the delivery (at most 1,000)")
	reps := flag.Int("n", 1, "repetitions, each with a fresh state file")
	pbPath := flag.String("playbook", "playbooks/sms-unsubscribe.yaml", "playbook served (a webhook trigger on route sms)")
	flag.Parse()
	dir, err := os.MkdirTemp("", "runbook-hookload-")
	check(err)
	defer os.RemoveAll(dir)
	if *bin == "" {
		*bin, err = serveproc.Build(dir)
		check(err)
	}
	src, err := os.ReadFile(*pbPath)
	check(err)
	body := deliveryBody(*hooks)
	fmt.Printf("one UNSUBSCRIBE delivery of %d hooks (%d bytes) to runbook serve, %s\n", *hooks, len(body), *pbPath)
	var all []result
	for i := range *reps {
		rdir := filepath.Join(dir, strconv.Itoa(i))
		setup(rdir, src)
		r := measure(*bin, rdir, body, *hooks)
		adir := rdir + "-answer"
		setup(adir, src)
		r.usedAnswer = usedAtAnswer(*bin, adir, body, *hooks)
		fmt.Println(r)
		all = append(all, r)
	}
	if len(all) > 1 {
		sort.Slice(all, func(i, j int) bool { return all[i].answer < all[j].answer })
		fmt.Printf("median answer %s\n", all[len(all)/2].answer.Round(time.Millisecond))
	}
}

// setup makes dir a serve's directory: the playbook src and a config
// with the sms webhook route, and no state file.
func setup(dir string, src []byte) {
	check(os.MkdirAll(filepath.Join(dir, "playbooks"), 0o700))
	check(os.WriteFile(filepath.Join(dir, "playbooks", "pb.yaml"), src, 0o600))
	check(os.WriteFile(filepath.Join(dir, "runbook.yaml"), []byte("server: {reload: false, max_body: 16MiB}\nwebhooks:\n  routes:\n    sms: {secret: SMS_WEBHOOK_SECRET}\n"), 0o600))
}

type result struct {
	answer, allDone, list, restart time.Duration
	stateBase, stateAnswer         int64
	stateDone                      int64
	rssBase, rssDone, rssPeak      int64 // KiB
	listBytes                      int
	rssRestart                     int64
	// bytes of the pages in use: before the delivery, at the answer
	// (another file: usedAtAnswer) and once every run ended
	usedBase, usedAnswer, usedDone int64
}

func (r result) String() string {
	mb := func(b int64) string { return fmt.Sprintf("%.2f MB", float64(b)/1e6) }
	kib := func(k int64) string { return fmt.Sprintf("%.0f MB", float64(k)*1024/1e6) }
	return fmt.Sprintf("answer %s; state +%s at the answer, +%s when every run ended (%s after the answer); "+
		"serve RSS %s idle, %s after, peak %s (+%s); runs?limit=1000: %d bytes in %s; restart: listening in %s, RSS %s",
		r.answer.Round(time.Millisecond), mb(r.stateAnswer-r.stateBase), mb(r.stateDone-r.stateBase), r.allDone.Round(time.Millisecond),
		kib(r.rssBase), kib(r.rssDone), kib(r.rssPeak), kib(r.rssPeak-r.rssBase), r.listBytes, r.list.Round(time.Millisecond),
		r.restart.Round(time.Millisecond), kib(r.rssRestart)) +
		fmt.Sprintf("; pages in use +%s at the answer, +%s when every run ended", mb(r.usedAnswer-r.usedBase), mb(r.usedDone-r.usedBase))
}

func measure(bin, dir string, body []byte, hooks int) result {
	var r result
	statePath := filepath.Join(dir, "state.db")
	s := serve(bin, dir, statePath)
	time.Sleep(300 * time.Millisecond) // let start-up settle
	s.stop()
	r.usedBase = usedBytes(statePath)
	s = serve(bin, dir, statePath)
	time.Sleep(300 * time.Millisecond)
	r.stateBase = size(statePath)
	r.rssBase, _ = rss(s.Cmd.Process.Pid)

	start := time.Now()
	deliver(s, body, hooks)
	r.answer = time.Since(start)
	r.stateAnswer = size(statePath)

	for deadline := time.Now().Add(10 * time.Minute); ; {
		var open struct{ Runs []json.RawMessage }
		s.get("/api/v1/runs?status=pending,running,waiting&limit=1", &open)
		if len(open.Runs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			fail("runs still open after 10 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.allDone = time.Since(start) - r.answer
	r.stateDone = size(statePath)
	r.rssDone, r.rssPeak = rss(s.Cmd.Process.Pid)

	start = time.Now()
	r.listBytes = s.get("/api/v1/runs?limit=1000", nil)
	r.list = time.Since(start)
	s.stop()
	r.usedDone = usedBytes(statePath)

	start = time.Now()
	s = serve(bin, dir, statePath)
	r.restart = time.Since(start)
	time.Sleep(time.Second)
	r.rssRestart, _ = rss(s.Cmd.Process.Pid)
	s.stop()
	return r
}

// deliver posts the delivery to s and checks it started a run per hook.
func deliver(s *server, body []byte, hooks int) {
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/hooks/sms", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json;charset=UTF-8")
	req.Header.Set("X-Cloud-Webhook-Signature", secret)
	resp, err := http.DefaultClient.Do(req)
	check(err)
	ans, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fail("delivery answered %d: %s", resp.StatusCode, ans)
	}
	var a struct{ Runs []string }
	check(json.Unmarshal(ans, &a))
	if len(a.Runs) != hooks {
		fail("delivery started %d runs, want %d", len(a.Runs), hooks)
	}
}

// usedAtAnswer delivers body to a serve on a fresh state file in dir,
// kills it (SIGKILL) as it answers and returns the bytes of the pages in
// use then: what the delivery and its runs' creation hold (the runs may
// have begun in the moment between).
func usedAtAnswer(bin, dir string, body []byte, hooks int) int64 {
	statePath := filepath.Join(dir, "state.db")
	s := serve(bin, dir, statePath)
	time.Sleep(300 * time.Millisecond)
	deliver(s, body, hooks)
	_ = s.Cmd.Process.Kill()
	_ = s.Cmd.Wait()
	return usedBytes(statePath)
}

// usedBytes is the bytes of the pages in use in the state file at path
// (bolt's Store.Usage), which no process holds.
func usedBytes(path string) int64 {
	st, err := bolt.Open(path, bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	check(err)
	defer st.Close()
	u, err := st.Usage(context.Background())
	check(err)
	return int64(u.FilePages-u.FreePages) * int64(u.PageSize)
}

type server struct{ *serveproc.Server }

func serve(bin, dir, statePath string) *server {
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"SMS_WEBHOOK_SECRET=" + secret, "RUNBOOK_API_TOKEN=" + token,
		"SMS_SUPPRESSION_FILE=" + filepath.Join(dir, "suppression.txt"), "RUNBOOK_FILE_ROOTS=" + dir,
	}
	args := []string{"--listen", "127.0.0.1:0", "--config", filepath.Join(dir, "runbook.yaml"), "--state", statePath}
	s, err := serveproc.Start(bin, dir, args, env, nil, 60*time.Second)
	check(err)
	return &server{s}
}

// get calls the API, decodes the answer into v (when not nil) and returns
// its size.
func (s *server) get(path string, v any) int {
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, s.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	check(err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	check(err)
	if resp.StatusCode != http.StatusOK {
		fail("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if v != nil {
		check(json.Unmarshal(b, v))
	}
	return len(b)
}

func (s *server) stop() { s.Stop() }

// deliveryBody is an UNSUBSCRIBE envelope of n hooks, as the SMS service
// sends it.
func deliveryBody(n int) []byte {
	hooks := make([]map[string]any, n)
	for i := range hooks {
		hooks[i] = map[string]any{
			"hookId":          fmt.Sprintf("5f0c1d2e-9a8b-4c7d-8e6f-%012d", i),
			"recipientNo":     fmt.Sprintf("010%08d", 20000000+i*7919%80000000),
			"unsubscribeNo":   "0808885555",
			"enterpriseName":  "런북 주식회사",
			"createdDateTime": "2026-11-22T09:00:00.000+09:00",
		}
	}
	b, err := json.Marshal(map[string]any{
		"hooksId": fmt.Sprintf("hookload-%d", time.Now().UnixNano()), "webhookConfigId": "wcfg-0001",
		"productName": "SMS", "appKey": "hookload-appkey", "event": "UNSUBSCRIBE", "hooks": hooks,
	})
	check(err)
	return b
}

func size(path string) int64 {
	fi, err := os.Stat(path)
	check(err)
	return fi.Size()
}

// rss returns a process's resident set size and its peak, in KiB.
func rss(pid int) (cur, peak int64) {
	cur, peak, err := serveproc.RSS(pid)
	check(err)
	return cur, peak
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "hookload: "+format+"\n", args...)
	os.Exit(1)
}
