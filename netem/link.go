package main

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Profile is one direction of a link.
type Profile struct {
	DelayMs  float64 `json:"delay_ms"`
	JitterMs float64 `json:"jitter_ms"` // standard deviation of the delay
	LossPct  float64 `json:"loss_pct"`
	// Burst is the mean length of a loss burst, in packets: above 1, losses
	// come in runs (a two-state Gilbert model) at the same mean rate.
	Burst    float64 `json:"burst"`
	RateKbps float64 `json:"rate_kbps"` // 0: no limit
	QueueMs  float64 `json:"queue_ms"`  // what the rate's queue holds; more is dropped
}

// Counters are a direction's totals since the start.
type Counters struct {
	Packets   uint64 `json:"packets"`  // entered
	Bytes     uint64 `json:"bytes"`    // entered
	Lost      uint64 `json:"lost"`     // dropped by the loss model
	Overflow  uint64 `json:"overflow"` // dropped by the full queue
	Late      uint64 `json:"late"`     // sent more than a millisecond after their time
	MaxLateUs uint64 `json:"max_late_us"`
}

const queueCap = 1 << 16

type packet struct {
	at    int64 // ns on the monotonic clock: when it leaves
	seq   uint64
	frame []byte
}

// due orders packets by departure, then arrival.
type due []packet

func (d due) Len() int { return len(d) }
func (d due) Less(i, j int) bool {
	return d[i].at < d[j].at || d[i].at == d[j].at && d[i].seq < d[j].seq
}
func (d due) Swap(i, j int) { d[i], d[j] = d[j], d[i] }
func (d *due) Push(x any)   { *d = append(*d, x.(packet)) }
func (d *due) Pop() any {
	old := *d
	p := old[len(old)-1]
	*d = old[:len(old)-1]
	return p
}

// Link applies one Profile to the frames of one direction (of one group).
type Link struct {
	name string
	mu   sync.Mutex // p changes mid-run (Set)
	p    Profile
	rng  *rand.Rand
	bad  bool  // the Gilbert model's state
	free int64 // when the rate's transmitter is free, ns
	c    struct{ packets, bytes, lost, overflow, late, maxLate atomic.Uint64 }
}

func NewLink(name string, p Profile, seed int64) *Link {
	return &Link{name: name, p: p, rng: rand.New(rand.NewPCG(uint64(seed), 0x5fb))}
}

func (l *Link) Counters() Counters {
	return Counters{l.c.packets.Load(), l.c.bytes.Load(), l.c.lost.Load(), l.c.overflow.Load(), l.c.late.Load(),
		l.c.maxLate.Load()}
}

// Set replaces the profile, from the next frame on; frames already
// scheduled keep their time.
func (l *Link) Set(p Profile) {
	l.mu.Lock()
	l.p = p
	l.mu.Unlock()
}

// lose draws the loss model for one frame.
func (l *Link) lose() bool {
	p := l.p.LossPct / 100
	if p == 0 {
		return false
	}
	if p >= 1 { // a partition: the burst model's rates would divide by zero
		return true
	}
	if l.p.Burst <= 1 {
		return l.rng.Float64() < p
	}
	// Leave the bad state after Burst frames on average; enter it as often
	// as keeps the long-run loss at p.
	leave := 1 / l.p.Burst
	enter := p * leave / (1 - p)
	if l.bad {
		l.bad = l.rng.Float64() >= leave
	} else {
		l.bad = l.rng.Float64() < enter
	}
	return l.bad
}

// schedule says when a frame of n bytes entering at now (ns) leaves, or
// false when it is dropped.
func (l *Link) schedule(now int64, n int) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.c.packets.Add(1)
	l.c.bytes.Add(uint64(n))
	if l.lose() {
		l.c.lost.Add(1)
		return 0, false
	}
	t := now
	if l.p.RateKbps > 0 {
		start := max(now, l.free)
		if l.p.QueueMs > 0 && float64(start-now) > l.p.QueueMs*1e6 {
			l.c.overflow.Add(1)
			return 0, false
		}
		l.free = start + int64(float64(n*8)/l.p.RateKbps*1e6)
		t = l.free
	}
	d := l.p.DelayMs
	if l.p.JitterMs > 0 {
		d = math.Max(0, d+l.rng.NormFloat64()*l.p.JitterMs)
	}
	return t + int64(d*1e6), true
}

