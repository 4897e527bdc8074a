package ssh

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/runbook/runbook/internal/fault"
	"github.com/runbook/runbook/internal/inventory"
	"github.com/runbook/runbook/internal/steps"
)

// maxHops bounds a chain of jump hosts (the config refuses a cycle).
const maxHops = 8

// target is one host to log in to, and the hosts before it.
type target struct {
	inventory.Login
	via *target // the jump host, nil for none
}

// label names the host in messages: its inventory name and address, or
// the address.
func (t *target) label() string {
	if t.Name != "" && t.Name != t.Address {
		return t.Name + " (" + t.Address + ")"
	}
	return t.Address
}

// addr is the host:port to dial.
func (t *target) addr() string {
	if _, _, err := net.SplitHostPort(t.Address); err == nil {
		return t.Address
	}
	return net.JoinHostPort(strings.Trim(t.Address, "[]"), "22")
}

// resolveTarget reads the inventory host the step names, or the inline
// address, and the jump hosts in front of it.
func resolveTarget(c *steps.Call, p *sshParams) (*target, error) {
	var t *target
	if p.Host != "" {
		login, err := inventoryHost(c, p.Host)
		if err != nil {
			return nil, err
		}
		t = &target{Login: login}
	} else {
		known := p.KnownHosts
		if known != "" && !filepath.IsAbs(known) {
			known = filepath.Join(c.Dir, known)
		}
		t = &target{Login: inventory.Login{Host: inventory.Host{Name: p.Address, Address: p.Address, User: p.User,
			HostKey: p.HostKey, KnownHosts: known}}}
		for _, s := range []struct{ name, field string }{
			{p.PrivateKeySecret, "private_key_secret"}, {p.PassphraseSecret, "passphrase_secret"}, {p.PasswordSecret, "password_secret"},
		} {
			if s.name == "" {
				continue
			}
			v, ok := c.Host.Secret(s.name)
			if !ok {
				return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("%s: secret %s is not set", s.field, s.name)}
			}
			switch s.field {
			case "private_key_secret":
				t.PrivateKey = v
			case "passphrase_secret":
				t.Passphrase = v
			default:
				t.Password = v
			}
		}
	}
	jump := t.Jump
	if p.Jump != "" {
		jump = p.Jump
	}
	for hop, at := 0, t; jump != ""; hop++ {
		if hop == maxHops {
			return nil, &fault.Error{Code: fault.Invalid, Message: fmt.Sprintf("host %s: more than %d jump hosts", t.label(), maxHops)}
		}
		login, err := inventoryHost(c, jump)
		if err != nil {
			return nil, err
		}
		at.via = &target{Login: login}
		at, jump = at.via, login.Jump
	}
	return t, nil
}

// inventoryHost reads host name of the inventory (connection host:NAME).
func inventoryHost(c *steps.Call, name string) (inventory.Login, error) {
	m, err := c.Host.Connection(inventory.ConnectionName(name))
	if err != nil {
		return inventory.Login{}, err
	}
	login := inventory.FromSettings(m)
	if login.Name == "" {
		login.Name = name
	}
	return login, nil
}

// clientConfig is how to log in to t: its user, its host key check and
// its credentials.
func (t *target) clientConfig() (*xssh.ClientConfig, func(), error) {
	check, algos, err := t.hostKeyCheck()
	if err != nil {
		return nil, nil, err
	}
	auth, closeAgent, err := t.auth()
	if err != nil {
		return nil, nil, err
	}
	return &xssh.ClientConfig{User: t.User, Auth: auth, HostKeyCallback: check, HostKeyAlgorithms: algos}, closeAgent, nil
}

// hostKeyCheck verifies the key t presents: against its pinned key or its
// known_hosts file. An unknown or changed key is refused with a message
// naming the host and the key's fingerprint. algos are the key types to
// ask the host for: those it is known by, so that a host with several
// keys shows one that can be checked.
func (t *target) hostKeyCheck() (xssh.HostKeyCallback, []string, error) {
	switch {
	case t.HostKey != "":
		pinned, _, _, _, err := xssh.ParseAuthorizedKey([]byte(t.HostKey))
		if err != nil {
			return nil, nil, &fault.Error{Code: fault.Invalid, Message: "host " + t.label() + ": host_key is not a public key", Err: err}
		}
		check := func(_ string, _ net.Addr, key xssh.PublicKey) error {
			if string(key.Marshal()) == string(pinned.Marshal()) {
				return nil
			}
			return &fault.Error{Code: fault.Unauthorized, Message: fmt.Sprintf(
				"host %s presented the key %s (%s), not its pinned host_key %s: refused; if the host's key really changed, pin the new one",
				t.label(), xssh.FingerprintSHA256(key), key.Type(), xssh.FingerprintSHA256(pinned))}
		}
		return check, algorithmsFor(pinned.Type()), nil
	case t.KnownHosts != "":
		db, err := knownhosts.New(t.KnownHosts)
		if err != nil {
			return nil, nil, &fault.Error{Code: fault.Invalid, Message: "host " + t.label() + ": read known_hosts " + t.KnownHosts, Err: err}
		}
		check := func(hostname string, remote net.Addr, key xssh.PublicKey) error {
			err := db(hostname, remote, key)
			var ke *knownhosts.KeyError
			if errors.As(err, &ke) {
				return t.keyRefused(hostname, key, ke)
			}
			return err
		}
		return check, t.knownAlgorithms(db), nil
	}
	return nil, nil, &fault.Error{Code: fault.Invalid, Message: "host " + t.label() + " has neither host_key nor known_hosts: a host's key is always verified"}
}

