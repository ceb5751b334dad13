package sfu

import (
	"testing"
	"time"

	"sfubench/sfu/inhouse/internal/rtpfwd"
)

// A subscriber of a three-layer track reports once a second: clear, then a
// narrow link (40 % lost on anything above the smallest layer), then clear
// again. It is moved down a layer at a time, tried up ever less often while
// the link stays narrow, and back to the largest once it is plain.
func TestDownlinkFollowsTheLossItsSubscriberReports(t *testing.T) {
	l := newDownlink()
	start := time.Unix(1000, 0)
	layer := uint8(2) // what the subscriber receives: the ceiling's, from the next report on
	var moves []string
	step := func(sec int, narrow bool) {
		lost := uint8(0)
		if narrow && layer > 0 {
			lost = 102
		}
		c, moved := l.report(lost, start.Add(time.Duration(sec)*time.Second), layer, 2)
		if moved {
			layer = min(c, 2)
			name := "largest"
			if c != rtpfwd.Largest {
				name = string('0' + c)
			}
			moves = append(moves, time.Duration(sec*int(time.Second)).String()+" "+name)
		}
	}
	for sec := 0; sec < 10; sec++ {
		step(sec, false)
	}
	for sec := 10; sec < 70; sec++ {
		step(sec, true)
	}
	for sec := 70; sec < 130; sec++ {
		step(sec, false)
	}
	// the reports of the 2 s after each move are not counted: clear spells start after them
	want := []string{
		"10s 1", "12s 0", // down a layer per report
		"18s 1", "20s 0", // tried up after 4 s clear: still narrow
		"30s 1", "32s 0", // after 8 s
		"50s 1", "52s 0", // after 16 s
		"1m26s 1",       // after 32 s (the link plain since 70 s): holds 4 s
		"1m30s largest", // and the next try 4 s clear after it
	}
	if len(moves) != len(want) {
		t.Fatalf("moves %v, want %v", moves, want)
	}
	for i := range want {
		if moves[i] != want[i] {
			t.Fatalf("moves %v, want %v", moves, want)
		}
	}
}

// Loss between the two bounds neither lowers the layer nor counts as clear.
func TestDownlinkHoldsItsLayerOnModestLoss(t *testing.T) {
	l := newDownlink()
	start := time.Unix(1000, 0)
	if c, moved := l.report(102, start, 2, 2); !moved || c != 1 {
		t.Fatalf("40 %% lost: ceiling %d moved %v, want 1", c, moved)
	}
	for sec := 3; sec < 60; sec++ {
		if c, moved := l.report(13, start.Add(time.Duration(sec)*time.Second), 1, 2); moved {
			t.Fatalf("5 %% lost at %d s moved the ceiling to %d", sec, c)
		}
	}
}
