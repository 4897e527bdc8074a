package benche2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Chain is a shell chain against its fork floor, measured in turn.
type Chain struct {
	Steps        int
	Chain, Floor time.Duration // medians
	Ratio        float64       // Chain / Floor
}

// ShellChain times `runbook run` of a playbook of steps sequential
// `shell: true` steps on state (a directory for fresh bbolt files, or a
// postgres:// URL) against `bash` forking `/bin/sh -c true` as many
// times, reps times each in turn, and compares their medians.
func ShellChain(ctx context.Context, bin, dir, state string, steps, reps int) (Chain, error) {
	var b strings.Builder
	b.WriteString("version: 1\nname: chain\nsteps:\n")
	for i := range steps {
		fmt.Fprintf(&b, "  - {id: s%d, uses: shell, with: {command: \"true\"}}\n", i)
	}
	pb := filepath.Join(dir, fmt.Sprintf("chain-%d.yaml", steps))
	if err := os.WriteFile(pb, []byte(b.String()), 0o644); err != nil {
		return Chain{}, err
	}
	floor := fmt.Sprintf("for i in $(seq %d); do /bin/sh -c true; done", steps)
	var chains, floors []time.Duration
	for i := range reps {
		where := state
		if where == "" {
			where = filepath.Join(dir, fmt.Sprintf("chain-%d-%d.db", steps, i))
		}
		d, err := timed(ctx, exec.Command(bin, "run", "--state", where, pb), dir)
		if err != nil {
			return Chain{}, fmt.Errorf("runbook run of %d shell steps: %w", steps, err)
		}
		chains = append(chains, d)
		if d, err = timed(ctx, exec.Command("bash", "-c", floor), dir); err != nil {
			return Chain{}, fmt.Errorf("fork floor: %w", err)
		}
		floors = append(floors, d)
	}
	c := Chain{Steps: steps, Chain: median(chains), Floor: median(floors)}
	c.Ratio = float64(c.Chain) / float64(c.Floor)
	return c, nil
}

// timed runs cmd in dir, killed when ctx ends, and returns its wall time.
func timed(ctx context.Context, cmd *exec.Cmd, dir string) (time.Duration, error) {
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_STATE_HOME="+dir)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return 0, fmt.Errorf("%w: %s", err, tail(out.String()))
		}
		return time.Since(start), nil
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return 0, ctx.Err()
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func tail(s string) string {
	if len(s) > 400 {
		return "…" + s[len(s)-400:]
	}
	return s
}
