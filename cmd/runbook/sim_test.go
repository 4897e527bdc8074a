package main

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startSim runs `runbook sim` on a free loopback port, with extra flags,
// and returns its URL. It outlives the runs a test kills, as a real cloud
// would.
func (c *cli) startSim(flags ...string) string {
	c.t.Helper()
	cmd := exec.Command(bin, append([]string{"sim", "--addr", "127.0.0.1:0"}, flags...)...)
	cmd.Dir, cmd.Env = c.dir, c.env
	out, err := cmd.StdoutPipe()
	require.NoError(c.t, err)
	require.NoError(c.t, cmd.Start())
	c.t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`simulators on (http://127\.0\.0\.1:\d+)`)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case url := <-found:
		return url
	case <-time.After(10 * time.Second):
		c.t.Fatal("runbook sim printed no address")
		return ""
	}
}

func TestDigestAgainstASeparateSimulatorPostsOnlyWhatIsNew(t *testing.T) {
	c := newCLI(t)
	url := c.startSim()
	pb := c.file("digest.yaml", `
version: 1
name: digest
steps:
  - id: digest
    uses: notice.digest
    with: {file: out/digest.md, first_run: all, max_notices: 500}
`)
	digest := func() string {
		r := c.run("run", "--sim-url", url, pb, "--output", "json")
		require.Equal(t, 0, r.code, r)
		return r.stdout
	}
	first := digest()
	assert.Regexp(t, `"posted":\s*true`, first)

	resp, err := http.Post(url+"/helpcenter/_admin/notices", "application/json",
		strings.NewReader(`{"title":"Emergency maintenance of the load balancers","content":"tonight","categoryId":1}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	second := digest()
	assert.Regexp(t, `"count":\s*1\b`, second, "only the added notice is new")
	third := digest()
	assert.Regexp(t, `"posted":\s*false`, third, "nothing new: nothing written")

	b, err := os.ReadFile(filepath.Join(c.dir, "out", "digest.md"))
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(b), "Emergency maintenance of the load balancers"))
}

func TestSimUrlThatAnswersNothingIsAClearError(t *testing.T) {
	c := newCLI(t)
	pb := c.file("p.yaml", "version: 1\nname: p\nsteps:\n  - {id: a, uses: log, with: {message: hi}}\n")
	r := c.run("run", "--sim-url", "http://127.0.0.1:1", pb)
	assert.Equal(t, 1, r.code, r)
	assert.Contains(t, r.stderr, "reach the simulator at http://127.0.0.1:1")
	assert.Contains(t, r.stderr, "runbook sim")
}

func TestApprovingARehearsalContinuesAgainstTheSameSimulator(t *testing.T) {
	c := newCLI(t)
	url := c.startSim("--services", "identity,nks")
	pb := c.file("gated.yaml", `
version: 1
name: gated
steps:
  - id: gate
    uses: approval
    with: {message: "read the versions?"}
  - id: supports
    uses: nks.supports
  - id: show
    uses: log
    with: {message: "newest ${{ steps.supports.outputs.latest }}"}
`)
	r := c.run("run", "--sim-url", url, pb)
	require.Equal(t, 0, r.code, r)
	id := runIDOf(t, r.stdout)
	assert.Contains(t, r.stdout, "waiting for approval")

	r = c.run("runs", "approve", id, "gate", "--sim-url", url)
	require.Equal(t, 0, r.code, r)
	assert.Regexp(t, `show: newest v\d+\.\d+\.\d+`, r.stdout)
	assert.Contains(t, r.stdout, "run "+id+" succeeded")
}
