package playtest

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// SchemaID is the $id of the test-file JSON Schema.
const SchemaID = "https://runbook.dev/schema/playbook-test.schema.json"

// Schema returns the JSON Schema (draft 2020-12) of test files, for
// editors and CI. The output is deterministic (sorted keys, 2-space
// indent, trailing newline); schema/playbook-test.schema.json holds it and
// a test fails when that file is stale (`runbook test --schema` writes it).
// The loader checks more than the schema can say: step and input names
// against the playbook, expressions, positions.
func Schema() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(schemaDoc()); err != nil {
		return nil, fmt.Errorf("encode test-file schema: %w", err)
	}
	return buf.Bytes(), nil
}

type obj = map[string]any

func ref(name string) obj { return obj{"$ref": "#/$defs/" + name} }

func object(desc string, props obj, required ...string) obj {
	o := obj{"type": "object", "additionalProperties": false, "properties": props}
	if desc != "" {
		o["description"] = desc
	}
	if len(required) > 0 {
		req := make([]any, len(required))
		for i, r := range required {
			req[i] = r
		}
		o["required"] = req
	}
	return o
}

func str(desc string) obj { return obj{"type": "string", "description": desc} }

func integer(desc string, lo, hi int) obj {
	return obj{"type": "integer", "minimum": lo, "maximum": hi, "description": desc}
}

func enum(desc string, values ...string) obj {
	vs := make([]any, len(values))
	for i, v := range values {
		vs[i] = v
	}
	return obj{"type": "string", "enum": vs, "description": desc}
}

func listOf(items obj, desc string) obj {
	return obj{"type": "array", "items": items, "description": desc}
}

func orExpr(s obj) obj {
	return obj{"anyOf": []any{s, ref("expression")}}
}

func schemaDoc() obj {
	return obj{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"$id":         SchemaID,
		"title":       "runbook playbook tests",
		"description": "Cases that run a playbook against the simulators and check what happened (runbook test). Generated: do not edit; run runbook test --schema.",
		"type":        "object",
		"required":    []any{"version", "playbook", "cases"},
		"properties": obj{
			"version":  obj{"const": 1, "description": "always 1"},
			"playbook": str("the playbook these cases test, relative to this file"),
			"cases":    obj{"type": "array", "minItems": 1, "items": ref("case")},
		},
		"patternProperties":    obj{"^x-": obj{"description": "ignored; holds YAML anchors for reuse"}},
		"additionalProperties": false,
		"$defs":                defs(),
	}
}

func defs() obj {
	return obj{
		"expression": obj{"type": "string", "pattern": `\$\{\{`, "description": "an expression in ${{ }}"},
		"duration":   obj{"type": "string", "pattern": `^([0-9]+d)?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))*$`, "minLength": 1, "description": "30s, 5m, 2h, 1d12h"},
		"time":       obj{"type": "string", "format": "date-time", "description": "RFC 3339, e.g. 2026-11-28T03:00:00+09:00"},
		"case":       caseSchema(),
		"trigger":    triggerSchema(),
		"delivery": object("one webhook request", obj{
			"route": str("the webhook route (default: the playbook's first webhook trigger's)"),
			"body":  obj{"description": "the JSON body the sender posts; strings may hold ${{ env.X }}"},
			"times": integer("how many times the same body is delivered (a redelivery is a duplicate)", 1, 100),
		}, "body"),
		"world":       worldSchema(),
		"fault":       faultSchema(),
		"approval":    approvalSchema(),
		"expect":      expectSchema(),
		"run":         runSchema(),
		"step":        stepSchema(),
		"error":       errorSchema(),
		"call":        callSchema(true),
		"call_match":  callSchema(false),
		"file":        fileSchema(),
		"strings":     obj{"anyOf": []any{obj{"type": "string"}, obj{"type": "array", "items": obj{"type": "string"}}}},
		"templateMap": obj{"type": "object", "description": "values; strings may hold ${{ env.X }} (env.TEST_DIR, env.TEST_SINK, the case's env)"},
	}
}

func caseSchema() obj {
	return object("one scenario", obj{
		"name":      str("names the case in results and --run"),
		"inputs":    ref("templateMap"),
		"env":       obj{"type": "object", "additionalProperties": obj{"type": "string"}, "description": "the run's env (env.X), over TEST_DIR, TEST_SINK and PATH/HOME"},
		"secrets":   obj{"type": "object", "additionalProperties": obj{"type": "string"}, "description": "the only secrets the run sees"},
		"files":     obj{"type": "object", "additionalProperties": obj{"type": "string"}, "description": "files written into the case directory (the playbook's directory) before the run"},
		"trigger":   ref("trigger"),
		"world":     ref("world"),
		"faults":    listOf(ref("fault"), "what goes wrong"),
		"approvals": listOf(ref("approval"), "answers to approval steps"),
		"retry":     object("retry a failed run from a step (runbook runs retry)", obj{"from": str("the step the retry starts at")}, "from"),
		"clock":     object("the simulated clock", obj{"speed": obj{"type": "number", "exclusiveMinimum": 0, "description": "simulated seconds per real second (default 6000)"}}),
		"expect":    ref("expect"),
	}, "name", "expect")
}

func triggerSchema() obj {
	return object("how the run starts (default: by hand)", obj{
		"schedule": obj{"anyOf": []any{
			obj{"const": "next", "description": "the first slot after the clock's start"},
			ref("time"),
			object("", obj{"trigger": integer("index in the playbook's triggers", 0, 1000), "at": ref("time")}),
		}},
		"webhook": obj{"anyOf": []any{ref("delivery"), obj{"type": "array", "items": ref("delivery")}}},
	})
}

