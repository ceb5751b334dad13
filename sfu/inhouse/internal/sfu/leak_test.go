package sfu

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestJoinLeaveThousandTimesLeaksNothing: participants join a room with one
// long-lived member, exchange media with it and leave, 1000 times, eight at
// a time. Afterwards the server is back to the one member, goroutines and
// heap are back to where they were, and the member's connection has not
// grown an m-line per visitor.
func TestJoinLeaveThousandTimesLeaksNothing(t *testing.T) {
	cycles := 1000
	if testing.Short() {
		cycles = 100
	}
	const parallel = 8
	s, url := startServer(t, nil)
	host := join(t, url, "1", "host", clientOptions{})
	host.publish()
	defer host.close()

	visit := func(i int) error {
		c, err := tryJoin(t, url, "1", fmt.Sprintf("v%d", i), clientOptions{})
		if err != nil {
			return err
		}
		defer c.close()
		c.publish()
		deadline := time.Now().Add(10 * time.Second)
		for c.received("host", "audio") == 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("visitor %d got no media from the host", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}
	run := func(from, to int) {
		var wg sync.WaitGroup
		errs := make(chan error, to-from)
		next := make(chan int)
		for range parallel {
			wg.Go(func() {
				for i := range next {
					if err := visit(i); err != nil {
						errs <- err
					}
				}
			})
		}
		for i := from; i < to; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	settled := func() bool { return s.Snapshot() == Snapshot{Rooms: 1, Peers: 1, Tracks: 2} }
	measure := func() (int, uint64) {
		waitFor(t, "visitors to be gone", 10*time.Second, settled)
		var ms runtime.MemStats
		// Let closing goroutines finish and finalizers run before counting.
		for range 3 {
			time.Sleep(200 * time.Millisecond)
			runtime.GC()
		}
		runtime.ReadMemStats(&ms)
		return runtime.NumGoroutine(), ms.HeapInuse
	}

	run(0, 2*parallel) // warm up pools and caches
	g0, h0 := measure()
	start := time.Now()
	run(2*parallel, cycles)
	t.Logf("%d visits in %v", cycles-2*parallel, time.Since(start).Round(time.Millisecond))

	deadline := time.Now().Add(10 * time.Second)
	g1, h1 := measure()
	for g1 > g0+5 && time.Now().Before(deadline) {
		g1, h1 = measure()
	}
	t.Logf("goroutines %d → %d, heap in use %.1f → %.1f MiB", g0, g1, float64(h0)/(1<<20), float64(h1)/(1<<20))
	if g1 > g0+5 {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines grew from %d to %d:\n%s", g0, g1, buf[:runtime.Stack(buf, true)])
	}
	if h1 > h0+16<<20 {
		t.Errorf("heap in use grew from %d to %d bytes", h0, h1)
	}
	if n := len(host.pc.GetTransceivers()); n > 2+2*(parallel+1) {
		t.Errorf("the host's connection has %d transceivers after %d visits", n, cycles)
	}
	host.mu.Lock()
	corrupt, seen := host.corrupt, host.corruptSeen
	host.mu.Unlock()
	if corrupt != 0 {
		t.Errorf("host received %d packets with the wrong payload: %v", corrupt, seen)
	}
}
