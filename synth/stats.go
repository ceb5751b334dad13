package main

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
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

// frame is one video frame as the engine's frame series take it: when it
// came or left (ms since the epoch), its loop position in the clip (code, or
// -1: not recognised) and, for a frame not recognised, its fingerprint in
// place of a browser's picture points.
type frame struct {
	at     float64
	code   int
	points []int
}

// frames encode as the series' JSON arrays, [t, null, points, code], with
// null for no points or no code. Written out here, not by reflection: every
// received frame of a followed video is one, some 15,000 a second at 168
// synthetic participants, where encoding/json's per-element reflection and
// boxing were 2-3 % of the generator's CPU.
type frames []frame

func (fs frames) MarshalJSON() ([]byte, error) {
	return fs.appendTo(make([]byte, 0, 48*len(fs)+2)), nil
}

func (fs frames) appendTo(b []byte) []byte {
	b = append(b, '[')
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendJSONFloat(b, f.at)
		b = append(b, ",null,"...)
		if f.points == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for j, v := range f.points {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, int64(v), 10)
			}
			b = append(b, ']')
		}
		b = append(b, ',')
		if f.code < 0 {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendInt(b, int64(f.code), 10)
		}
		b = append(b, ']')
	}
	return append(b, ']')
}

// record is one getStats-like record of a stream, as a JSON object. It
// encodes itself, as encoding/json would (keys in byte order, its number
// formats), by a switch over the few types its values have: some 2,000 a
// second go to the engine at 168 participants, and encoding/json's
// reflection over boxed values was 2-3 % of the generator's CPU. A value of
// another type, or a string needing escapes, takes encoding/json's way.
type record map[string]any

func (r record) MarshalJSON() ([]byte, error) {
	var err error
	b := r.appendTo(make([]byte, 0, 24*len(r)), &err)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (r record) appendTo(b []byte, err *error) []byte {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendJSON(b, k, err), ':')
		b = appendJSON(b, r[k], err)
	}
	return append(b, '}')
}

// appendJSON appends v as encoding/json writes it; an error goes to *err.
func appendJSON(b []byte, v any, err *error) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		if plain(v) {
			return append(append(append(b, '"'), v...), '"')
		}
	case float64:
		if abs := math.Abs(v); abs == 0 || abs >= 1e-6 && abs < 1e21 {
			return appendJSONFloat(b, v)
		}
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10)
	case uint64:
		return strconv.AppendUint(b, v, 10)
	// The batches posted to the engine nest records and frame series:
	// written here, as encoding/json would (map keys in order), they are
	// not written once by their own encoders and then checked and copied
	// again by encoding/json's (2.5 % of the generator's CPU at 168
	// participants).
	case record:
		return v.appendTo(b, err)
	case []record:
		b = append(b, '[')
		for i, r := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = r.appendTo(b, err)
		}
		return append(b, ']')
	case frames:
		return v.appendTo(b)
	case map[string]frames:
		keys := slices.Sorted(maps.Keys(v))
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendJSON(b, k, err), ':')
			b = v[k].appendTo(b)
		}
		return append(b, '}')
	}
	out, e := json.Marshal(v)
	if e != nil && *err == nil {
		*err = e
	}
	return append(b, out...)
}

// plain says whether s needs no escape in JSON, as encoding/json escapes
// (HTML's <, > and & included).
func plain(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// appendJSONFloat appends f as encoding/json writes a float64 of magnitude
// 1e-6 to 1e21 (or 0).
func appendJSONFloat(b []byte, f float64) []byte {
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

// series holds frames of one video while the engine follows videos, until
// the next post takes them.
type series struct {
	mu      sync.Mutex
	on      bool
	entries frames
}

// follow starts or stops keeping frames; what was kept and not taken is
// dropped when it stops, and kept when it is asked to go on.
func (s *series) follow(on bool) {
	s.mu.Lock()
	if s.on != on {
		s.on = on
		s.entries = nil
	}
	s.mu.Unlock()
}

// add records a frame: with its code when the receiver recognised it (a
// synthetic publisher's), else with points, a fingerprint of its bytes in
// place of a browser's picture points.
func (s *series) add(t time.Time, code int, points []int) {
	s.mu.Lock()
	if s.on {
		s.entries = append(s.entries, frame{at: ms(t), code: code, points: points})
	}
	s.mu.Unlock()
}

func (s *series) take() frames {
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
