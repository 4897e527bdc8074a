package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/steps/ssh/sshtest"
)

// sshInventory is a config whose hosts web1..web3 (role=web) and db1
// (role=db) are all the one loopback sshd, logged in to with its key.
func sshInventory(s *sshtest.Server) string {
	var b strings.Builder
	b.WriteString("hosts:\n")
	for _, h := range []struct{ name, role string }{{"web1", "web"}, {"web2", "web"}, {"web3", "web"}, {"db1", "db"}} {
		fmt.Fprintf(&b, "  %s:\n    address: %s\n    user: %s\n    labels: {role: %s, env: test}\n    host_key: %s\n    private_key_secret: SSH_KEY\n",
			h.name, s.Addr, s.User, h.role, s.PublicKey())
	}
	return b.String()
}

const everyWebHost = `version: 1
name: web-restart
inputs:
  note: {type: string}
steps:
  - id: restart
    uses: ssh
    for_each: ${{ hosts("role=web") }}
    max_parallel: 2
    with:
      host: ${{ item.name }}
      env: {TOKEN: "${{ secrets.DEPLOY_TOKEN }}"}
      command: |
        echo "$(date +%s%N) start ${{ item.name }}" >> "${{ env.OUT }}/log"
        printf '%s' "${{ inputs.note }}" > "${{ env.OUT }}/note-${{ item.name }}"
        echo "on ${{ item.name }} with token=$TOKEN"
        sleep 5
        echo "$(date +%s%N) end ${{ item.name }}" >> "${{ env.OUT }}/log"
`

// TestRunbookRunsACommandOnEveryWebHostTwoAtATime: runbook run of a
// playbook whose step runs on hosts("role=web"), max_parallel 2, over an
// inventory of three web hosts and a database: the three web hosts run
// it, never more than two at once, the database does not; an input full
// of shell metacharacters reaches each host as data; the secret it
// prints is masked.
func TestRunbookRunsACommandOnEveryWebHostTwoAtATime(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	c := newCLI(t)
	out := t.TempDir()
	c.file("runbook.yaml", sshInventory(s))
	c.file("web.yaml", everyWebHost)
	c.env = append(c.env, "SSH_KEY="+s.ClientKey, "DEPLOY_TOKEN=tok-5f1e2d3c", "OUT="+out)
	note := `it's "$(touch ` + filepath.Join(out, "pwned") + `)"; rm -rf / ` + "`id`"

	r := c.run("validate", "web.yaml")
	require.Equal(t, 0, r.code, r.String())

	r = c.run("plan", "web.yaml", "-i", "note=x")
	require.Equal(t, 0, r.code, r.String())
	assert.Contains(t, r.stdout, `"name":"web1"`, "plan expands hosts() from the config")
	assert.NotContains(t, r.stdout, "db1")
	assert.Contains(t, r.stdout, `"TOKEN":"***"`, "plan masks the secret")

	r = c.run("run", "web.yaml", "-i", "note="+note)
	require.Equal(t, 0, r.code, r.String())
	id := runIDOf(t, r.stdout+r.stderr)

	logs := c.run("runs", "logs", id)
	require.Equal(t, 0, logs.code, logs.String())
	for _, h := range []string{"web1", "web2", "web3"} {
		assert.Contains(t, logs.stdout, "on "+h+" with token=***", "each host printed its line, the secret masked")
		got, err := os.ReadFile(filepath.Join(out, "note-"+h))
		require.NoError(t, err, "the command ran on %s", h)
		assert.Equal(t, note, string(got), "the input reached %s as data", h)
	}
	assert.NotContains(t, logs.stdout+r.stdout+r.stderr, "tok-5f1e2d3c")
	assert.NotContains(t, logs.stdout, "on db1")
	assert.NoFileExists(t, filepath.Join(out, "pwned"), "the input ran as shell code")

	most, ran := overlap(t, filepath.Join(out, "log"))
	assert.Equal(t, []string{"web1", "web2", "web3"}, ran)
	assert.Equal(t, 2, most, "two hosts at a time, never three")
	t.Logf("runbook run took %s; at most %d hosts at once", r.took.Round(time.Millisecond), most)
}

