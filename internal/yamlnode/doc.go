// Package yamlnode is the positioned-YAML reader: it decodes YAML through
// yaml.Node so every value keeps the line and column it was written at.
// The playbook, config and test-file loaders read through it, so one kind
// of mistake is reported in the same words by each.
//
// # API
//
// Load parses a source into its document node, a syntax error at the
// parser's position ("invalid YAML: …", with a hint when a tab indents the
// line). A Reader reads typed values out of the nodes: Str, Int,
// IntBetween, Number, Bool, Duration (ParseDuration: Go durations with a
// days prefix), List, Value (any node as a JSON-like Go value) and
// Mapping. Mapping decodes a mapping node into an Object: its pairs in
// written order and by name. Strict does the same and reports keys
// outside a known set, with a did-you-mean hint. All report through an
// Errorf the caller supplies, so each loader keeps its own diagnostic type
// and file name.
// KindWord names what a node holds for "must be X (got Y)" messages;
// JoinPath and KeyPath build the diagnostic paths ("steps[2].with",
// `routes["a b"]`).
//
// # Invariants
//
//   - Keys are scalars and unique; a duplicate is reported at the second
//     occurrence and the first one is kept.
//   - `<<` merge keys are honoured: a mapping or a list of mappings, earlier
//     sources winning over later ones and explicit keys over all of them.
//   - At the top level (path "") Strict accepts keys starting with "x-":
//     they hold anchors for reuse.
//   - Deref follows at most MaxDepth aliases, so an alias cycle cannot hang
//     it; callers that must refuse cycles measure the document first.
package yamlnode
