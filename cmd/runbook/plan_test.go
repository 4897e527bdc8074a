package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const secretValue = "s3cr3t-Pa55w0rd-xyz"

const planPlaybook = `version: 1
name: notify
inputs:
  channel: {type: string, required: true}
  count: {type: integer, default: 2}
env:
  AUTH: "Bearer ${{ secrets.API_TOKEN }}"
steps:
  - id: build
    uses: shell
    with: {command: "echo built"}
  - id: post
    uses: http.request
    needs: [build]
    if: ${{ inputs.count > 1 }}
    with:
      method: POST
      url: "https://hooks.example.com/${{ inputs.channel }}"
      headers:
        Authorization: "${{ env.AUTH }}"
        X-Token: "${{ secrets.API_TOKEN }}"
        X-Leak: "${{ env.RAW_TOKEN }}"
      json:
        text: "built: ${{ steps.build.outputs.stdout }}"
  - id: each
    uses: log
    for_each: ${{ [1, 2, inputs.count] }}
    with: {message: "item ${{ item }}"}
finally:
  - id: done
    uses: log
    with: {message: "done ${{ run.status }} with ${{ secrets.API_TOKEN }}"}
`

func TestPlanNeverPrintsASecret(t *testing.T) {
	c := newCLI(t)
	pb := c.file("notify.yaml", planPlaybook)
	secrets := c.file("secrets.yaml", "API_TOKEN: "+secretValue+"\n")
	c.env = append(c.env, "RAW_TOKEN="+secretValue)
	for _, args := range [][]string{
		{"plan", pb, "-i", "channel=ops", "--secrets", secrets},
		{"plan", pb, "-i", "channel=ops", "--secrets", secrets, "--output", "json"},
	} {
		r := c.run(args...)
		require.Equal(t, 0, r.code, r)
		assert.NotContains(t, r.stdout+r.stderr, secretValue)
		assert.NotContains(t, r.stdout+r.stderr, "s3cr3t")
		assert.Contains(t, r.stdout, "***")
	}

	c.env = append(c.env, "RUNBOOK_SECRET_API_TOKEN="+secretValue)
	r := c.run("plan", pb, "-i", "channel=ops")
	require.Equal(t, 0, r.code, r)
	assert.NotContains(t, r.stdout+r.stderr, secretValue)
}

