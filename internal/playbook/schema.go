package playbook

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/runbook/runbook/internal/steps"
)

// SchemaID is the $id of the playbook JSON Schema.
const SchemaID = "https://runbook.dev/schema/playbook.schema.json"

// durationPattern matches what yamlnode.ParseDuration accepts: Go durations with an
// optional leading whole number of days.
const durationPattern = `^([0-9]+d)?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))*$`

// Schema returns the JSON Schema (draft 2020-12) of playbooks for the step
// types registered now: the top-level structure, inputs, triggers, and a
// `with` schema per `uses`. The output is deterministic (sorted keys,
// 2-space indent, trailing newline); schema/playbook.schema.json holds it
// for the built-in steps.
func Schema() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(schemaDoc()); err != nil {
		return nil, fmt.Errorf("encode playbook schema: %w", err)
	}
	return buf.Bytes(), nil
}

type obj = map[string]any

func ref(name string) obj { return obj{"$ref": "#/$defs/" + name} }

func schemaDoc() obj {
	ident := `^[a-zA-Z_][a-zA-Z0-9_]*$`
	str := obj{"type": "string"}
	defs := obj{
		"duration":   obj{"type": "string", "pattern": durationPattern, "minLength": 1, "description": "Go duration with an optional days prefix: 30s, 5m, 2h, 1d12h"},
		"expression": obj{"type": []any{"string", "boolean"}, "description": "an expression, bare or one ${{ }}"},
		"template":   obj{"description": "a value; strings may hold ${{ }} expressions"},
		"input":      inputSchema(),
		"retry":      retrySchema(),
		"step":       stepSchema(),
		"steps":      obj{"type": "array", "items": ref("step")},
		"schedule":   scheduleSchema(),
		"webhook":    webhookSchema(),
		"trigger":    triggerSchema(),
		"runs_on": obj{
			"type": "object", "additionalProperties": false, "required": []any{"labels"},
			"description": "run the step's attempts on a runbook agent whose labels match (docs/agents.md)",
			"properties": obj{"labels": obj{
				"type": "object", "minProperties": 1,
				"propertyNames":        obj{"pattern": labelKeyPattern},
				"additionalProperties": obj{"type": "string", "pattern": labelValuePattern},
			}},
		},
		"on_agent_lost": obj{"enum": []any{"fail", "retry"}, "default": "fail",
			"description": "when the agent running a step is lost: fail with \"agent lost\", or run the step once more on another agent (a mutating cloud step always reconciles instead)"},
	}
	return obj{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"$id":         SchemaID,
		"title":       "runbook playbook",
		"description": "A runbook playbook (version 1). Generated from the step registry: do not edit; run make schema.",
		"type":        "object",
		"required":    []any{"version", "name", "steps"},
		"properties": obj{
			"version":     obj{"const": 1},
			"name":        obj{"type": "string", "pattern": namePattern},
			"description": str,
			"labels": obj{
				"type":                 "object",
				"propertyNames":        obj{"pattern": labelKeyPattern},
				"additionalProperties": obj{"type": "string", "pattern": labelValuePattern},
			},
			"inputs": obj{
				"type":                 "object",
				"propertyNames":        obj{"pattern": ident},
				"additionalProperties": obj{"anyOf": []any{ref("input"), obj{"type": "null"}}},
			},
			"env": obj{
				"type":                 "object",
				"propertyNames":        obj{"pattern": ident},
				"additionalProperties": obj{"type": []any{"string", "number", "boolean"}},
			},
			"connections": obj{
				"type":                 "object",
				"additionalProperties": obj{"type": []any{"object", "null"}},
			},
			"triggers": obj{"type": "array", "items": ref("trigger")},
			"concurrency": obj{
				"type":                 "object",
				"additionalProperties": false,
				"required":             []any{"key"},
				"properties": obj{
					"key":     str,
					"on_busy": obj{"enum": []any{"queue", "skip", "cancel_running"}, "default": "queue"},
				},
			},
			"timeout":      ref("duration"),
			"max_parallel": obj{"type": "integer", "minimum": 1},
			"take_over": obj{"type": "boolean", "default": false,
				"description": "on a PostgreSQL state, let the runbook serve replicas take over a run that runbook run started once that process is gone (off by default: its secret inputs and local files may exist only where it ran)"},
			"runs_on":       ref("runs_on"),
			"on_agent_lost": ref("on_agent_lost"),
			"secrets": obj{
				"type":          "object",
				"description":   "secrets resolved on the agent that runs the step, never sent to it: {token: {agent: DEPLOY_TOKEN}} (docs/agents.md)",
				"propertyNames": obj{"pattern": `^[A-Za-z_][A-Za-z0-9_]*$`},
				"additionalProperties": obj{
					"type": "object", "additionalProperties": false, "required": []any{"agent"},
					"properties": obj{"agent": obj{"type": "string", "pattern": `^[A-Za-z_][A-Za-z0-9_]*$`}},
				},
			},
			"steps":      obj{"type": "array", "items": ref("step"), "minItems": 1},
			"on_failure": ref("steps"),
			"finally":    ref("steps"),
			"outputs": obj{
				"type":                 "object",
				"propertyNames":        obj{"pattern": ident},
				"additionalProperties": ref("template"),
			},
		},
		"patternProperties":    obj{"^x-": obj{}},
		"additionalProperties": false,
		"$defs":                defs,
	}
}