func (t *target) keyRefused(hostname string, key xssh.PublicKey, ke *knownhosts.KeyError) error {
	fp := xssh.FingerprintSHA256(key)
	if len(ke.Want) == 0 {
		return &fault.Error{Code: fault.Unauthorized, Message: fmt.Sprintf(
			"host %s presented the key %s (%s), which %s does not know: refused; check the fingerprint with the host's owner, then add it (ssh-keyscan %s >> %s)",
			t.label(), fp, key.Type(), t.KnownHosts, keyscanArgs(hostname), t.KnownHosts)}
	}
	w := ke.Want[0]
	return &fault.Error{Code: fault.Unauthorized, Message: fmt.Sprintf(
		"host %s presented the key %s (%s), but %s:%d has %s (%s) for it: the host's key changed, refused (a reinstalled host, or someone in the middle); if it was reinstalled, replace that line",
		t.label(), fp, key.Type(), w.Filename, w.Line, xssh.FingerprintSHA256(w.Key), w.Key.Type())}
}

// keyscanArgs is the ssh-keyscan arguments for host:port.
func keyscanArgs(hostport string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || port == "22" {
		return hostport
	}
	return "-p " + port + " " + host
}

// knownAlgorithms are the key types db knows t by (none: any).
func (t *target) knownAlgorithms(db xssh.HostKeyCallback) []string {
	probe, err := xssh.NewPublicKey(probeKey)
	if err != nil {
		return nil
	}
	var ke *knownhosts.KeyError
	if !errors.As(db(t.addr(), &net.TCPAddr{IP: net.IPv4zero}, probe), &ke) {
		return nil
	}
	var out []string
	for _, w := range ke.Want {
		out = append(out, algorithmsFor(w.Key.Type())...)
	}
	return out
}

// probeKey is an ed25519 key no host has, to ask known_hosts which keys it
// holds for a host.
var probeKey = make([]byte, 32)

// algorithmsFor lists the host key algorithms that show a key of type typ.
func algorithmsFor(typ string) []string {
	if typ == xssh.KeyAlgoRSA {
		return []string{xssh.KeyAlgoRSASHA512, xssh.KeyAlgoRSASHA256, xssh.KeyAlgoRSA}
	}
	return []string{typ}
}

// auth is how t logs in: its private key, its password, and the ssh-agent
// of SSH_AUTH_SOCK when the host allows it (agent: true).
func (t *target) auth() ([]xssh.AuthMethod, func(), error) {
	var out []xssh.AuthMethod
	closeAgent := func() {}
	if t.PrivateKey != "" {
		signer, err := parseKey(t)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, xssh.PublicKeys(signer))
	}
	if t.Agent {
		sock := os.Getenv("SSH_AUTH_SOCK")
		if sock == "" {
			return nil, nil, &fault.Error{Code: fault.Invalid, Message: "host " + t.label() + " logs in with the ssh-agent (agent: true), but SSH_AUTH_SOCK is not set"}
		}
		conn, err := net.Dial("unix", sock)
		if err != nil {
			return nil, nil, &fault.Error{Code: fault.Unavailable, Message: "host " + t.label() + ": reach the ssh-agent at SSH_AUTH_SOCK", Err: err}
		}
		closeAgent = func() { conn.Close() }
		out = append(out, xssh.PublicKeysCallback(agent.NewClient(conn).Signers))
	}
	if t.Password != "" {
		out = append(out, xssh.Password(t.Password))
	}
	if len(out) == 0 {
		closeAgent()
		return nil, nil, &fault.Error{Code: fault.Invalid, Message: "host " + t.label() + " has no credentials: give private_key_secret, password_secret or agent: true"}
	}
	return out, closeAgent, nil
}

func parseKey(t *target) (xssh.Signer, error) {
	var signer xssh.Signer
	var err error
	if t.Passphrase != "" {
		signer, err = xssh.ParsePrivateKeyWithPassphrase([]byte(t.PrivateKey), []byte(t.Passphrase))
	} else {
		signer, err = xssh.ParsePrivateKey([]byte(t.PrivateKey))
	}
	var missing *xssh.PassphraseMissingError
	switch {
	case errors.As(err, &missing):
		return nil, &fault.Error{Code: fault.Invalid, Message: "host " + t.label() + ": the private key is encrypted: give passphrase_secret"}
	case err != nil:
		// The parser's message never quotes the key.
		return nil, &fault.Error{Code: fault.Invalid, Message: "host " + t.label() + ": the private key cannot be read: " + err.Error()}
	}
	return signer, nil
}
