package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
)

// profileEnv names a folder that receives the generator's CPU profile of its
// whole life (cpu.pprof) and its allocations (allocs.pprof) when it exits:
// where its time goes, for `make bench` and whoever makes it cheaper.
const profileEnv = "SFUBENCH_SYNTH_PROFILE"

// startProfile starts the CPU profile if the environment asks for one; the
// returned function ends it and writes the allocation profile.
func startProfile() func() {
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "sfubench-synth: profile:", err)
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sfubench-synth: profile:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		runtime.GC()
		if a, err := os.Create(filepath.Join(dir, "allocs.pprof")); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(a, 0)
			a.Close()
		}
	}
}
