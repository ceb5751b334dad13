package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxSleep bounds one sleep of a pacer, so a slot added while it sleeps
// (due no sooner than startLead) is never woken late.
const (
	maxSleep  = 2 * time.Millisecond
	startLead = 5 * time.Millisecond
	// sendEarly: a pacer that wakes sends every slot due within it, early.
	// One wake-up then serves several streams (each wake-up a nanosleep and
	// two context switches, some 7,900 a second at 168 participants); the error
	// it adds is counted as pacing error, and is well under the frame-timing
	// jitter of a browser's capture and encoder (milliseconds).
	sendEarly = 250 * time.Microsecond
	// A pacer thread runs real-time (SCHED_FIFO at pacerPriority): a real
	// participant has its machine to itself, and a send held up by a
	// neighbour would show as the SFU's jitter. As a normal thread, however
	// favoured (nice, a short EEVDF slice), it waited behind other groups'
	// tasks on its CPU: the engine's own work held woken pacers for up to
	// 5 ms, pacing p99 1.5-2.7 ms from 42 participants on (0.1-0.2 ms
	// real-time). Where real-time is refused (no privilege, a cgroup without
	// a real-time share, as a CPU-capped one has), the favoured normal thread
	// it is.
	pacerPriority = 1
	pacerNice     = -10
	pacerSlice    = 100 * time.Microsecond
	// Go's scheduler preempts a goroutine that has held its P for 10 ms, and
	// a pacer holds its P while it sleeps: every 10 ms it goes back to the
	// run queue and waits for a P. With none to spare it waited behind the
	// goroutines queued on the busy ones, up to 36 ms beside a browser at 77
	// participants (perf sched: its thread parked in stoplockedm), the late
	// sends of a window. Idle Ps take it sooner (docs/performance-history.md:
	// "The generator, with its pacers real-time").
	spareProcs = 2
)

// slot is one stream's sending schedule: send is called every period.
type slot struct {
	period  int64
	send    func(skipped int)
	stopped atomic.Bool
}

// due is a slot in its pacer's queue, with the time it is due next
// (CLOCK_MONOTONIC ns) beside it rather than in it: the heap's comparisons,
// hundreds a send, then read no slot (each a cache miss).
type due struct {
	at int64
	*slot
}

// slots is a pacer's queue: a binary heap by due time, of values (where
// container/heap would box each into an interface, an allocation a send).
type slots []due

func (q *slots) push(d due) {
	*q = append(*q, d)
	h := *q
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if h[parent].at <= h[i].at {
			break
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

func (q *slots) pop() due {
	h := *q
	top, last := h[0], len(h)-1
	h[0] = h[last]
	h[last] = due{}
	h = h[:last]
	for i := 0; ; {
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h[l].at < h[least].at {
			least = l
		}
		if r < len(h) && h[r].at < h[least].at {
			least = r
		}
		if least == i {
			break
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
	*q = h
	return top
}

// pacer sends on time from one OS thread of its own that sleeps on an
// absolute high-resolution timer (clock_nanosleep) until the next slot is
// due. Go's timers would do for most programs, but they wake through the
// runtime's poller, up to a millisecond late: as much as the jitter an SFU
// adds, which is what is being measured.
type pacer struct {
	mu    sync.Mutex
	queue slots
}

// pacers are shared by every publisher of the process, one per core Go may
// use; a publisher's streams are spread over them.
var (
	pacersOnce sync.Once
	pacers     []*pacer
	nextPacer  atomic.Uint64
)

func schedule(period time.Duration, first time.Duration, send func(skipped int)) *slot {
	pacersOnce.Do(func() {
		n := max(1, runtime.GOMAXPROCS(0))
		// Each pacer keeps its P while it sleeps (sleepUntil): these are theirs.
		runtime.GOMAXPROCS(2*n + spareProcs)
		for range n {
			p := &pacer{}
			pacers = append(pacers, p)
			go p.run()
		}
	})
	s := &slot{period: int64(period), send: send}
	p := pacers[nextPacer.Add(1)%uint64(len(pacers))]
	p.mu.Lock()
	p.queue.push(due{monotonic() + int64(startLead+first), s})
	p.mu.Unlock()
	return s
}

// monotonic is CLOCK_MONOTONIC in ns, as clock_nanosleep takes it: read
// once through a system call, then followed with Go's monotonic clock, which
// reads the same clock through the vDSO (a system call each read was 1 % of
// the generator's CPU).
func monotonic() int64 { return monotonicBase + int64(time.Since(monotonicStart)) }

var monotonicStart, monotonicBase = func() (time.Time, int64) {
	var ts unix.Timespec
	start := time.Now()
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return start, ts.Nano()
}()

// sleepUntil sleeps on CLOCK_MONOTONIC without telling the Go runtime, so
// the thread keeps its P: on waking it runs at once. (Through the runtime's
// syscall path it would hand its P to other goroutines and, with them all
// busy, wait its turn for one: milliseconds late.) A signal (the runtime's
// preemption) cuts the sleep short, which the pacer's loop absorbs.
func sleepUntil(ns int64) {
	ts := unix.NsecToTimespec(ns)
	unix.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME,
		uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
}

func (p *pacer) run() {
	runtime.LockOSThread()
	if prioritise() != unix.SCHED_FIFO {
		fmt.Fprintln(os.Stderr, "sfubench-synth: a pacer runs as a normal thread (real-time refused here):"+
			" other tasks on its CPU may delay its sends")
	}
	for {
		p.mu.Lock()
		now := monotonic()
		if len(p.queue) == 0 || p.queue[0].at > now+int64(sendEarly) {
			until := now + int64(maxSleep)
			if len(p.queue) > 0 {
				until = min(until, p.queue[0].at)
			}
			p.mu.Unlock()
			sleepUntil(until)
			continue
		}
		s := p.queue.pop()
		p.mu.Unlock()
		if s.stopped.Load() {
			continue
		}
		off := now - s.at // < 0: sent early, within sendEarly
		pacing.record(time.Duration(max(off, -off)))
		late := max(off, 0)
		// A pacer held up for more than a period skips the slots it missed,
		// as a camera and encoder would drop those frames: timestamps stay
		// on real time.
		skipped := late / s.period
		s.at += (skipped + 1) * s.period
		s.send(int(skipped))
		p.mu.Lock()
		p.queue.push(s)
		p.mu.Unlock()
	}
}

// prioritise makes the calling thread real-time, else gives it the pacer's
// nice value and slice; best effort (each needs privilege). It returns the
// policy the thread runs under.
func prioritise() int {
	rt := unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: pacerPriority}
	if unix.SchedSetAttr(0, &rt, 0) == nil {
		return unix.SCHED_FIFO
	}
	attr := unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: pacerNice,
		Runtime: uint64(pacerSlice)}
	if unix.SchedSetAttr(0, &attr, 0) != nil {
		_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), pacerNice)
	}
	return unix.SCHED_NORMAL
}
