package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
)

// The keys of one direction and their rules, written once for this program
// and for sfubench/network.py, which reads the same file.
//
//go:embed profile.schema.json
var schemaJSON []byte

type rule struct {
	Minimum      *float64 `json:"minimum"`
	Maximum      *float64 `json:"maximum"`
	Const        *float64 `json:"const"`
	AnyOf        []rule   `json:"anyOf"`
	ErrorMessage string   `json:"errorMessage"`
}

// allows reports whether v satisfies r (the subset of JSON Schema the file uses).
func (r rule) allows(v float64) bool {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return false
	case r.Const != nil && v != *r.Const:
		return false
	case r.Minimum != nil && v < *r.Minimum:
		return false
	case r.Maximum != nil && v > *r.Maximum:
		return false
	}
	if len(r.AnyOf) == 0 {
		return true
	}
	for _, alt := range r.AnyOf {
		if alt.allows(v) {
			return true
		}
	}
	return false
}

var schema = func() (s struct {
	Properties map[string]rule `json:"properties"`
}) {
	if err := json.Unmarshal(schemaJSON, &s); err != nil {
		panic("profile.schema.json: " + err.Error())
	}
	return s
}()

// fields gives a profile's values by their JSON keys.
func (p Profile) fields() map[string]float64 {
	out := map[string]float64{}
	v, t := reflect.ValueOf(p), reflect.TypeOf(p)
	for i := 0; i < t.NumField(); i++ {
		key, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out[key] = v.Field(i).Float()
	}
	return out
}

// Validate refuses a profile that breaks a rule of the schema, with the
// message sfubench/network.py gives for it.
func (p Profile) Validate() error {
	values := p.fields()
	for key, value := range values {
		r, known := schema.Properties[key]
		if !known {
			return fmt.Errorf("network profile: %s is not in profile.schema.json", key)
		}
		if !r.allows(value) {
			return fmt.Errorf("network profile: %s %s, got %g", key, r.ErrorMessage, value)
		}
	}
	return nil
}