// monotonic is CLOCK_MONOTONIC in ns, the clock sleepUntil sleeps on, read
// as Go reads its own, without a system call (one for every frame's time
// took a sixth of the emulator's CPU).
func monotonic() int64 {
	return clockBase + int64(time.Since(clockStart))
}

// Go's monotonic clock is CLOCK_MONOTONIC counted from its start: the two
// differ by a constant.
var clockStart, clockBase = func() (time.Time, int64) {
	start := time.Now()
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return start, ts.Nano() - int64(time.Since(start))
}()

// sleepUntil sleeps on a kernel high-resolution timer: Go's timers wake up
// to a millisecond late on a busy two-core machine, a sizeable share of a
// profile's delay.
func sleepUntil(at int64) {
	ts := unix.NsecToTimespec(at)
	for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil) == unix.EINTR {
	}
}

// fine is how close to a frame's time send stops waiting on Go's timer and
// sleeps on the kernel's.
const fine = 2 * time.Millisecond

// Direction is what enters on one interface: a Link for most frames, and
// optionally another for a group of clients, told apart by their IPv4
// address (the source going up, the destination coming down).
type Direction struct {
	Name  string
	All   *Link
	Group *Link
	IP    [4]byte
	// at is where the address sits in an Ethernet frame: 26 (source) or
	// 30 (destination).
	at  int
	seq uint64
}

func (d *Direction) pick(frame []byte) *Link {
	if d.Group != nil && len(frame) >= 34 && frame[12] == 0x08 && frame[13] == 0x00 &&
		[4]byte(frame[d.at:d.at+4]) == d.IP {
		return d.Group
	}
	return d.All
}

func (d *Direction) receive(in *port, q chan<- packet) error {
	buf := make([]byte, 1<<16)
	for {
		n, err := in.read(buf)
		if err != nil {
			return fmt.Errorf("%s: reading %s: %w", d.Name, in.name, err)
		}
		if n < 0 {
			continue // a frame this process sent out of the interface
		}
		l := d.pick(buf[:n])
		at, ok := l.schedule(monotonic(), n)
		if !ok {
			continue
		}
		d.seq++
		select {
		case q <- packet{at, d.seq, append([]byte(nil), buf[:n]...)}:
		default:
			l.c.overflow.Add(1)
		}
	}
}

// send writes each frame out when it is due; frames jitter put out of order
// leave out of order, as netem's do.
func (d *Direction) send(out *port, q <-chan packet) error {
	// The thread sleeps on its own timer slack: the default 50 µs is fine,
	// but a nice-d or busy machine may have raised it.
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0)
	var pending due
	timer := time.NewTimer(time.Hour)
	for {
		var wake <-chan time.Time
		if len(pending) > 0 {
			at := pending[0].at
			wait := at - monotonic()
			if wait <= int64(fine) {
				// Frames coming meanwhile wait in q; with jitter one of them may
				// be due sooner, and leaves up to `fine` late (counted as late).
				// One due already, as many are once a sleep ends, leaves at once.
				if wait > 0 {
					sleepUntil(at)
				}
				if err := d.write(out, heap.Pop(&pending).(packet)); err != nil {
					return err
				}
				continue
			}
			timer.Reset(time.Duration(wait) - fine)
			wake = timer.C
		}
		select {
		case p := <-q:
			heap.Push(&pending, p)
		case <-wake:
		}
	}
}

func (d *Direction) write(out *port, p packet) error {
	if late := monotonic() - p.at; late > int64(time.Millisecond) {
		l := d.pick(p.frame)
		l.c.late.Add(1)
		if us := uint64(late / 1000); us > l.c.maxLate.Load() {
			l.c.maxLate.Store(us)
		}
	}
	if err := out.write(p.frame); err != nil {
		return fmt.Errorf("%s: writing %s: %w", d.Name, out.name, err)
	}
	return nil
}
