package jsonvalue

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"
)

// Kind names what v holds, in the words playbook authors know: null,
// string, boolean, integer, number, list, map, and for the values
// expressions compute, time and duration. A number is an integer only
// when its type is (3.0 is a number). It is the one name of a value's
// kind for every "must be X (got Y)" message about a value.
func Kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "integer"
	case float32, float64, json.Number:
		return "number"
	case time.Time:
		return "time"
	case time.Duration:
		return "duration"
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.Slice, reflect.Array:
		return "list"
	case reflect.Map:
		return "map"
	}
	return fmt.Sprintf("%T", v)
}
