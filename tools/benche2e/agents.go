package benche2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/runbook/runbook/internal/api"

	"github.com/runbook/runbook/tools/internal/serveproc"
)

// agentPlaybook's one step runs on an agent of the pool and appends its
// run's ID to the marks file (%[1]s): a run whose ID is there twice ran
// its step twice.
const agentPlaybook = `version: 1
name: bench-agent
steps:
  - id: mark
    uses: shell
    runs_on: {labels: {pool: bench}}
    with: {command: 'echo ${{ run.id }} >> %[1]s'}
`

// AgentOptions shape a load of runs on agents.
type AgentOptions struct {
	Agents, Capacity int     // runbook agent processes, and the capacity of each
	Runs             int     // runs of bench-agent started through the API
	Rate             float64 // runs started a second
	// Kill: replica 0 is killed with SIGKILL once a third of the runs
	// were started (replicas only).
	Kill    bool
	Timeout time.Duration
}

// AgentLoad is what a load of runs on agents saw.
type AgentLoad struct {
	Runs    int     // runs started: the API answered with the run's ID
	Refused int     // starts the API did not answer with an ID (the killed replica's)
	PerSec  float64 // runs started, per second from the first start to the last run's end
	// Succeeded runs; Lost names the started runs that did not succeed or
	// whose step never ran, Twice those whose step ran more than once.
	Succeeded   int
	Lost, Twice []string
	// Most is the most attempts one agent held at once, as the agents'
	// list showed every 50 ms.
	Most     int
	Killed   bool
	Dispatch Dispatch
}

// Dispatch is the replicas' runbook_agent_dispatch_seconds summed: from
// an attempt's placement on an agent to its start there.
type Dispatch struct {
	N        int
	P50, P99 time.Duration // within the histogram's buckets, interpolated as PromQL's histogram_quantile
	Within   float64       // the fraction at or below 25 ms (a bucket's bound: exact)
}

// Agents starts o.Agents `runbook agent` processes that reach the replicas
// through a round-robin balancer on loopback (as agents reach replicas
// behind a load balancer), starts o.Runs runs of the bench-agent playbook
// through it at o.Rate a second, kills replica 0 at a third when o.Kill,
// and waits for every run's end. It fails only when the load cannot be
// carried out; what the runs did is in the AgentLoad.
func (c *Cluster) Agents(ctx context.Context, bin, dir string, o AgentOptions) (AgentLoad, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if o.Kill && len(c.Replicas) < 2 {
		return AgentLoad{}, errors.New("a replica is killed only among two or more")
	}
	bal, err := c.balance()
	if err != nil {
		return AgentLoad{}, err
	}
	defer bal.close()
	agents, err := startAgents(ctx, bin, dir, bal.URL, o)
	if err != nil {
		return AgentLoad{}, err
	}
	defer agents.stop()
	if err := c.waitAgents(ctx, bal.URL, o.Agents); err != nil {
		return AgentLoad{}, err
	}
	var most atomic.Int64
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		c.watchAgents(watchCtx, bal.URL, &most)
	}()

	var out AgentLoad
	var killedHist histogram
	start := time.Now()
	ids, refused := c.startRuns(ctx, bal.URL+"/api/v1/playbooks/bench-agent/runs", o.Runs, o.Rate, func(i int) {
		if !o.Kill || i != o.Runs/3 {
			return
		}
		// What replica 0 measured, read just before it dies.
		killedHist, _ = c.dispatchHistogram(ctx, 0)
		bal.dead(0)
		if _, err := c.kill(0); err == nil {
			out.Killed = true
		}
	})
	out.Runs, out.Refused = len(ids), refused
	status, err := c.waitEnded(ctx, ids)
	stopWatch()
	<-watched
	if err != nil {
		return out, err
	}
	out.PerSec = float64(len(ids)) / time.Since(start).Seconds()
	out.Most = int(most.Load())
	marks, err := readMarks(filepath.Join(dir, "marks"))
	if err != nil {
		return out, err
	}
	for _, id := range ids {
		switch {
		case status[id] != "succeeded" || marks[id] == 0:
			out.Lost = append(out.Lost, fmt.Sprintf("%s (%s, ran %d times)", id, status[id], marks[id]))
		case marks[id] > 1:
			out.Twice = append(out.Twice, fmt.Sprintf("%s (ran %d times)", id, marks[id]))
		default:
			out.Succeeded++
		}
	}
	hist := killedHist
	for i := range c.Replicas {
		if c.Replicas[i].Cmd.ProcessState != nil {
			continue
		}
		h, err := c.dispatchHistogram(ctx, i)
		if err != nil {
			return out, err
		}
		hist = hist.add(h)
	}
	out.Dispatch = hist.summary(0.025)
	return out, nil
}

