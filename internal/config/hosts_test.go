package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/inventory"
)

const edKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"

func TestHostsAreReadIntoTheInventory(t *testing.T) {
	c := parseOK(t, `
hosts:
  bastion:
    address: bastion.example.com
    user: ops
    host_key: `+edKey+`
    agent: true
  web1:
    address: 10.0.0.11:2222
    user: deploy
    labels: {role: web, env: prod, rack: 7}
    known_hosts: ssh/known_hosts
    private_key_secret: WEB_KEY
    passphrase_secret: WEB_KEY_PASS
    jump: bastion
`)
	require.Len(t, c.Hosts, 2)
	assert.Equal(t, inventory.Host{Name: "web1", Address: "10.0.0.11:2222", User: "deploy",
		Labels: map[string]string{"role": "web", "env": "prod", "rack": "7"}, KnownHosts: "/srv/rb/ssh/known_hosts",
		PrivateKeySecret: "WEB_KEY", PassphraseSecret: "WEB_KEY_PASS", Jump: "bastion"}, c.Hosts["web1"])
	assert.Equal(t, []string{"RUNBOOK_API_TOKEN", "WEB_KEY", "WEB_KEY_PASS"}, c.SecretRefs())

	t.Run("the inventory reaches steps as connections, the listing without credentials", func(t *testing.T) {
		conns, err := c.ResolveConnections(func(n string) (string, bool) { return "value-of-" + n, true })
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"name": "web1", "address": "10.0.0.11:2222", "user": "deploy",
			"labels": map[string]any{"role": "web", "env": "prod", "rack": "7"}}, conns["hosts"]["web1"])
		web1 := inventory.FromSettings(conns["host:web1"])
		assert.Equal(t, "value-of-WEB_KEY", web1.PrivateKey)
		assert.Equal(t, "value-of-WEB_KEY_PASS", web1.Passphrase)
		assert.Equal(t, "bastion", web1.Jump)
		assert.NotContains(t, conns["hosts"]["web1"], "private_key")
	})
	t.Run("a secret not set is named with its host", func(t *testing.T) {
		_, err := c.ResolveConnections(func(n string) (string, bool) { return "", n != "WEB_KEY" })
		require.EqualError(t, err, "hosts.web1.private_key_secret: secret WEB_KEY is not set")
	})
}

func TestHostsThatCannotWorkAreRefusedWithTheirPosition(t *testing.T) {
	got := diags(t, `hosts:
  web1:
    address: 10.0.0.11
    user: deploy
    private_key_secret: K
  web2:
    address: "bad host:22"
    user: deploy
    host_key: ssh-ed25519 notbase64
    password_secret: P
  web3:
    address: web3
    user: ops
    host_key: `+edKey+`
    known_hosts: kh
    agent: true
  web4:
    address: web4
    user: ops
    host_key: `+edKey+`
    agent: true
    jump: bastoin
  a:
    {jump: b, address: a, user: u, host_key: `+edKey+`, agent: true}
  b:
    {jump: a, address: b, user: u, host_key: `+edKey+`, agent: true}
  web5:
    {address: w5, user: u, host_key: `+edKey+`}
  web6:
    {labels: {"role=x": y}, address: w6, user: u, host_key: `+edKey+`, agent: true}
`)
	assert.Equal(t, []string{
		`rb.yaml:3:5: hosts.web1: give host_key (the host's public key, ssh-ed25519 AAAA…) or known_hosts (a file): a host's key is always verified`,
		`rb.yaml:7:14: hosts.web2.address: invalid host "bad host": want an IP address or a host name`,
		`rb.yaml:9:15: hosts.web2.host_key: is not a public key: want a type and its base64, as a known_hosts line has them after the name (ssh-ed25519 AAAA…)`,
		`rb.yaml:15:18: hosts.web3.known_hosts: cannot be used with host_key; give one of them`,
		`rb.yaml:22:11: hosts.web4.jump: host "bastoin" is not in hosts`,
		`rb.yaml:24:12: hosts.a.jump: jump hosts go round in a circle through a`,
		`rb.yaml:26:12: hosts.b.jump: jump hosts go round in a circle through b`,
		`rb.yaml:28:5: hosts.web5: give private_key_secret, password_secret or agent: true (how runbook logs in)`,
		`rb.yaml:30:15: hosts.web6.labels["role=x"]: invalid label name "role=x": no '=', ',' or space (a selector is role=web,env=prod)`,
	}, got)
}