func TestPlanShowsResolvedParamsInExecutionOrder(t *testing.T) {
	c := newCLI(t)
	pb := c.file("notify.yaml", planPlaybook)
	c.env = append(c.env, "RUNBOOK_SECRET_API_TOKEN="+secretValue)
	r := c.run("plan", pb, "-i", "channel=ops", "-i", "count=3")
	require.Equal(t, 0, r.code, r)
	out := r.stdout
	assert.Contains(t, out, "  1. build  (shell)")
	assert.Contains(t, out, "  2. post  (http.request)")
	assert.Contains(t, out, "needs: build")
	assert.Contains(t, out, "if: ${{ inputs.count > 1 }}")
	assert.Contains(t, out, "url: https://hooks.example.com/ops")
	assert.Contains(t, out, `json: {"text":"built: ${{ steps.build.outputs.stdout }}"}`)
	assert.Contains(t, out, "for_each: [1,2,3]")
	assert.Contains(t, out, "message: item ${{ item }}")
	assert.Contains(t, out, "finally:")
	assert.Contains(t, out, "Bearer ***")

	r = c.run("plan", pb, "-i", "channel=ops", "--output", "json")
	require.Equal(t, 0, r.code, r)
	var doc struct {
		Lists []struct {
			Name  string `json:"name"`
			Steps []struct {
				ID   string `json:"id"`
				With []struct {
					Name  string `json:"name"`
					Value any    `json:"value"`
					Known bool   `json:"known"`
				} `json:"with"`
			} `json:"steps"`
		} `json:"lists"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
	require.Len(t, doc.Lists, 2)
	assert.Equal(t, "steps", doc.Lists[0].Name)
	assert.Equal(t, "finally", doc.Lists[1].Name)
	post := doc.Lists[0].Steps[1]
	assert.Equal(t, "post", post.ID)
	for _, w := range post.With {
		if w.Name == "json" {
			assert.False(t, w.Known)
		}
		if w.Name == "method" {
			assert.True(t, w.Known)
			assert.Equal(t, "POST", w.Value)
		}
	}
}

func TestPlanWithoutARequiredInputWarnsAndMarksItsUses(t *testing.T) {
	c := newCLI(t)
	pb := c.file("notify.yaml", planPlaybook)
	r := c.run("plan", pb)
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "channel: <not given: required>")
	assert.Contains(t, r.stdout, "url: https://hooks.example.com/${{ inputs.channel }}")
	assert.Contains(t, r.stdout, "secret API_TOKEN is not set")
}

func TestPlanRefusesBadInputs(t *testing.T) {
	c := newCLI(t)
	pb := c.file("notify.yaml", planPlaybook)
	r := c.run("plan", pb, "-i", "count=lots")
	assert.Equal(t, 2, r.code, r)
	assert.Contains(t, r.stderr, `input "count"`)
}

func TestPlanShowsCallsWhoseValuesComeFromEarlierSteps(t *testing.T) {
	c := newCLI(t)
	pb := c.file("upgrade.yaml", `
version: 1
name: upgrade
inputs:
  cluster: {type: string, required: true}
steps:
  - {id: supports, uses: nks.supports}
  - id: upgrade
    uses: nks.cluster.upgrade
    with: {cluster: "${{ inputs.cluster }}", version: "${{ steps.supports.outputs.latest }}"}
`)
	r := c.run("plan", pb, "-i", "cluster=prod")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "→ POST /v1/clusters/prod/nodegroups/default-master/upgrade")
	assert.Contains(t, r.stdout, `"version": ${{ steps.supports.outputs.latest }}`)
	assert.Contains(t, r.stdout, "→ POST /v1/clusters/prod/nodegroups/{worker group}/upgrade")
}

// A value computed at run time is shown as its expression, as written,
// wherever it goes: params, paths (not URL-encoded) and bodies, in text and
// in JSON (an object, never the zero value of the param's type).
func TestPlanShowsComputedValuesAsTheirExpressions(t *testing.T) {
	c := newCLI(t)
	pb := c.file("resize.yaml", `
version: 1
name: resize
inputs:
  cluster: {type: string, required: true}
steps:
  - {id: before, uses: nks.cluster.get, with: {cluster: "${{ inputs.cluster }}"}}
  - id: resize
    uses: nks.cluster.resize
    with:
      cluster: ${{ steps.before.outputs.uuid }}
      nodegroup: "workers-${{ inputs.cluster }}"
      node_count: ${{ steps.before.outputs.node_count + 1 }}
`)
	r := c.run("plan", pb, "-i", "cluster=prod")
	require.Equal(t, 0, r.code, r)
	assert.Contains(t, r.stdout, "node_count: ${{ steps.before.outputs.node_count + 1 }}\n")
	assert.Contains(t, r.stdout, "→ GET /v1/clusters/${{ steps.before.outputs.uuid }}/nodegroups/workers-prod\n")
	assert.Contains(t, r.stdout, "→ POST /v1/clusters/${{ steps.before.outputs.uuid }}/actions/resize\n")
	assert.Contains(t, r.stdout, `"node_count": ${{ steps.before.outputs.node_count + 1 }},`)
	assert.NotContains(t, r.stdout, `"node_count": 0`)
	assert.NotContains(t, r.stdout, "%3C")

	r = c.run("plan", pb, "-i", "cluster=prod", "--output", "json")
	require.Equal(t, 0, r.code, r)
	var doc struct {
		Lists []struct {
			Steps []struct {
				ID   string `json:"id"`
				With []struct {
					Name  string `json:"name"`
					Value any    `json:"value"`
				} `json:"with"`
				Calls []struct {
					Path string         `json:"path"`
					Body map[string]any `json:"body"`
				} `json:"calls"`
			} `json:"steps"`
		} `json:"lists"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
	resize := doc.Lists[0].Steps[1]
	require.Equal(t, "resize", resize.ID)
	expr := map[string]any{"expr": "steps.before.outputs.node_count + 1"}
	for _, w := range resize.With {
		if w.Name == "node_count" {
			assert.Equal(t, expr, w.Value)
		}
	}
	require.Len(t, resize.Calls, 2)
	assert.Equal(t, "/v1/clusters/${{ steps.before.outputs.uuid }}/actions/resize", resize.Calls[1].Path)
	assert.Equal(t, expr, resize.Calls[1].Body["node_count"])
	assert.Equal(t, "workers-prod", resize.Calls[1].Body["nodegroup"])
}
