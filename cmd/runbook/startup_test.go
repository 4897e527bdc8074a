package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// initBudget bounds what every runbook process allocates in package
// initialisation, before main runs: `runbook version` measured 0.57 MB in
// 4,560 allocations once the web UI's templates, the step types' params
// tags and the loaders' patterns were built on first use (3.3 MB in 43,000
// before, most of it parsing 30 templates nobody rendered), and 0.39 MB in
// 3,512 once /metrics was written by internal/metric instead of the
// Prometheus client library (its registries and Protocol Buffers'), 0.36
// MB in 3,050 once no pattern compiled at start. What
// is left is spread thin: the YAML decoder's tables, the step families'
// descriptors, encoding/xml's, html/template's and the SSH client's own
// set-up, 33 KB or less each.
const (
	initBudgetBytes  = 512 << 10
	initBudgetAllocs = 4500
)

// initLine is one line of GODEBUG=inittrace=1: a package's initialisation.
var initLine = regexp.MustCompile(`^init (\S+) @\S+ \S+, \S+ \S+ clock, (\d+) bytes, (\d+) allocs$`)

type pkgInit struct {
	pkg           string
	bytes, allocs int
}

func TestStartUpBuildsNothingTheCommandDoesNotUse(t *testing.T) {
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), stderr.String())

	var inits []pkgInit
	var total pkgInit
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		m := initLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		b, _ := strconv.Atoi(m[2])
		a, _ := strconv.Atoi(m[3])
		inits = append(inits, pkgInit{m[1], b, a})
		total.bytes += b
		total.allocs += a
	}
	require.NotEmpty(t, inits, "GODEBUG=inittrace=1 printed no init lines:\n%s", stderr.String())
	sort.Slice(inits, func(i, j int) bool { return inits[i].bytes > inits[j].bytes })
	var top bytes.Buffer
	for _, in := range inits[:min(8, len(inits))] {
		fmt.Fprintf(&top, "  %8d bytes %6d allocs  %s\n", in.bytes, in.allocs, in.pkg)
	}
	t.Logf("runbook version: %d packages initialised, %d bytes in %d allocations; the largest:\n%s",
		len(inits), total.bytes, total.allocs, top.String())
	assert.LessOrEqual(t, total.bytes, initBudgetBytes,
		"package initialisation allocates more than its budget; build what a command uses when it uses it (sync.OnceValue). The largest:\n%s", top.String())
	assert.LessOrEqual(t, total.allocs, initBudgetAllocs,
		"package initialisation allocates more often than its budget. The largest:\n%s", top.String())
}
