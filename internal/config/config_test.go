package config

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/inventory"
	"github.com/runbook/runbook/internal/playbook"
)

// parseOK parses src as dir/runbook.yaml and requires it to be valid.
func parseOK(t *testing.T, src string) *Config {
	t.Helper()
	c, err := Parse("/srv/rb/runbook.yaml", []byte(src))
	require.NoError(t, err)
	return c
}

// diags parses src and returns its diagnostics as strings.
func diags(t *testing.T, src string) []string {
	t.Helper()
	_, err := Parse("rb.yaml", []byte(src))
	require.Error(t, err)
	var ds playbook.Diagnostics
	require.ErrorAs(t, err, &ds)
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.String()
	}
	return out
}

func TestParseValid(t *testing.T) {
	t.Run("an empty file gives every default", func(t *testing.T) {
		for _, src := range []string{"", "# only a comment\n", "---\n", "~\n"} {
			c := parseOK(t, src)
			want := Default("/srv/rb")
			want.File = "/srv/rb/runbook.yaml"
			assert.Equal(t, want, c, "source %q", src)
		}
	})
	t.Run("every field is read and paths resolve against the file's directory", func(t *testing.T) {
		c := parseOK(t, `
playbooks: ../playbooks
state: state/runbook.db
secrets_file: /etc/runbook/secrets.env
server:
  listen: 0.0.0.0:9000
  token_secret: API_TOKEN
  shutdown_grace: 1m
  drain_grace: 20m
  max_body: 512KiB
  pretouch: 64MiB
  reload: false
  reload_interval: 500ms
webhooks:
  dedup_ttl: 2d
  routes:
    sms: {secret: SMS_WEBHOOK_SECRET}
    ops-alerts:
      secret: OPS
connections:
  nks:
    base_url: https://nks.example
    token: ${{ secrets.NKS_TOKEN }}
    region: kr1
    retries: 3
    verify: true
    nested: {password: "${{secrets.PW}}"}
  helpcenter:
  nks-kr2: {region: kr2}
schedules: false
`)
		assert.Equal(t, "/srv/rb", c.Dir)
		assert.Equal(t, "/srv/playbooks", c.Playbooks)
		assert.Equal(t, "/srv/rb/state/runbook.db", c.State)
		assert.Equal(t, "/etc/runbook/secrets.env", c.SecretsFile)
		assert.Equal(t, Server{
			Listen: "0.0.0.0:9000", TokenSecret: "API_TOKEN", ShutdownGrace: time.Minute, DrainGrace: 20 * time.Minute,
			MaxBody: 512 << 10, Pretouch: 64 << 20, Reload: false, ReloadInterval: 500 * time.Millisecond,
		}, c.Server)
		assert.Equal(t, Webhooks{DedupTTL: 48 * time.Hour, Routes: map[string]Route{
			"sms": {Secret: "SMS_WEBHOOK_SECRET"}, "ops-alerts": {Secret: "OPS"},
		}}, c.Webhooks)
		assert.Equal(t, map[string]map[string]any{
			"nks": {
				"base_url": "https://nks.example", "token": "${{ secrets.NKS_TOKEN }}",
				"region": "kr1", "retries": 3, "verify": true,
				"nested": map[string]any{"password": "${{secrets.PW}}"},
			},
			"helpcenter": {},
			"nks-kr2":    {"region": "kr2"},
		}, c.Connections)
		assert.False(t, c.Schedules)
	})
	t.Run("null sections keep their defaults", func(t *testing.T) {
		c := parseOK(t, "server:\nwebhooks:\n  routes:\nconnections:\n")
		assert.Equal(t, DefaultListen, c.Server.Listen)
		assert.Equal(t, DefaultDedupTTL, c.Webhooks.DedupTTL)
		assert.Empty(t, c.Webhooks.Routes)
	})
	t.Run("anchors, merge keys and x- keys are honoured", func(t *testing.T) {
		c := parseOK(t, `
x-common: &common {base_url: https://api.example, token: "${{ secrets.T }}"}
connections:
  nks: {<<: *common, region: kr2}
  helpcenter: *common
`)
		assert.Equal(t, map[string]any{"base_url": "https://api.example", "token": "${{ secrets.T }}", "region": "kr2"}, c.Connections["nks"])
		assert.Equal(t, "https://api.example", c.Connections["helpcenter"]["base_url"])
	})
}

