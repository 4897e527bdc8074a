//go:build benche2e

package benche2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runbook/runbook/internal/state/postgres/pgtest"
	"github.com/runbook/runbook/tools/internal/serveproc"
)

var (
	deliveries = flag.Int("n", 10000, "deliveries per store, one run each")
	senders    = flag.Int("c", 32, "concurrent webhook senders")
	dispatchN  = flag.Int("dispatch", 1000, "runs of two shell steps for the dispatch latency")
	rate       = flag.Float64("rate", 100, "runs a second started for the dispatch latency")
	smsN       = flag.Int("sms", 10000, "deliveries to the shipped sms-unsubscribe playbook per store (0: none)")
	smsRate    = flag.Float64("sms-rate", 1000, "deliveries a second offered to sms-unsubscribe")
	lease      = flag.Duration("lease", 10*time.Second, "server.lease of the replicas (the failover time follows it)")
	chains     = flag.String("chains", "100,1000", "lengths of the shell chains, comma-separated")
	reps       = flag.Int("reps", 3, "runs of each shell chain and of its floor, in turn")
	only       = flag.String("stores", "bbolt,postgres-1,postgres-3", "stores to measure, comma-separated")
	agentsN    = flag.Int("agents", 20, "runbook agent processes for TestBenchAgents")
	capacity   = flag.Int("capacity", 10, "capacity of each agent")
	agentRuns  = flag.Int("agent-runs", 10000, "one-step runs on the agents")
	agentRate  = flag.Float64("agent-rate", 50, "runs a second started on the agents")
	walWarm    = flag.Int("wal-warm", 384, "MiB of WAL segment files PostgreSQL has ready before each load, as a server in service has (0: a new cluster's none)")
)

