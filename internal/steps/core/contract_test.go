package core_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/steps"
	_ "github.com/runbook/runbook/internal/steps/core"
	"github.com/runbook/runbook/internal/steps/stepstest"
)

func desc(t *testing.T, name string) *steps.Descriptor {
	t.Helper()
	d, ok := steps.Lookup(name)
	require.True(t, ok, "step type %s is registered", name)
	return d
}

func TestEveryCoreStepPassesTheContract(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the client going away.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer slow.Close()

	valid := map[string]map[string]any{
		"log":          {"message": "hello", "level": "warn", "fields": map[string]any{"a": 1}},
		"set":          {"a": 1, "b": "two"},
		"sleep":        {"duration": "10s"},
		"fail":         {"message": "boom", "code": "conflict"},
		"http.request": {"url": slow.URL, "method": "POST", "json": map[string]any{"a": 1}},
		"shell":        {"command": "sleep 10"},
		"approval":     {"message": "go ahead?", "timeout": "1h"},
		"playbook":     {"path": "child.yaml", "inputs": map[string]any{"x": 1}},
	}
	var registered []string
	for _, d := range steps.All() {
		registered = append(registered, d.Type)
	}
	var covered []string
	for name := range valid {
		covered = append(covered, name)
	}
	sort.Strings(covered)
	assert.Equal(t, registered, covered, "every registered core step has contract params")

	for _, name := range covered {
		t.Run(name, func(t *testing.T) {
			stepstest.Contract(t, desc(t, name), valid[name])
		})
	}
}