func TestParseRoutes(t *testing.T) {
	c := parseOK(t, `
webhooks:
  routes:
    sms: {secret: SMS}
    sms2: {verify: shared-secret, secrets: [SMS_NEW, SMS_OLD]}
    events: {verify: standard-webhooks, secret: EV_NEW, secrets: [EV_OLD]}
`)
	assert.Equal(t, map[string]Route{
		"sms":    {Secret: "SMS"},
		"sms2":   {Secret: "SMS_NEW", Secrets: []string{"SMS_OLD"}},
		"events": {Verify: VerifyStandard, Secret: "EV_NEW", Secrets: []string{"EV_OLD"}},
	}, c.Webhooks.Routes)
	assert.Equal(t, []string{"EV_NEW", "EV_OLD", "RUNBOOK_API_TOKEN", "SMS", "SMS_NEW", "SMS_OLD"}, c.SecretRefs(), "every secret of a rotation is referenced")
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "unknown keys get a did-you-mean hint at every level",
			src:  "playbook: x\nserver:\n  lisen: :80\nwebhooks:\n  routes:\n    sms: {secert: S}\n",
			want: []string{
				`rb.yaml:1:1: playbook: unknown key "playbook"; did you mean "playbooks"?`,
				`rb.yaml:3:3: server.lisen: unknown key "lisen"; did you mean "listen"?`,
				`rb.yaml:6:10: webhooks.routes.sms: secret is required (the name of the secret holding the webhook signature)`,
				`rb.yaml:6:11: webhooks.routes.sms.secert: unknown key "secert"; did you mean "secret"?`,
			},
		},
		{
			name: "types are checked",
			src:  "playbooks: [a]\nserver: true\nwebhooks: {routes: [sms]}\nschedules: sometimes\nconnections: {nks: https://x}\n",
			want: []string{
				`rb.yaml:1:12: playbooks: must be a string (got a list)`,
				`rb.yaml:2:9: server: must be a mapping (got boolean)`,
				`rb.yaml:3:20: webhooks.routes: must be a mapping (got a list)`,
				`rb.yaml:4:12: schedules: must be a boolean (got string)`,
				`rb.yaml:5:20: connections.nks: must be a mapping of settings (got string)`,
			},
		},
		{
			name: "the document must be a mapping",
			src:  "- a\n",
			want: []string{`rb.yaml:1:1: must be a mapping (got a list)`},
		},
		{
			name: "a YAML syntax error is one diagnostic at the parser's position",
			src:  "server:\n  listen: [\n",
			want: []string{`rb.yaml:3:1: invalid YAML: while parsing a flow node: did not find expected node content`},
		},
		{
			name: "durations and sizes are range checked",
			src: `server:
  shutdown_grace: 0s
  max_body: 32MiB
  reload_interval: 10ms
webhooks:
  dedup_ttl: 30s
`,
			want: []string{
				`rb.yaml:2:19: server.shutdown_grace: must be longer than 0s`,
				`rb.yaml:3:13: server.max_body: must be between 1B and 16MiB (got 32MiB)`,
				`rb.yaml:4:20: server.reload_interval: must be at least 100ms (got 10ms)`,
				`rb.yaml:6:14: webhooks.dedup_ttl: must be at least 1m0s (got 30s)`,
			},
		},
		{
			name: "malformed durations and sizes say what is expected",
			src:  "server:\n  shutdown_grace: soon\n  max_body: 1 lots\n  reload_interval: true\n",
			want: []string{
				`rb.yaml:2:19: server.shutdown_grace: invalid duration "soon"; use e.g. 30s, 5m, 2h, 1d`,
				`rb.yaml:3:13: server.max_body: invalid size "1 lots"; use bytes or e.g. 512KiB, 1MiB`,
				`rb.yaml:4:20: server.reload_interval: must be a duration (got boolean); use e.g. 30s, 5m, 2h, 7d`,
			},
		},
		{
			name: "secret names are checked",
			src:  "server:\n  token_secret: my-token\nwebhooks:\n  routes:\n    sms: {secret: '${{ secrets.SMS }}'}\n    BadName: {secret: X}\n",
			want: []string{
				`rb.yaml:2:17: server.token_secret: invalid secret name "my-token": use letters, digits and '_', not starting with a digit`,
				`rb.yaml:5:19: webhooks.routes.sms.secret: give the secret's name, not a reference: SMS`,
				`rb.yaml:6:5: webhooks.routes.BadName: invalid route name "BadName": use 1-64 lower-case letters, digits, '_' or '-', starting with a letter or digit`,
			},
		},
		{
			name: "a route without a secret is an error",
			src:  "webhooks:\n  routes:\n    sms:\n    mail: {}\n",
			want: []string{
				`rb.yaml:3:5: webhooks.routes.sms: secret is required (the name of the secret holding the webhook signature)`,
				`rb.yaml:4:11: webhooks.routes.mail: secret is required (the name of the secret holding the webhook signature)`,
			},
		},
		{
			name: "a route's verify mode and secrets are checked where they are written",
			src: "webhooks:\n  routes:\n    a: {verify: standard-webhook, secret: S}\n    b: {verify: hmac, secrets: [S1, 2x]}\n" +
				"    c: {verify: [x], secrets: []}\n    d: {verify: standard-webhooks, secrets: S}\n    e: {verify: standard-webhooks}\n",
			want: []string{
				`rb.yaml:3:17: webhooks.routes.a.verify: unknown verify mode "standard-webhook" (want one of shared-secret, standard-webhooks); did you mean "standard-webhooks"?`,
				`rb.yaml:4:17: webhooks.routes.b.verify: unknown verify mode "hmac" (want one of shared-secret, standard-webhooks)`,
				`rb.yaml:4:37: webhooks.routes.b.secrets[1]: invalid secret name "2x": use letters, digits and '_', not starting with a digit`,
				`rb.yaml:5:17: webhooks.routes.c.verify: must be a string (got a list)`,
				`rb.yaml:5:31: webhooks.routes.c.secrets: must be a non-empty list of secret names (got a list)`,
				`rb.yaml:6:45: webhooks.routes.d.secrets: must be a non-empty list of secret names (got string)`,
				`rb.yaml:7:8: webhooks.routes.e: secret is required (the name of the secret holding the webhook signature)`,
			},
		},
		{
			name: "unknown connections get a hint or the list of known ones",
			src:  "connections:\n  nsk: {}\n  github: {}\n  nks-: {}\n",
			want: []string{
				`rb.yaml:2:3: connections.nsk: unknown connection "nsk"; did you mean "nks"?`,
				`rb.yaml:3:3: connections.github: unknown connection "github"; known: easymaker, helpcenter, identity, logncrash, nks, objectstorage, or one of them with a suffix (nks-kr2)`,
				`rb.yaml:4:3: connections.nks-: unknown connection "nks-"; did you mean "nks"?`,
			},
		},
		{
			name: "connection values allow only exact secret references",
			src: `connections:
  nks:
    token: "Bearer ${{ secrets.T }}"
    url: ${{ env.URL }}
    scopes: [a, b]
    deep: {x: "${{ secrets.bad-name }}"}
`,
			want: []string{
				`rb.yaml:3:12: connections.nks.token: only ${{ secrets.NAME }} is allowed in the config (got "Bearer ${{ secrets.T }}")`,
				`rb.yaml:4:10: connections.nks.url: only ${{ secrets.NAME }} is allowed in the config (got "${{ env.URL }}")`,
				`rb.yaml:5:13: connections.nks.scopes: must be a string, number, boolean or mapping (got a list)`,
				`rb.yaml:6:15: connections.nks.deep.x: only ${{ secrets.NAME }} is allowed in the config (got "${{ secrets.bad-name }}")`,
			},
		},
		{
			name: "duplicate keys are errors",
			src:  "schedules: true\nschedules: false\n",
			want: []string{`rb.yaml:2:1: schedules: duplicate key "schedules" (first at line 1)`},
		},
		{
			name: "empty paths are errors",
			src:  "playbooks: ''\nstate: ' '\n",
			want: []string{
				`rb.yaml:1:12: playbooks: must not be empty`,
				`rb.yaml:2:8: state: must not be empty`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, diags(t, tt.src))
		})
	}
}

