// Package jsonvalue decodes JSON documents into the values expressions
// and step params work with: maps, lists, strings, booleans, nil, and
// numbers as int64 when integral, else float64 — the types YAML gives too,
// so a value reads the same whether it came from a playbook or a webhook.
// A number beyond float64's range is refused: it could not be stored
// again. Kind names what a value holds (null, string, boolean, integer,
// number, list, map): the one name of a value's kind in the messages of
// the expressions, the playbook loader, the step params and the run
// inputs.
package jsonvalue