// balancer sends each request to the next live replica.
type balancer struct {
	URL     string
	srv     *http.Server
	killed  []atomic.Bool
	replica []*url.URL
	next    atomic.Uint64
}

func (c *Cluster) balance() (*balancer, error) {
	b := &balancer{killed: make([]atomic.Bool, len(c.Replicas))}
	for _, r := range c.Replicas {
		u, err := url.Parse(r.URL)
		if err != nil {
			return nil, err
		}
		b.replica = append(b.replica, u)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b.URL = "http://" + ln.Addr().String()
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			for range len(b.replica) {
				i := b.next.Add(1) % uint64(len(b.replica))
				if !b.killed[i].Load() {
					r.SetURL(b.replica[i])
					return
				}
			}
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute},
		// The requests in flight to the killed replica fail (502): the
		// agents try again, the starts are counted refused.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	b.srv = &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

func (b *balancer) dead(i int) { b.killed[i].Store(true) }

func (b *balancer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.srv.Shutdown(ctx)
}

// agentProcs are the agents a load started.
type agentProcs []*exec.Cmd

// startAgents creates an agent token through url and starts o.Agents
// agents of o.Capacity with the label pool=bench, each logging to
// dir/agent-NN.log.
func startAgents(ctx context.Context, bin, dir, url string, o AgentOptions) (agentProcs, error) {
	tok := exec.CommandContext(ctx, bin, "token", "create", "bench-agents", "--role", "agent", "--server", url)
	tok.Dir, tok.Env = dir, append(os.Environ(), "RUNBOOK_API_TOKEN="+apiToken, "HOME="+dir)
	b, err := tok.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("create the agents' token: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	token := lines[len(lines)-1]
	var procs agentProcs
	for i := range o.Agents {
		name := fmt.Sprintf("bench-%02d", i)
		logf, err := os.Create(filepath.Join(dir, "agent-"+name+".log"))
		if err != nil {
			procs.stop()
			return nil, err
		}
		cmd := exec.Command(bin, "agent", "--server", url, "--name", name, "--labels", "pool=bench", "--capacity", strconv.Itoa(o.Capacity))
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "RUNBOOK_AGENT_TOKEN="+token, "HOME="+dir)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = serveproc.DeathSignal()
		err = cmd.Start()
		logf.Close()
		if err != nil {
			procs.stop()
			return nil, err
		}
		procs = append(procs, cmd)
	}
	return procs, nil
}

// stop ends the agents with SIGTERM (they drain: their attempts ended),
// killing any still there after 10 s.
func (p agentProcs) stop() {
	var wg sync.WaitGroup
	for _, cmd := range p {
		wg.Go(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	wg.Wait()
}

// waitAgents waits until the agents' list through url has n agents.
func (c *Cluster) waitAgents(ctx context.Context, url string, n int) error {
	for {
		var l api.AgentList
		err := c.call(ctx, http.MethodGet, url+"/api/v1/agents", nil, &l)
		if err == nil && len(l.Agents) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %d agents to register: %w (last: %d, %v)", n, ctx.Err(), len(l.Agents), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// watchAgents keeps in most the most attempts one agent held at once,
// reading the agents' list every 50 ms until ctx ends.
func (c *Cluster) watchAgents(ctx context.Context, url string, most *atomic.Int64) {
	for ctx.Err() == nil {
		var l api.AgentList
		if err := c.call(ctx, http.MethodGet, url+"/api/v1/agents", nil, &l); err == nil {
			for _, a := range l.Agents {
				if n := int64(len(a.Running)); n > most.Load() {
					most.Store(n)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startRuns posts n starts to url at rate a second from 16 senders and
// returns the IDs of the runs started and how many starts were not
// answered with one. before(i) is called before the i-th start is handed
// to a sender.
func (c *Cluster) startRuns(ctx context.Context, url string, n int, rate float64, before func(i int)) (ids []string, refused int) {
	work := make(chan struct{})
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range work {
				var run struct {
					ID string `json:"id"`
				}
				err := c.call(ctx, http.MethodPost, url, strings.NewReader(`{}`), &run)
				mu.Lock()
				if err != nil || run.ID == "" {
					refused++
				} else {
					ids = append(ids, run.ID)
				}
				mu.Unlock()
			}
		})
	}
	tick := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	for i := range n {
		before(i)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(tick)
		select {
		case work <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			refused += n - i
			break
		}
	}
	close(work)
	wg.Wait()
	return ids, refused
}

// waitEnded waits until every run of ids has a final status and returns
// them: from the database, or on bbolt from the replica's API.
func (c *Cluster) waitEnded(ctx context.Context, ids []string) (map[string]string, error) {
	for {
		status, err := c.statuses(ctx, ids)
		if err == nil {
			ended := 0
			for _, s := range status {
				if s == "succeeded" || s == "failed" || s == "cancelled" || s == "skipped" {
					ended++
				}
			}
			if ended == len(ids) {
				return status, nil
			}
		}
		select {
		case <-ctx.Done():
			return status, fmt.Errorf("wait for %d runs to end: %w", len(ids), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Cluster) statuses(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if c.db != nil {
		rows, err := c.db.Query(ctx, `SELECT id, status FROM runbook_runs WHERE id = ANY($1)`, ids)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var id, st string
			if err := rows.Scan(&id, &st); err != nil {
				return nil, err
			}
			out[id] = st
		}
		return out, rows.Err()
	}
	for _, id := range ids {
		var r struct {
			Status string `json:"status"`
		}
		if err := c.get(ctx, 0, "/api/v1/runs/"+id, &r); err != nil {
			return nil, err
		}
		out[id] = r.Status
	}
	return out, nil
}

// readMarks counts the lines of the marks file by run ID.
func readMarks(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]int{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out[strings.TrimSpace(sc.Text())]++
	}
	return out, sc.Err()
}

// histogram is a Prometheus histogram's cumulative counts by upper bound.
type histogram map[float64]float64

var dispatchBucket = regexp.MustCompile(`(?m)^runbook_agent_dispatch_seconds_bucket\{le="([^"]+)"\} ([0-9.e+]+)$`)

// dispatchHistogram reads replica i's runbook_agent_dispatch_seconds.
func (c *Cluster) dispatchHistogram(ctx context.Context, i int) (histogram, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Replicas[i].URL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	h := histogram{}
	for _, m := range dispatchBucket.FindAllStringSubmatch(string(body), -1) {
		le, err := strconv.ParseFloat(m[1], 64) // "+Inf" parses as +Inf
		if err != nil {
			return nil, fmt.Errorf("bucket %q: %w", m[1], err)
		}
		n, _ := strconv.ParseFloat(m[2], 64)
		h[le] = n
	}
	if len(h) == 0 {
		return nil, fmt.Errorf("replica %d: no runbook_agent_dispatch_seconds in /metrics", i)
	}
	return h, nil
}

func (h histogram) add(o histogram) histogram {
	out := histogram{}
	for le, n := range h {
		out[le] += n
	}
	for le, n := range o {
		out[le] += n
	}
	return out
}

// summary is the count, the median and 99th percentile, and the fraction
// at or below bound (one of the bucket bounds).
func (h histogram) summary(bound float64) Dispatch {
	les := make([]float64, 0, len(h))
	for le := range h {
		les = append(les, le)
	}
	slices.Sort(les)
	if len(les) == 0 || h[math.Inf(1)] == 0 {
		return Dispatch{}
	}
	total := h[math.Inf(1)]
	q := func(p float64) time.Duration {
		rank := p * total
		lower, below := 0.0, 0.0
		for _, le := range les {
			if h[le] >= rank {
				if math.IsInf(le, 1) {
					return seconds(lower) // past the last finite bound: the bound, as PromQL says
				}
				return seconds(lower + (le-lower)*(rank-below)/(h[le]-below))
			}
			lower, below = le, h[le]
		}
		return seconds(lower)
	}
	return Dispatch{N: int(total), P50: q(0.5), P99: q(0.99), Within: h[bound] / total}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
