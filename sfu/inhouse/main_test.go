package main

import (
	"os"
	"regexp"
	"testing"
)

// The adapter pins the version the install script builds and checks.
func TestVersionMatchesAdapter(t *testing.T) {
	b, err := os.ReadFile("../../sfu-configs/inhouse/sfu.toml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^version\s*=\s*"([^"]*)"`).FindSubmatch(b)
	if m == nil || string(m[1]) != Version {
		t.Fatalf("sfu.toml pins %q, the code is %s", m, Version)
	}
}
