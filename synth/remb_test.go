package main

import (
	"math"
	"testing"
)

// The estimate follows a narrowing link as Chrome's does: on a clear path
// it stays within 1.5 times what arrives; once packets are lost or queue it
// falls to 0.85 times what arrives, and grows back by 8 % a second, capped
// again by what arrives, once the path is clear.
func TestREMBEstimateFallsOnCongestionAndGrowsBackWithinWhatArrives(t *testing.T) {
	in := &inbound{kind: "video", started: true}
	streams := []*fastStream{{ssrc: 7, in: in}}
	var e rembEstimate
	now := epoch
	e.due(now)
	// each step: bit/s arriving, packets lost of 100, queueing (s); the estimate after
	steps := []struct {
		bps       float64
		lost      int64
		queued    float64
		low, high float64
		what      string
	}{
		{2e6, 0, 0, 3.01e6, 3.01e6, "first: 1.5 x incoming + 10 kbit/s"},
		{2e6, 0, 0, 3.01e6, 3.01e6, "clear: capped by incoming"},
		{0.7e6, 10, 0.2, 0.595e6, 0.595e6, "loss: 0.85 x incoming"},
		{0.7e6, 0, 0.3, 0.595e6, 0.595e6, "queued: no growth"},
		{0.45e6, 0, 0, 0.595e6 * math.Pow(1.08, 0.5), 0.595e6 * math.Pow(1.08, 0.5), "clear: 8 %/s"},
		{0.3e6, 0, 0, 0.46e6, 0.46e6, "clear, less arriving: capped by it"},
	}
	for _, s := range steps {
		now = now.Add(rembInterval)
		if !e.due(now) {
			t.Fatalf("%s: not due after an interval", s.what)
		}
		e.received(int(s.bps * rembInterval.Seconds() / 8))
		in.maxSeq += 100
		in.packets += uint64(100 - s.lost)
		in.queued = s.queued
		if got, _ := e.update(now, streams); got < s.low-1 || got > s.high+1 {
			t.Errorf("%s: estimate %.0f, want %.0f-%.0f", s.what, got, s.low, s.high)
		}
	}
	if e.due(now.Add(rembInterval / 2)) {
		t.Error("due before an interval")
	}
	if p := rembPacket(e.bitrate, streams); len(p.SSRCs) != 1 || p.SSRCs[0] != 7 {
		t.Errorf("REMB for %v", p.SSRCs)
	}
}