func inputSchema() obj {
	return obj{
		"type":                 "object",
		"additionalProperties": false,
		"properties": obj{
			"type":        obj{"enum": stringsAny(inputTypes), "default": "string"},
			"required":    obj{"type": "boolean"},
			"default":     obj{},
			"enum":        obj{"type": "array"},
			"pattern":     obj{"type": "string", "format": "regex"},
			"min":         obj{"type": "number"},
			"max":         obj{"type": "number"},
			"description": obj{"type": "string"},
			"secret":      obj{"type": "boolean"},
		},
	}
}

func retrySchema() obj {
	return obj{
		"type":                 "object",
		"additionalProperties": false,
		"properties": obj{
			"attempts":  obj{"type": "integer", "minimum": 1, "maximum": 100, "default": 3},
			"delay":     ref("duration"),
			"backoff":   obj{"type": "number", "minimum": 1, "maximum": 100, "default": 1},
			"max_delay": ref("duration"),
			"jitter":    obj{"type": "boolean"},
			"if":        ref("expression"),
		},
	}
}

func stepSchema() obj {
	all := steps.All()
	names := make([]any, len(all))
	var rules []any
	for i, d := range all {
		names[i] = d.Type
		with := d.ParamsSchema()
		then := obj{"properties": obj{"with": with}}
		if req, ok := with["required"].([]any); ok && len(req) > 0 {
			then["required"] = []any{"with"}
		}
		rules = append(rules, obj{
			"if":   obj{"properties": obj{"uses": obj{"const": d.Type}}, "required": []any{"uses"}},
			"then": then,
		})
	}
	s := obj{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"id", "uses"},
		"properties": obj{
			"id":                obj{"type": "string", "pattern": identRE().String()},
			"name":              obj{"type": "string"},
			"uses":              obj{"type": "string", "enum": names},
			"with":              obj{"type": "object"},
			"if":                ref("expression"),
			"needs":             obj{"anyOf": []any{obj{"type": "string"}, obj{"type": "array", "items": obj{"type": "string"}, "uniqueItems": true}}},
			"for_each":          obj{"type": []any{"string", "array"}},
			"max_parallel":      obj{"type": "integer", "minimum": 1},
			"retry":             ref("retry"),
			"timeout":           ref("duration"),
			"continue_on_error": obj{"type": "boolean"},
			"runs_on":           ref("runs_on"),
			"on_agent_lost":     ref("on_agent_lost"),
			"outputs": obj{
				"type":                 "object",
				"propertyNames":        obj{"pattern": identRE().String()},
				"additionalProperties": ref("template"),
			},
		},
	}
	if len(rules) > 0 {
		s["allOf"] = rules
	}
	return s
}

func scheduleSchema() obj {
	return obj{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"cron"},
		"properties": obj{
			"cron":           obj{"type": "string", "description": "5 or 6 fields (seconds first), or @daily-style descriptors; CRON_TZ= prefix allowed"},
			"timezone":       obj{"type": "string", "description": "IANA time zone, e.g. Asia/Seoul"},
			"overlap":        obj{"enum": []any{"skip", "queue", "allow", "replace"}, "default": "skip"},
			"catchup":        obj{"enum": []any{"none", "latest", "all"}, "default": "none"},
			"catchup_window": ref("duration"),
			"jitter":         ref("duration"),
		},
	}
}

func webhookSchema() obj {
	return obj{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"route"},
		"properties": obj{
			"route": obj{"type": "string", "pattern": `^[A-Za-z0-9._/-]{1,200}$`},
			"event": obj{"anyOf": []any{obj{"type": "string"}, obj{"type": "array", "items": obj{"type": "string"}}}},
			"if":    ref("expression"),
			"each":  obj{"enum": []any{"hook"}},
		},
	}
}

func triggerSchema() obj {
	inputs := obj{"type": "object", "additionalProperties": ref("template")}
	return obj{
		"oneOf": []any{
			obj{
				"type": "object", "additionalProperties": false, "required": []any{"schedule"},
				"properties": obj{"schedule": ref("schedule"), "inputs": inputs},
			},
			obj{
				"type": "object", "additionalProperties": false, "required": []any{"webhook"},
				"properties": obj{"webhook": ref("webhook"), "inputs": inputs},
			},
		},
	}
}

func stringsAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
