package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Decode parses one JSON document (nothing after it) with its numbers
// normalized as Normalize does.
func Decode(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return Normalize(v)
}

// Normalize turns the json.Numbers in v (decoded with UseNumber) into
// int64 when integral, else float64, in place, refusing a number out of
// float64's range.
func Normalize(v any) (any, error) {
	var err error
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s is out of range", x)
		}
		return f, nil
	case map[string]any:
		for k, e := range x {
			if x[k], err = Normalize(e); err != nil {
				return nil, err
			}
		}
	case []any:
		for i, e := range x {
			if x[i], err = Normalize(e); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}