func TestListen(t *testing.T) {
	tests := []struct {
		addr string
		err  string // "" when valid
	}{
		{"127.0.0.1:8088", ""},
		{"0.0.0.0:80", ""},
		{":8088", ""},
		{"[::]:8088", ""},
		{"[::1]:0", ""},
		{"localhost:65535", ""},
		{"runbook.internal:8088", ""},
		{"127.0.0.1", `invalid address "127.0.0.1": want host:port`},
		{"::1:8088", `invalid address "::1:8088"`},
		{"127.0.0.1:65536", `invalid port "65536": must be a number between 0 and 65535`},
		{"127.0.0.1:-1", `invalid port "-1"`},
		{"127.0.0.1:http", `invalid port "http"`},
		{"bad_host!:80", `invalid host "bad_host!": want an IP address or a host name`},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			c, err := Parse("rb.yaml", []byte("server: {listen: '"+tt.addr+"'}\n"))
			if tt.err == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.addr, c.Server.Listen)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "rb.yaml:1:18: server.listen: "+tt.err)
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{"1", 1, ""},
		{"1048576", 1 << 20, ""},
		{"512KiB", 512 << 10, ""},
		{"1MiB", 1 << 20, ""},
		{"1 mib", 1 << 20, ""},
		{"2MB", 2_000_000, ""},
		{"10kb", 10_000, ""},
		{"100B", 100, ""},
		{"", 0, "invalid size"},
		{"MiB", 0, "invalid size"},
		{"1.5MiB", 0, "invalid size"},
		{"-1", 0, "invalid size"},
		{"1TiB", 0, "invalid size"},
		{"99999999999999GiB", 0, "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			if tt.err != "" {
				assert.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	t.Run("max_running is a positive integer, unset sized by the server", func(t *testing.T) {
		assert.Equal(t, 0, parseOK(t, "server: {listen: '127.0.0.1:1'}").Server.MaxRunning)
		assert.Equal(t, 2, parseOK(t, "server: {max_running: 2}").Server.MaxRunning)
		assert.Equal(t, []string{`rb.yaml:2:16: server.max_running: must be between 1 and 1048576 (got 0)`}, diags(t, "server:\n  max_running: 0\n"))
		assert.Equal(t, []string{`rb.yaml:1:23: server.max_running: must be an integer (got string)`}, diags(t, "server: {max_running: many}"))
	})
	t.Run("lease is a duration between 1s and 1h, unset defaulted by the server", func(t *testing.T) {
		assert.Zero(t, parseOK(t, "server: {listen: '127.0.0.1:1'}").Server.Lease)
		assert.Equal(t, 2*time.Second, parseOK(t, "server: {lease: 2s}").Server.Lease)
		assert.Contains(t, diags(t, "server: {lease: 10ms}")[0], "server.lease")
		assert.Contains(t, diags(t, "server: {lease: 2h}")[0], "server.lease: must be at most 1h0m0s (got 2h0m0s)")
	})
	t.Run("the listener's timeouts and connection bound, unset taken by the server", func(t *testing.T) {
		c := parseOK(t, "server: {read_header_timeout: 5s, read_timeout: 20s, write_timeout: 1m, idle_timeout: 90s, max_conns_per_address: 32}")
		assert.Equal(t, []any{5 * time.Second, 20 * time.Second, time.Minute, 90 * time.Second, 32},
			[]any{c.Server.ReadHeaderTimeout, c.Server.ReadTimeout, c.Server.WriteTimeout, c.Server.IdleTimeout, c.Server.MaxConnsPerAddress})
		assert.Zero(t, parseOK(t, "server: {}").Server.ReadTimeout)
		assert.Equal(t, []string{`rb.yaml:1:24: server.read_timeout: must be at least 100ms (got 1ms)`}, diags(t, "server: {read_timeout: 1ms}"))
		assert.Equal(t, []string{`rb.yaml:1:33: server.max_conns_per_address: must be between 1 and 65536 (got 0)`}, diags(t, "server: {max_conns_per_address: 0}"))
	})
	t.Run("http allow and deny are lists of CIDRs and host names", func(t *testing.T) {
		c := parseOK(t, "http: {allow: [10.0.0.0/8, hooks.example.com], deny: ['127.0.0.0/8', '*.corp.example']}")
		require.Len(t, c.HTTP.Allow, 2)
		require.Len(t, c.HTTP.Deny, 2)
		assert.Equal(t, "*.corp.example", c.HTTP.Deny[1].Text)
		assert.Error(t, c.HTTP.Check("127.0.0.1", netip.Addr{}))
		assert.Equal(t, []string{`rb.yaml:1:24: http.deny[1]: "not a host" is neither a CIDR, an IP address nor a host name`}, diags(t, "http: {deny: [1.2.3.4, not a host]}"))
		assert.Contains(t, diags(t, "http: {deny: 127.0.0.1}")[0], "http.deny: must be a list of CIDRs and host names")
	})
	t.Run("tls names the certificate and key files, relative to the config", func(t *testing.T) {
		c := parseOK(t, "server: {tls: {cert: tls/cert.pem, key: /etc/runbook/key.pem}, metrics_token: METRICS_TOKEN}")
		assert.True(t, filepath.IsAbs(c.Server.TLSCert) && strings.HasSuffix(c.Server.TLSCert, filepath.Join("tls", "cert.pem")), c.Server.TLSCert)
		assert.Equal(t, "/etc/runbook/key.pem", c.Server.TLSKey)
		assert.Equal(t, "METRICS_TOKEN", c.Server.MetricsTokenSecret)
		assert.Contains(t, c.SecretRefs(), "METRICS_TOKEN")
		assert.Equal(t, []string{`rb.yaml:1:15: server.tls: key is required (the PEM file of the private key)`}, diags(t, "server: {tls: {cert: c.pem}}"))
	})
	t.Run("take_over_run_processes is a boolean, off by default", func(t *testing.T) {
		assert.False(t, parseOK(t, "server: {listen: '127.0.0.1:1'}").Server.TakeOverRunProcesses)
		assert.True(t, parseOK(t, "server: {take_over_run_processes: true}").Server.TakeOverRunProcesses)
		assert.Contains(t, diags(t, "server: {take_over_run_processes: maybe}")[0], "server.take_over_run_processes")
	})
	t.Run("max_body accepts a byte count and a unit", func(t *testing.T) {
		assert.Equal(t, int64(4096), parseOK(t, "server: {max_body: 4096}").Server.MaxBody)
		assert.Equal(t, int64(16<<20), parseOK(t, "server: {max_body: 16MiB}").Server.MaxBody)
		assert.Contains(t, diags(t, "server: {max_body: 0}")[0], "must be between 1B and 16MiB (got 0)")
	})
	t.Run("pretouch is a size, 0 turns it off", func(t *testing.T) {
		assert.Equal(t, int64(DefaultPretouch), parseOK(t, "server: {listen: '127.0.0.1:1'}").Server.Pretouch)
		assert.Equal(t, int64(0), parseOK(t, "server: {pretouch: 0}").Server.Pretouch)
		assert.Equal(t, int64(256<<20), parseOK(t, "server: {pretouch: 256MiB}").Server.Pretouch)
		assert.Contains(t, diags(t, "server: {pretouch: 2GiB}")[0], "must be between 0B and 1024MiB (got 2GiB)")
	})
}

