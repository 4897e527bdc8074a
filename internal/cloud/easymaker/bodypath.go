package easymaker

import (
	"reflect"
	"strings"
)

// bodyAliases are the SDK parameter names whose request-body field is not
// the same words: the SDK's stage_name is the body's endpointStageName.
var bodyAliases = map[string]string{
	"stage_name":        "endpointStageName",
	"stage_description": "endpointStageDescription",
	"description":       "batchInferenceDescription",
}

// BodyPath names the field a problem path designates the way the request
// body does. Problem paths use the SDK's parameter names (training_name,
// tag_list[2].tagKey); the API's bodies are camelCase (trainingName,
// tagList[2].tagKey). req is the request (CreateTrainingRequest...); a
// segment that names no field of it is kept as it is.
func BodyPath(req any, path string) string {
	t := reflect.TypeOf(req)
	segs := strings.Split(path, ".")
	for i, seg := range segs {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		name, index, _ := strings.Cut(seg, "[")
		if index != "" {
			index = "[" + index
		}
		f, ok := jsonField(t, name)
		if !ok {
			return strings.Join(segs, ".")
		}
		segs[i] = f.name + index
		t = f.typ
		if index != "" && t.Kind() == reflect.Slice {
			t = t.Elem()
		}
	}
	return strings.Join(segs, ".")
}

type namedField struct {
	name string
	typ  reflect.Type
}

// jsonField finds the field of struct type t whose JSON name is name,
// compared without case and underscores (training_name is trainingName),
// or its alias.
func jsonField(t reflect.Type, name string) (namedField, bool) {
	if t == nil || t.Kind() != reflect.Struct {
		return namedField{}, false
	}
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
	want := []string{norm(name)}
	if a, ok := bodyAliases[name]; ok {
		want = append(want, norm(a))
	}
	for _, w := range want {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			if norm(tag) == w {
				return namedField{tag, sf.Type}, true
			}
		}
	}
	return namedField{}, false
}