// TestBenchE2E prints the end-to-end figures of docs/performance.md:
//
//	make bench-e2e
//	go test -tags benche2e -run BenchE2E -v -timeout 30m ./tools/benche2e -args -n 10000 -chains 100
func TestBenchE2E(t *testing.T) {
	bin := build(t)
	ctx := context.Background()
	machine("runbook end to end")
	fmt.Printf("%d deliveries from %d senders per store; %d two-step runs at %.0f/s for dispatch; %d sms-unsubscribe deliveries offered at %.0f/s; lease %s\n\n",
		*deliveries, *senders, *dispatchN, *rate, *smsN, *smsRate, *lease)
	var smsRows, cpuRows, walRows []string
	fmt.Println("| store | deliveries/s end to end | ack p50 | ack p99 | dispatch p50 | dispatch p99 | failover: takeover | failover: run ended |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, s := range storesToMeasure() {
		state := s.state(t)
		walRows = append(walRows, warmWAL(ctx, s.name, state))
		progress("%s: starting %d replica(s)", s.name, s.replicas)
		c, err := StartCluster(bin, t.TempDir(), state, s.replicas, *lease)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		progress("%s: %d deliveries", s.name, *deliveries)
		tp, err := c.Deliveries(ctx, *deliveries, *senders, 10*time.Minute)
		if err != nil {
			c.Stop()
			t.Fatalf("%s: deliveries: %v", s.name, err)
		}
		cpuRows = append(cpuRows, cpuRow(s.name, "log", tp.CPU, tp.CPUErr))
		progress("%s: dispatch", s.name)
		d, err := c.Dispatch(ctx, *dispatchN, *rate, 10*time.Minute)
		if err != nil {
			c.Stop()
			t.Fatalf("%s: dispatch: %v", s.name, err)
		}
		cpuRows = append(cpuRows, cpuRow(s.name, fmt.Sprintf("dispatch at %.0f/s", *rate), d.CPU, d.CPUErr))
		if *smsN > 0 {
			progress("%s: sms-unsubscribe", s.name)
			sms, err := c.SMS(ctx, *smsN, *senders, *smsRate, 10*time.Minute)
			if err != nil {
				c.Stop()
				t.Fatalf("%s: sms-unsubscribe: %v", s.name, err)
			}
			if failed, err := c.Failed(ctx); err != nil || failed > 0 {
				c.Stop()
				t.Fatalf("%s: sms-unsubscribe: %d runs failed (%v)", s.name, failed, err)
			}
			smsRows = append(smsRows, fmt.Sprintf("| %s | %.0f | %.0f%s | %s | %s |", s.name, *smsRate, sms.PerSec, refusedOf(sms),
				ms(sms.AckP50), ms(sms.AckP99)))
			cpuRows = append(cpuRows, cpuRow(s.name, "sms-unsubscribe", sms.CPU, sms.CPUErr))
		}
		takeover, ended := "–", "–"
		if s.replicas > 1 {
			progress("%s: failover", s.name)
			to, end, err := c.Failover(ctx, 2*time.Minute+3**lease)
			if err != nil {
				c.Stop()
				t.Fatalf("%s: failover: %v", s.name, err)
			}
			takeover, ended = ms(to), ms(end)
		}
		c.Stop()
		fmt.Printf("| %s | %.0f%s | %s | %s | %s | %s | %s | %s |\n", s.name, tp.PerSec, refusedOf(tp), ms(tp.AckP50), ms(tp.AckP99),
			ms(d.P50), ms(d.P99), takeover, ended)
	}
	fmt.Println()
	if len(smsRows) > 0 {
		fmt.Println("| store | sms-unsubscribe offered/s | finished/s end to end | ack p50 | ack p99 |")
		fmt.Println("|---|---|---|---|---|")
		for _, r := range smsRows {
			fmt.Println(r)
		}
		fmt.Println()
	}
	fmt.Printf("Processor time a run, over each load (user and system; the harness holds the senders); the cores divided by their sum bound the runs a second:\n\n")
	fmt.Printf("| store | playbook | runbook serve | harness | PostgreSQL | all | runs/s the %d cores allow |\n", runtime.NumCPU())
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range cpuRows {
		fmt.Println(r)
	}
	fmt.Println()
	fmt.Println("| store | shell steps | runbook run (median) | fork floor: bash (median) | ratio | exec floor: os/exec (median) | ratio |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, n := range strings.Split(*chains, ",") {
		steps, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil {
			t.Fatalf("-chains: %v", err)
		}
		for _, s := range []string{"bbolt", "postgres"} {
			if !strings.Contains(*only, s) {
				continue
			}
			state := ""
			if s == "postgres" {
				state = pgtest.DB(t)
				walRows = append(walRows, warmWAL(ctx, fmt.Sprintf("%s, chain of %d", s, steps), state))
			}
			progress("%s: chain of %d shell steps", s, steps)
			ch, err := ShellChain(ctx, bin, t.TempDir(), state, steps, *reps)
			if err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			fmt.Printf("| %s | %d | %s | %s | %.2f× | %s | %.2f× |\n", s, steps, ch.Chain.Round(time.Millisecond),
				ch.Floor.Round(time.Millisecond), ch.Ratio, ch.Exec.Round(time.Millisecond), ch.ExecRatio)
		}
	}
	fmt.Println()
	for _, r := range walRows {
		if r != "" {
			fmt.Println(r)
		}
	}
	fmt.Printf("\nload average at the end %s\n", loadAverage())
}

// warmWAL readies -wal-warm MiB of WAL segment files on the PostgreSQL
// server at state before the loads of what (WarmWAL), and says so; ""
// on bbolt. A server that refuses (a role that may not checkpoint) is
// measured as it is, and the line says why.
func warmWAL(ctx context.Context, what, state string) string {
	if state == "" {
		return ""
	}
	if *walWarm <= 0 {
		return fmt.Sprintf("- %s: WAL not readied (-wal-warm 0): each 16 MiB of WAL creates its segment file", what)
	}
	progress("%s: readying %d MiB of WAL segment files", what, *walWarm)
	ahead, err := WarmWAL(ctx, state, int64(*walWarm)<<20)
	if err != nil {
		return fmt.Sprintf("- %s: WAL not readied (%v): %d MiB of segment files ahead", what, err, ahead>>20)
	}
	return fmt.Sprintf("- %s: %d MiB of WAL segment files ready ahead of the load (-wal-warm %d)", what, ahead>>20, *walWarm)
}

