package main

import (
	"math"
	"sync"
	"time"
)

// recentTimes keeps the latest frame times, for a frames-per-second figure
// over the last second as getStats gives it.
type recentTimes struct {
	at   [64]time.Time
	next int
}

func (r *recentTimes) add(t time.Time) {
	r.at[r.next%len(r.at)] = t
	r.next++
}

func (r *recentTimes) perSecond(now time.Time) int {
	n := 0
	for _, t := range r.at {
		if !t.IsZero() && now.Sub(t) <= time.Second {
			n++
		}
	}
	return n
}

// series holds frames (time, loop position or -1, digest points) of one
// video while the engine follows videos, until the next post takes them.
type series struct {
	mu      sync.Mutex
	on      bool
	entries [][]any
}

func (s *series) follow(on bool) {
	s.mu.Lock()
	s.on = on
	s.entries = nil
	s.mu.Unlock()
}

// add records a frame: with its code when the receiver recognised it (a
// synthetic publisher's), else with points, a fingerprint of its bytes in
// place of a browser's picture points.
func (s *series) add(t time.Time, code int, points []int) {
	s.mu.Lock()
	if s.on {
		var c, p any
		if code >= 0 {
			c = code
		}
		if points != nil {
			p = points
		}
		s.entries = append(s.entries, []any{ms(t), nil, p, c})
	}
	s.mu.Unlock()
}

func (s *series) take() [][]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.entries
	s.entries = nil
	return out
}

// fingerprint turns a frame digest into eight levels 0..255: two frames
// with different bytes differ by far more than the check's threshold for
// "the same picture", identical frames by nothing.
func fingerprint(d uint64) []int {
	out := make([]int, 8)
	for i := range out {
		out[i] = int(d >> (8 * i) & 0xff)
	}
	return out
}

// histogram counts durations by microseconds rounded up to two significant
// digits: exact enough for percentiles, small enough to post twice a second.
type histogram struct {
	mu     sync.Mutex
	counts map[int64]uint64
}

var pacing = &histogram{counts: map[int64]uint64{}}

func bucket(us int64) int64 {
	if us < 100 {
		return max(us, 0)
	}
	scale := int64(1)
	for us >= 100 {
		us, scale = (us+9)/10, scale*10
	}
	return us * scale
}

func (h *histogram) record(d time.Duration) {
	b := bucket(int64(math.Ceil(float64(d) / float64(time.Microsecond))))
	h.mu.Lock()
	h.counts[b]++
	h.mu.Unlock()
}

// take returns [[µs, count], ...] since the last call.
func (h *histogram) take() [][2]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([][2]int64, 0, len(h.counts))
	for b, n := range h.counts {
		out = append(out, [2]int64{b, int64(n)})
	}
	clear(h.counts)
	return out
}

func (s *series) following() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.on
}
