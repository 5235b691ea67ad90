// Package fleetjson reads the JSON of fleet files, for the simulated
// control planes (tpufake, computefake) alike: a file may be one value or
// several concatenated ones (`for n in …; do gcloud … describe $n; done`),
// and a decoding error names where it happened.
package fleetjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// SplitValues splits data into its top-level JSON values. A syntax error
// after the first value is reported with its line and column; one in the
// first is left to the single-value path, which names the element and field.
func SplitValues(data []byte) ([]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var values []json.RawMessage
	for {
		var v json.RawMessage
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return values, nil
		}
		if err != nil {
			if len(values) == 0 {
				return []json.RawMessage{data}, nil
			}
			return nil, Error(fmt.Sprintf("value %d", len(values)+1), data, err)
		}
		values = append(values, v)
	}
}

// Error turns a decoding error of data into one naming where it happened
// ("fleet: AT…"): the element path and field for a type error, line and
// column for a syntax error.
func Error(at string, data []byte, err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		path := at
		if typeErr.Field != "" {
			if path != "" {
				path += "."
			}
			path += typeErr.Field
		}
		if path == "" {
			path = "top level"
		}
		return fmt.Errorf("fleet: %s: cannot use JSON %s as %s", path, typeErr.Value, typeErr.Type)
	case errors.As(err, &syntaxErr):
		line, col := position(data, syntaxErr.Offset)
		prefix := "fleet: "
		if at != "" {
			prefix += at + ": "
		}
		return fmt.Errorf("%sline %d, column %d: %w", prefix, line, col, err)
	}
	if at != "" {
		return fmt.Errorf("fleet: %s: %w", at, err)
	}
	return fmt.Errorf("fleet: %w", err)
}

// position is the line and column (from 1) of the byte a syntax error
// stopped at: the decoder's Offset counts the bytes read, that one included.
func position(data []byte, offset int64) (line, col int) {
	offset = max(min(offset-1, int64(len(data))), 0)
	before := data[:offset]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(offset) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// ReadFile reads the fleet file at path with read (a fake's ReadFleet); an
// error names the file.
func ReadFile[F any](path string, read func(io.Reader) (F, error)) (F, error) {
	var zero F
	file, err := os.Open(path)
	if err != nil {
		return zero, fmt.Errorf("fleet: %w", err)
	}
	defer file.Close()
	f, err := read(file)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Resources decodes each raw value into a *R; an error names the element
// (key[i]).
func Resources[R any](key string, raws []json.RawMessage) ([]*R, error) {
	var out []*R
	for i, raw := range raws {
		var r *R
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, Error(fmt.Sprintf("%s[%d]", key, i), raw, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// FirstBytes is the start of b (20 bytes at most), to quote in an error.
func FirstBytes(b []byte) string {
	if len(b) > 20 {
		return string(b[:20])
	}
	return string(b)
}
