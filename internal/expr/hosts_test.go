package expr

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/inventory"
)

type fixedHosts map[string]inventory.Host

func (f fixedHosts) Hosts() (map[string]any, error) { return inventory.Listing(f), nil }

func TestHostsSelectsTheInventoryByLabels(t *testing.T) {
	inv := fixedHosts{
		"web2": {Name: "web2", Address: "10.0.0.12", User: "deploy", Labels: map[string]string{"role": "web", "env": "prod"}, PasswordSecret: "PW"},
		"web1": {Name: "web1", Address: "10.0.0.11:2222", User: "deploy", Labels: map[string]string{"role": "web", "env": "stage"}},
		"db1":  {Name: "db1", Address: "10.0.0.21", User: "pg", Labels: map[string]string{"role": "db", "env": "prod"}},
	}
	eval := func(t *testing.T, src string, hosts HostSource) (any, error) {
		t.Helper()
		p, err := Compile(src, testEnv())
		require.NoError(t, err)
		sc := testScope()
		sc.Hosts = hosts
		return p.Eval(sc)
	}
	names := func(v any) []string {
		var out []string
		for _, h := range v.([]any) {
			out = append(out, h.(map[string]any)["name"].(string))
		}
		return out
	}
	for _, tt := range []struct{ name, src string }{
		{"one label", `hosts("role=web")`},
		{"spaces around", `hosts(" role = web ")`},
	} {
		t.Run(tt.name+" selects by it, sorted by name", func(t *testing.T) {
			v, err := eval(t, tt.src, inv)
			require.NoError(t, err)
			assert.Equal(t, []string{"web1", "web2"}, names(v))
		})
	}
	t.Run("several labels must all match", func(t *testing.T) {
		v, err := eval(t, `hosts("role=web,env=prod")`, inv)
		require.NoError(t, err)
		assert.Equal(t, []string{"web2"}, names(v))
	})
	t.Run("* and no selector give every host", func(t *testing.T) {
		for _, src := range []string{`hosts("*")`, `hosts()`, `hosts("")`} {
			v, err := eval(t, src, inv)
			require.NoError(t, err)
			assert.Equal(t, []string{"db1", "web1", "web2"}, names(v), src)
		}
	})
	t.Run("a host is its name, address, user and labels, never a credential", func(t *testing.T) {
		v, err := eval(t, `hosts("env=prod")[1]`, inv)
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"name": "web2", "address": "10.0.0.12", "user": "deploy",
			"labels": map[string]any{"role": "web", "env": "prod"}}, v)
	})
	t.Run("a selector matching nothing gives an empty list", func(t *testing.T) {
		v, err := eval(t, `hosts("role=cache")`, inv)
		require.NoError(t, err)
		assert.Equal(t, []any{}, v)
	})
	t.Run("a malformed selector, an empty or unknown inventory are errors", func(t *testing.T) {
		_, err := eval(t, `hosts("role")`, inv)
		assert.ErrorContains(t, err, `selector "role": want label=value pairs`)
		_, err = eval(t, `hosts("role=web")`, fixedHosts{})
		assert.ErrorContains(t, err, "the inventory is empty: add hosts under hosts: in runbook.yaml")
		_, err = eval(t, `hosts("role=web")`, nil)
		assert.ErrorContains(t, err, "no hosts: inventory is known here")
	})
}
