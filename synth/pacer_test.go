package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestPacerQueueGivesSlotsInTheOrderTheyAreDue(t *testing.T) {
	var q slots
	var want []int64
	for range 500 {
		at := rand.Int64N(1000) // repeats among them
		q.push(due{at: at, slot: &slot{}})
		want = append(want, at)
		if rand.IntN(3) == 0 { // pops between pushes, as the pacer's loop does
			slices.Sort(want)
			if got := q.pop().at; got != want[0] {
				t.Fatalf("popped %d, want the earliest %d", got, want[0])
			}
			want = want[1:]
		}
	}
	slices.Sort(want)
	for _, w := range want {
		if got := q.pop().at; got != w {
			t.Fatalf("popped %d, want %d", got, w)
		}
	}
	if len(q) != 0 {
		t.Fatalf("%d left after every slot was popped", len(q))
	}
}

func TestMonotonicIsTheClockClockNanosleepTakes(t *testing.T) {
	for range 5 {
		var ts unix.Timespec
		before := monotonic()
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			t.Fatal(err)
		}
		after := monotonic()
		if ts.Nano() < before-int64(50*time.Microsecond) || ts.Nano() > after+int64(50*time.Microsecond) {
			t.Errorf("CLOCK_MONOTONIC %d outside [%d, %d] read around it", ts.Nano(), before, after)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
