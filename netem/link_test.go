package main

import (
	"container/heap"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestDelayWithJitterHasTheProfilesMeanAndSpread(t *testing.T) {
	l := NewLink("t", Profile{DelayMs: 20, JitterMs: 5}, 1)
	var sum, sq float64
	const n = 20000
	for i := range n {
		now := int64(i) * 1e6 // a frame a millisecond
		at, ok := l.schedule(now, 100)
		if !ok || at < now {
			t.Fatalf("frame %d: dropped or sent before it came (%d < %d)", i, at, now)
		}
		d := float64(at-now) / 1e6
		sum, sq = sum+d, sq+d*d
	}
	mean := sum / n
	sd := math.Sqrt(sq/n - mean*mean)
	if math.Abs(mean-20) > 0.2 || math.Abs(sd-5) > 0.2 {
		t.Fatalf("delay %.2f ± %.2f ms for 20 ± 5", mean, sd)
	}
}

func TestFramesLeaveInTheOrderTheyAreDue(t *testing.T) {
	var d due
	for i, at := range []int64{30, 10, 20, 10} {
		heap.Push(&d, packet{at: at, seq: uint64(i)})
	}
	var order []uint64
	for d.Len() > 0 {
		order = append(order, heap.Pop(&d).(packet).seq)
	}
	if fmt.Sprint(order) != "[1 3 2 0]" {
		t.Fatalf("order %v", order)
	}
}

func lossRate(p Profile, n int) (float64, float64) {
	l := NewLink("t", p, 7)
	lost, runs, prev := 0, 0, false
	for i := range n {
		_, ok := l.schedule(int64(i)*1e6, 100)
		if !ok {
			lost++
			if !prev {
				runs++
			}
		}
		prev = !ok
	}
	return float64(lost) / float64(n), float64(lost) / math.Max(1, float64(runs))
}

func TestRandomAndBurstyLossKeepTheirMeanRate(t *testing.T) {
	rate, run := lossRate(Profile{LossPct: 2}, 200000)
	if math.Abs(rate-0.02) > 0.002 || run > 1.1 {
		t.Fatalf("random 2%%: rate %.4f, mean run %.2f", rate, run)
	}
	rate, run = lossRate(Profile{LossPct: 2, Burst: 4}, 400000)
	if math.Abs(rate-0.02) > 0.003 || math.Abs(run-4) > 0.5 {
		t.Fatalf("bursty 2%% in runs of 4: rate %.4f, mean run %.2f", rate, run)
	}
}

func TestAPartitionLosesEveryFrameWhateverItsBurst(t *testing.T) {
	for _, burst := range []float64{0, 1, 4} {
		if rate, _ := lossRate(Profile{LossPct: 100, Burst: burst}, 10000); rate != 1 {
			t.Fatalf("100%% in runs of %g: rate %.4f", burst, rate)
		}
	}
}

func TestRateSpacesFramesAndTheQueueDropsWhatItCannotHold(t *testing.T) {
	// 1000 kbit/s: a 1250-byte frame takes 10 ms; a 50 ms queue holds 5 of them.
	l := NewLink("t", Profile{RateKbps: 1000, QueueMs: 50}, 1)
	var sent []int64
	for range 20 { // a burst of 20 at once
		if at, ok := l.schedule(0, 1250); ok {
			sent = append(sent, at)
		}
	}
	if len(sent) != 6 { // the one on the wire and five waiting
		t.Fatalf("%d of a burst of 20 passed a 50 ms queue", len(sent))
	}
	for i, at := range sent {
		if want := int64(i+1) * 10e6; at != want {
			t.Fatalf("frame %d leaves at %d ns, want %d", i, at, want)
		}
	}
	if c := l.Counters(); c.Overflow != 14 || c.Packets != 20 {
		t.Fatalf("counters %+v", c)
	}
}

func TestBadProfilesAreRefused(t *testing.T) {
	for _, p := range []Profile{{DelayMs: -1}, {LossPct: 100.5}, {Burst: 0.5}, {RateKbps: -3}} {
		if p.Validate() == nil {
			t.Fatalf("%+v accepted", p)
		}
	}
}

func TestAGroupIsToldApartByItsAddress(t *testing.T) {
	frame := func(ethertype uint16, src, dst [4]byte) []byte {
		f := make([]byte, 60)
		f[12], f[13] = byte(ethertype>>8), byte(ethertype)
		copy(f[26:30], src[:])
		copy(f[30:34], dst[:])
		return f
	}
	group, sfu, other := [4]byte{127, 0, 8, 3}, [4]byte{127, 0, 8, 1}, [4]byte{127, 0, 8, 2}
	up := &Direction{Name: "up", All: NewLink("up", Profile{}, 1), Group: NewLink("g", Profile{}, 2), IP: group, at: 26}
	down := &Direction{Name: "down", All: NewLink("down", Profile{}, 1), Group: NewLink("g", Profile{}, 2), IP: group, at: 30}
	cases := []struct {
		d    *Direction
		f    []byte
		want *Link
	}{
		{up, frame(0x0800, group, sfu), up.Group},
		{up, frame(0x0800, other, sfu), up.All},
		{down, frame(0x0800, sfu, group), down.Group},
		{down, frame(0x0800, sfu, other), down.All},
		{up, frame(0x0806, group, sfu), up.All}, // ARP: not IPv4, the link everyone shares
		{up, frame(0x0800, group, sfu)[:20], up.All},
	}
	for i, c := range cases {
		if got := c.d.pick(c.f); got != c.want {
			t.Fatalf("case %d: picked %s", i, got.name)
		}
	}
}

func TestProfileHasEveryKeyOfTheSchemaAndNoOther(t *testing.T) {
	fields := Profile{}.fields()
	if len(fields) != len(schema.Properties) {
		t.Fatalf("Profile has %d keys, profile.schema.json %d", len(fields), len(schema.Properties))
	}
	for key := range schema.Properties {
		if _, ok := fields[key]; !ok {
			t.Fatalf("profile.schema.json's %s is not a Profile field", key)
		}
	}
}

func TestTheSchemasMessageNamesTheKey(t *testing.T) {
	err := Profile{LossPct: 100.5}.Validate()
	if err == nil || !strings.Contains(err.Error(), "loss_pct must be a number within 0-100") {
		t.Fatalf("got %v", err)
	}
	if err := (Profile{Burst: 1, LossPct: 2, DelayMs: 10}).Validate(); err != nil {
		t.Fatal(err)
	}
}
