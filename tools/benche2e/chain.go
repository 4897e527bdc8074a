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

// Chain is a shell chain against its floors, measured in turn.
type Chain struct {
	Steps int
	// The medians: runbook run of the chain; bash forking /bin/sh -c true
	// as many times (the fork floor); this Go process starting /bin/sh -c
	// true as many times through os/exec, as the shell step does (the exec
	// floor).
	Chain, Floor, Exec time.Duration
	Ratio, ExecRatio   float64 // Chain / Floor, Chain / Exec
}

// ShellChain times `runbook run` of a playbook of steps sequential
// `shell: true` steps on state (a directory for fresh bbolt files, or a
// postgres:// URL) against `bash` forking `/bin/sh -c true` as many
// times and against os/exec starting it as many times, reps times each in
// turn, and compares their medians. Under load bash's fork of itself costs
// more than os/exec's spawn (clone with CLONE_VFORK): the exec floor is the
// steadier of the two.
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
	var chains, floors, execs []time.Duration
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
		if d, err = execLoop(ctx, steps); err != nil {
			return Chain{}, fmt.Errorf("exec floor: %w", err)
		}
		execs = append(execs, d)
	}
	c := Chain{Steps: steps, Chain: median(chains), Floor: median(floors), Exec: median(execs)}
	c.Ratio = float64(c.Chain) / float64(c.Floor)
	c.ExecRatio = float64(c.Chain) / float64(c.Exec)
	return c, nil
}

// execLoop starts /bin/sh -c true n times in turn through os/exec, with
// its output read through pipes as the shell step reads it.
func execLoop(ctx context.Context, n int) (time.Duration, error) {
	start := time.Now()
	for range n {
		var out strings.Builder
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", "true")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
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
