// Command benchrun measures the runbook binary as users run it: wall time
// and peak RSS of `runbook run` over generated playbooks of N sequential
// `shell` steps, and of a one-step playbook. `make bench` runs it.
//
// Each case runs several times with a fresh state file; the median wall time
// and the largest peak RSS are reported, with the per-step cost so that
// linear growth is visible (the cost per step of 1,000 steps should match
// that of 100).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/runbook/runbook/tools/internal/serveproc"
)

func main() {
	bin := flag.String("bin", "", "runbook binary (built into a temp dir when empty)")
	reps := flag.Int("n", 5, "repetitions per case")
	flag.Parse()
	dir, err := os.MkdirTemp("", "runbook-bench-")
	check(err)
	defer os.RemoveAll(dir)
	if *bin == "" {
		*bin, err = serveproc.Build(dir)
		check(err)
	}
	cases := []struct {
		name  string
		steps int
		uses  string
	}{
		{"one step (log)", 1, "log"},
		{"100 shell steps", 100, "shell"},
		{"1000 shell steps", 1000, "shell"},
	}
	fmt.Printf("%-20s %10s %12s %12s %10s\n", "case", "steps", "wall (med)", "per step", "peak RSS")
	for _, c := range cases {
		pb := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".yaml")
		check(os.WriteFile(pb, []byte(playbook(c.steps, c.uses)), 0o600))
		var walls []time.Duration
		var rss int64
		for i := 0; i < *reps; i++ {
			state := filepath.Join(dir, fmt.Sprintf("state-%d.db", i))
			cmd := exec.Command(*bin, "run", "--state", state, pb)
			cmd.Stdout, cmd.Stderr = nil, os.Stderr
			start := time.Now()
			check(cmd.Run())
			walls = append(walls, time.Since(start))
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > rss {
				rss = ru.Maxrss
			}
			os.Remove(state)
		}
		sort.Slice(walls, func(i, j int) bool { return walls[i] < walls[j] })
		med := walls[len(walls)/2]
		fmt.Printf("%-20s %10d %12s %12s %8.1f MB\n", c.name, c.steps, med.Round(time.Millisecond),
			(med / time.Duration(c.steps)).Round(time.Microsecond), float64(rss)/1024)
	}
}

func playbook(n int, uses string) string {
	var b strings.Builder
	b.WriteString("version: 1\nname: bench\nsteps:\n")
	for i := 0; i < n; i++ {
		switch uses {
		case "shell":
			fmt.Fprintf(&b, "  - {id: s%d, uses: shell, with: {command: \"true\"}}\n", i)
		default:
			fmt.Fprintf(&b, "  - {id: s%d, uses: log, with: {message: hello}}\n", i)
		}
	}
	return b.String()
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
}