func worldSchema() obj {
	notice := object("a help-center notice", obj{
		"title": str(""), "content": str(""), "category": integer("heading ID (default 1)", 1, 1000),
		"tags": obj{"type": "array", "items": obj{"type": "integer"}}, "top": obj{"type": "boolean"},
		"age": ref("duration"), "at": ref("time"),
	}, "title")
	group := object("a worker node group", obj{
		"name": str(""), "version": str("default: the cluster's"), "node_count": integer("default 1", 1, 100),
	}, "name")
	cluster := object("a cluster, already created", obj{
		"name": str(""), "version": str("default: the newest supported"), "node_count": integer("default-worker nodes (default 3)", 1, 100),
		"node_groups": obj{"type": "array", "items": group},
	}, "name")
	return object("the simulators' state before the run", obj{
		"nks": object("", obj{
			"versions":  obj{"type": "object", "additionalProperties": obj{"type": "boolean"}, "description": "version -> valid in /v1/supports"},
			"durations": obj{"type": "object", "additionalProperties": ref("duration"), "description": "task type -> simulated duration"},
			"clusters":  obj{"type": "array", "items": cluster},
		}),
		"helpcenter": object("replaces the generated notices", obj{
			"generated": integer("notices generated from the seed (default 0)", 0, 10000),
			"notices":   obj{"type": "array", "items": notice},
		}),
		"easymaker":     object("", obj{"experiments": obj{"type": "array", "items": obj{"type": "string"}, "description": "ACTIVE experiments, by name"}}),
		"objectstorage": object("", obj{"objects": obj{"type": "array", "items": object("", obj{"uri": str("obs://HOST/v1/AUTH_TENANT/CONTAINER/OBJECT"), "text": str("")}, "uri")}}),
	})
}

func faultSchema() obj {
	return obj{"oneOf": []any{
		object("", obj{"http": object("answer matching calls with an error or delay them", obj{
			"service": enum("", faultServices...), "method": str(""), "path": str("path prefix below the service (a prefix, not a pattern: no *)"),
			"status": integer("", 400, 599), "count": integer("calls it applies to (default every call)", 1, 1000),
			"latency": ref("duration"), "retry_after": integer("seconds, with 429 or 503", 0, 3600),
		}, "service")}, "http"),
		object("", obj{"task": object("end the next matching cluster tasks in FAIL", obj{
			"operation": enum("task type", taskTypes()...), "cluster": str(""), "node_group": str(""),
			"contents": str("the task's contents"), "times": integer("how many matching tasks fail (default 1)", 1, 100),
			"after": integer("how many matching tasks succeed before the first that fails (default 0: the next one fails)", 0, 100),
		}, "operation")}, "task"),
		object("", obj{"kill": object("kill the run after a step ends, then resume it", obj{"after": str("step id")}, "after")}, "kill"),
	}}
}

func approvalSchema() obj {
	return object("", obj{
		"step":    str("the approval step"),
		"answer":  enum("default approve", "approve", "reject"),
		"by":      str("who answers (default tester)"),
		"comment": str(""),
		"fields":  obj{"type": "object"},
	}, "step")
}

func runProps() obj {
	return obj{
		"status":  orExpr(enum("", runStatuses...)),
		"error":   ref("error"),
		"outputs": obj{"type": "object", "description": "output -> expected value or ${{ }}"},
		"steps":   obj{"type": "object", "additionalProperties": ref("step")},
	}
}

func runSchema() obj { return object("", runProps()) }

func expectSchema() obj {
	props := runProps()
	props["runs"] = obj{"anyOf": []any{obj{"type": "integer", "minimum": 0}, ref("expression"), obj{"type": "array", "items": ref("run")}}}
	props["deliveries"] = obj{"type": "array", "items": enum("", answers...)}
	props["calls"] = obj{"type": "array", "items": ref("call")}
	props["calls_ordered"] = obj{"type": "boolean", "description": "calls happened in the order listed"}
	props["no_calls"] = obj{"type": "array", "items": ref("call_match")}
	props["files"] = obj{"type": "object", "additionalProperties": ref("file")}
	props["that"] = obj{"type": "array", "items": ref("expression")}
	return object("what must hold at the end; status, error, outputs and steps are the last run's", props)
}

func stepSchema() obj {
	return obj{"anyOf": []any{
		enum("the step's status", stepStatuses...),
		object("", obj{
			"status":   orExpr(enum("", stepStatuses...)),
			"attempts": obj{"anyOf": []any{obj{"type": "integer", "minimum": 0}, ref("expression")}},
			"error":    ref("error"),
			"outputs":  obj{"type": "object"},
		}),
	}}
}

func errorSchema() obj {
	return obj{"anyOf": []any{
		str("a part of the message"),
		object("", obj{"code": str("invalid, not_found, failed, timeout, ..."), "contains": str("a part of the message")}),
	}}
}

func callSchema(count bool) obj {
	props := obj{
		"service":       enum("", faultServices...),
		"method":        str(""),
		"path":          str("below the service; * is one segment, a final ** the rest"),
		"status":        integer("", 100, 599),
		"body":          obj{"type": "object", "description": "fields the JSON body holds"},
		"body_contains": str(""),
	}
	if count {
		props["count"] = obj{"anyOf": []any{obj{"type": "integer", "minimum": 0}, ref("expression")}}
	}
	return object("", props, "service")
}

func fileSchema() obj {
	return object("", obj{
		"exists":       obj{"type": "boolean"},
		"contains":     ref("strings"),
		"not_contains": ref("strings"),
		"equals":       obj{"type": "string"},
		"mode":         obj{"type": "string", "pattern": "^0?[0-7]{3}$"},
		"lines":        obj{"type": "object", "additionalProperties": obj{"type": "integer", "minimum": 0}, "description": "line -> how many lines equal it"},
	})
}