func TestDurations(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"90s", 90 * time.Second},
		{"168h", 168 * time.Hour},
		{"7d", 7 * 24 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"1h30m", 90 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			c := parseOK(t, "webhooks: {dedup_ttl: "+tt.in+"}\nserver: {shutdown_grace: "+tt.in+"}\n")
			assert.Equal(t, tt.want, c.Webhooks.DedupTTL)
			assert.Equal(t, tt.want, c.Server.ShutdownGrace)
		})
	}
	t.Run("negative durations are refused", func(t *testing.T) {
		assert.Equal(t, []string{`rb.yaml:1:26: server.shutdown_grace: invalid duration "-5s": must not be negative`},
			diags(t, "server: {shutdown_grace: -5s}"))
	})
}

func TestSecretRefs(t *testing.T) {
	t.Run("the default config references only the API token", func(t *testing.T) {
		assert.Equal(t, []string{"RUNBOOK_API_TOKEN"}, Default("").SecretRefs())
	})
	t.Run("token, routes and connection values are listed sorted and unique", func(t *testing.T) {
		c := parseOK(t, `
server: {token_secret: TOKEN}
webhooks:
  routes:
    a: {secret: HOOK}
    b: {secret: HOOK}
connections:
  nks: {token: "${{ secrets.NKS_TOKEN }}", base_url: "https://x", n: 3}
  identity: {password: {value: "${{secrets.ID_PW}}"}, user: "${{ secrets.NKS_TOKEN }}"}
`)
		assert.Equal(t, []string{"HOOK", "ID_PW", "NKS_TOKEN", "TOKEN"}, c.SecretRefs())
	})
}