// TestRunbookValidateRefusesAnUnknownHost: validate and plan name a host
// that the inventory lacks, at its place in the playbook.
func TestRunbookValidateRefusesAnUnknownHost(t *testing.T) {
	c := newCLI(t)
	c.file("runbook.yaml", `hosts:
  web1: {address: 10.0.0.11, user: deploy, host_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl, private_key_secret: SSH_KEY}
`)
	c.file("typo.yaml", `version: 1
name: typo
steps:
  - id: reload
    uses: ssh
    with:
      host: wbe1
      command: systemctl reload nginx
`)
	r := c.run("validate", "typo.yaml")
	assert.Equal(t, 2, r.code, r.String())
	assert.Contains(t, r.stderr, `typo.yaml:7:7: steps[0].with.host: host "wbe1" is not in hosts: of runbook.yaml (hosts: web1); did you mean "web1"?`)

	r = c.run("plan", "typo.yaml")
	assert.Equal(t, 2, r.code, r.String())
	assert.Contains(t, r.stdout, `! with.host: host "wbe1" is not in hosts: of runbook.yaml`)

	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "playbooks"), 0o700))
	require.NoError(t, os.Rename(filepath.Join(c.dir, "typo.yaml"), filepath.Join(c.dir, "playbooks", "typo.yaml")))
	r = c.run("config", "check")
	assert.Equal(t, 2, r.code, r.String())
	assert.Contains(t, r.stderr, `typo.yaml:7:7: steps[0].with.host: host "wbe1" is not in hosts: of runbook.yaml`)
	require.NoError(t, os.Rename(filepath.Join(c.dir, "playbooks", "typo.yaml"), filepath.Join(c.dir, "typo.yaml")))

	c.file("typo.yaml", strings.Replace(`version: 1
name: typo
steps:
  - id: reload
    uses: ssh
    with:
      host: wbe1
      command: systemctl reload nginx
`, "wbe1", "web1", 1))
	r = c.run("plan", "typo.yaml")
	require.Equal(t, 0, r.code, r.String())
	assert.Contains(t, r.stdout, "→ SSH deploy@10.0.0.11")
	assert.Contains(t, r.stdout, "command: systemctl reload nginx")
}

// overlap reads a log of "NANOS start|end HOST" lines and returns the
// most hosts between start and end at once, and the hosts that started.
func overlap(t *testing.T, file string) (int, []string) {
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	type ev struct {
		at    int64
		delta int
	}
	var evs []ev
	var ran []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		require.Len(t, f, 3, "log line %q", line)
		at, err := strconv.ParseInt(f[0], 10, 64)
		require.NoError(t, err)
		if f[1] == "start" {
			evs, ran = append(evs, ev{at, 1}), append(ran, f[2])
		} else {
			evs = append(evs, ev{at, -1})
		}
	}
	sort.Slice(evs, func(i, j int) bool {
		return evs[i].at < evs[j].at || (evs[i].at == evs[j].at && evs[i].delta < evs[j].delta)
	})
	n, most := 0, 0
	for _, e := range evs {
		n += e.delta
		most = max(most, n)
	}
	sort.Strings(ran)
	return most, ran
}

// TestAPlaybookCannotRedirectAnInventoryHost: a playbook's connections:
// entry for an inventory host (which could send its password elsewhere)
// is refused, and a rehearsal never reaches a host.
func TestAPlaybookCannotRedirectAnInventoryHost(t *testing.T) {
	conns := &connections{defaults: map[string]map[string]any{
		"hosts":     {"web1": map[string]any{"name": "web1"}},
		"host:web1": {"name": "web1", "address": "10.0.0.11", "password": "pw"},
	}}
	_, err := conns.resolve("host:web1", map[string]any{"address": "evil.example.com:22"})
	assert.ErrorContains(t, err, `connection "host:web1" belongs to the config's hosts: inventory; a playbook's connections: cannot set it`)
	got, err := conns.resolve("host:web1", nil)
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.11", got["address"])
	_, err = conns.resolve("host:web9", nil)
	assert.ErrorContains(t, err, "host web9 is not in the inventory: add it under hosts: in runbook.yaml")

	conns.sim = map[string]map[string]any{"nks": {}}
	_, err = conns.resolve("host:web1", nil)
	assert.ErrorContains(t, err, "host web1: a rehearsal (--sim, --sim-url) never reaches a real host")
	listing, err := conns.resolve("hosts", nil)
	require.NoError(t, err, "hosts() lists the inventory in a rehearsal too")
	assert.Contains(t, listing, "web1")
}