// cpuRow is a row of the processor time table: u, a run of playbook on
// store over its load; cpuErr says why PostgreSQL's part is not measured.
func cpuRow(store, playbook string, u serveproc.Use, cpuErr error) string {
	db := "–"
	switch {
	case cpuErr != nil:
		db = "not measured: " + cpuErr.Error()
	case strings.HasPrefix(store, "postgres"):
		db = msFine(u.Database)
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %.0f |", store, playbook, msFine(u.Serve), msFine(u.Self), db,
		msFine(u.All()), u.Allows(runtime.NumCPU()))
}

func msFine(d time.Duration) string {
	return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond))
}

// refusedOf notes the deliveries of tp that were not answered 200.
func refusedOf(tp Throughput) string {
	if tp.Refused == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d refused)", tp.Refused)
}

// benchStore is a store the measuring tests start replicas on.
type benchStore struct {
	name     string
	pg       bool
	replicas int
}

// storesToMeasure are the stores -stores names, in the order bbolt,
// postgres-1, postgres-3.
func storesToMeasure() []benchStore {
	var out []benchStore
	for _, s := range []benchStore{{"bbolt", false, 1}, {"postgres-1", true, 1}, {"postgres-3", true, 3}} {
		if strings.Contains(","+*only+",", ","+s.name+",") {
			out = append(out, s)
		}
	}
	return out
}

// state is the store's --state: a new PostgreSQL database, or "" (a
// bbolt file of the cluster's).
func (s benchStore) state(t *testing.T) string {
	if s.pg {
		return pgtest.DB(t)
	}
	return ""
}

// machine prints what measures, on which machine, as it starts.
func machine(what string) {
	host, _ := os.Hostname()
	fmt.Printf("%s on %s: %d CPUs, %s; load average at the start %s\n", what, host, runtime.NumCPU(), runtime.Version(), loadAverage())
}

// progress says on stderr what the harness is measuring.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// TestBenchAgents prints the agents' load figures of docs/agents.md: for
// each store, -agent-runs one-step runs on -agents agents of -capacity,
// started at -agent-rate a second through a balancer; with three replicas
// replica 0 is killed with SIGKILL at a third of them.
//
//	make bench-agents
//	go test -tags benche2e -run BenchAgents -v -timeout 60m ./tools/benche2e -args -stores postgres-3 -agent-runs 10000
func TestBenchAgents(t *testing.T) {
	bin := build(t)
	ctx := context.Background()
	machine("runbook agents")
	fmt.Printf("%d one-step runs started at %.0f/s on %d agents x %d; lease %s\n\n", *agentRuns, *agentRate, *agentsN, *capacity, *lease)
	fmt.Println("| store | replica killed | runs | refused | runs/s | succeeded once | lost | twice | most on one agent | dispatch p50 | dispatch p99 | ≤ 25 ms |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range storesToMeasure() {
		progress("%s: starting %d replica(s)", s.name, s.replicas)
		dir := t.TempDir()
		c, err := StartCluster(bin, dir, s.state(t), s.replicas, *lease)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		progress("%s: %d runs on %d agents", s.name, *agentRuns, *agentsN)
		l, err := c.Agents(ctx, bin, dir, AgentOptions{Agents: *agentsN, Capacity: *capacity, Runs: *agentRuns, Rate: *agentRate,
			Kill: s.replicas > 1, Timeout: 30 * time.Minute})
		c.Stop()
		if err != nil {
			t.Fatalf("%s: agents: %v", s.name, err)
		}
		killed := "no"
		if l.Killed {
			killed = "yes, at a third"
		}
		fmt.Printf("| %s | %s | %d | %d | %.0f | %d | %d | %d | %d | %s | %s | %.2f%% |\n", s.name, killed, l.Runs, l.Refused, l.PerSec, l.Succeeded,
			len(l.Lost), len(l.Twice), l.Most, ms(l.Dispatch.P50), ms(l.Dispatch.P99), 100*l.Dispatch.Within)
		for _, id := range append(l.Lost, l.Twice...) {
			t.Errorf("%s: %s", s.name, id)
		}
		if l.Most > *capacity {
			t.Errorf("%s: an agent held %d attempts at once (capacity %d)", s.name, l.Most, *capacity)
		}
	}
	fmt.Printf("\nload average at the end %s\n", loadAverage())
}