func TestResolveConnections(t *testing.T) {
	c := parseOK(t, `
connections:
  nks: {token: "${{ secrets.NKS_TOKEN }}", base_url: "https://x", n: 3}
  identity: {auth: {password: "${{ secrets.ID_PW }}"}}
`)
	env := map[string]string{"NKS_TOKEN": "tok", "ID_PW": "pw"}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }

	t.Run("every reference is replaced and the config is left untouched", func(t *testing.T) {
		got, err := c.ResolveConnections(lookup)
		require.NoError(t, err)
		assert.Equal(t, map[string]map[string]any{
			"nks":      {"token": "tok", "base_url": "https://x", "n": 3},
			"identity": {"auth": map[string]any{"password": "pw"}},
		}, got)
		assert.Equal(t, "${{ secrets.NKS_TOKEN }}", c.Connections["nks"]["token"])
		assert.Equal(t, "${{ secrets.ID_PW }}", c.Connections["identity"]["auth"].(map[string]any)["password"])
	})
	t.Run("an unset secret is an error naming it and where it is used", func(t *testing.T) {
		delete(env, "ID_PW")
		delete(env, "NKS_TOKEN")
		_, err := c.ResolveConnections(lookup)
		require.Error(t, err)
		assert.Equal(t, "connections.identity.auth.password: secret ID_PW is not set; connections.nks.token: secret NKS_TOKEN is not set", err.Error())
	})
	t.Run("the secret's value never appears in an error", func(t *testing.T) {
		env["ID_PW"] = "hunter2"
		_, err := c.ResolveConnections(lookup)
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "hunter2")
	})
}

func TestDefault(t *testing.T) {
	c := Default("/srv/rb")
	assert.Equal(t, &Config{
		Dir:       "/srv/rb",
		Playbooks: "/srv/rb/playbooks",
		Server: Server{
			Listen: "127.0.0.1:8088", TokenSecret: "RUNBOOK_API_TOKEN", ShutdownGrace: 30 * time.Second,
			MaxBody: 1 << 20, Pretouch: 32 << 20, Reload: true, ReloadInterval: 2 * time.Second,
		},
		Webhooks:    Webhooks{DedupTTL: 7 * 24 * time.Hour, Routes: map[string]Route{}},
		Connections: map[string]map[string]any{},
		Hosts:       map[string]inventory.Host{},
		Schedules:   true,
		Notifications: Notifications{
			Channels: map[string]Channel{}, Backoff: 10 * time.Second, MaxBackoff: time.Hour, SendTimeout: 10 * time.Second,
		},
	}, c)
	t.Run("a relative directory is made absolute", func(t *testing.T) {
		wd, err := os.Getwd()
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(wd, "playbooks"), Default("").Playbooks)
	})
}

func TestLoad(t *testing.T) {
	t.Run("a missing file wraps fs.ErrNotExist and names the file", func(t *testing.T) {
		_, err := Load(filepath.Join(t.TempDir(), "runbook.yaml"))
		require.Error(t, err)
		assert.True(t, errors.Is(err, fs.ErrNotExist))
		assert.Contains(t, err.Error(), "runbook.yaml does not exist")
	})
	t.Run("a file is read, with positions naming it", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "rb.yaml")
		require.NoError(t, os.WriteFile(p, []byte("schedules: 1\n"), 0o600))
		_, err := Load(p)
		assert.EqualError(t, err, p+":1:12: schedules: must be a boolean (got integer)")
	})
	t.Run("an oversized file is refused", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "rb.yaml")
		require.NoError(t, os.WriteFile(p, make([]byte, MaxBytes+10), 0o600))
		_, err := Load(p)
		assert.ErrorContains(t, err, "config is larger than")
	})
	t.Run("an alias bomb is refused, not expanded", func(t *testing.T) {
		src := "x-a: &a {k: v, l: v}\n"
		prev := "a"
		for i := range 20 {
			name := string(rune('b' + i))
			src += "x-" + name + ": &" + name + " {p: *" + prev + ", q: *" + prev + "}\n"
			prev = name
		}
		src += "connections:\n  nks: {bomb: *" + prev + "}\n"
		_, err := Parse("rb.yaml", []byte(src))
		assert.ErrorContains(t, err, "too large or too deeply nested")
	})
}

func TestExampleParses(t *testing.T) {
	c, err := Load("../../examples/config/runbook.yaml")
	require.NoError(t, err)
	wd, err := os.Getwd()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(wd, "../../playbooks"), c.Playbooks)
	assert.Equal(t, Route{Secret: "SMS_WEBHOOK_SECRET"}, c.Webhooks.Routes["sms"])
	assert.Equal(t, DefaultListen, c.Server.Listen)
}
