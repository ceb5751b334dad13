package main

import (
	"container/heap"
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
	// pacerNice raises the pacer threads over the rest of the clients'
	// cgroup (browsers, receive loops): a real participant has its machine to
	// itself, and a send held up by a neighbour would show as the SFU's jitter.
	pacerNice = -10
)

// slot is one stream's sending schedule: send is called every period.
type slot struct {
	due     int64 // CLOCK_MONOTONIC ns
	period  int64
	send    func(skipped int)
	stopped atomic.Bool
}

type slots []*slot

func (s slots) Len() int           { return len(s) }
func (s slots) Less(i, j int) bool { return s[i].due < s[j].due }
func (s slots) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s *slots) Push(x any)        { *s = append(*s, x.(*slot)) }
func (s *slots) Pop() any {
	old := *s
	x := old[len(old)-1]
	*s = old[:len(old)-1]
	return x
}

// pacer is one core's event loop: it sends on time from an OS thread of its
// own that sleeps on an absolute high-resolution timer (clock_nanosleep)
// until the next slot is due, and between slots it reads its share of the
// fast sockets (reader). Go's timers would do for most programs, but they
// wake through the runtime's poller, up to a millisecond late: as much as the
// jitter an SFU adds, which is what is being measured. Reading on the same
// thread keeps the two from competing for the core: a separate reader thread,
// woken every 10 ms to read every socket, held the sends up by as much.
type pacer struct {
	mu    sync.Mutex
	queue slots
	reads reader
}

// pacers are shared by every publisher and socket of the process, one per
// core Go may use; streams and sockets are spread over them.
var (
	pacersOnce sync.Once
	pacers     []*pacer
	nextPacer  atomic.Uint64
)

func startPacers() {
	pacersOnce.Do(func() {
		n := max(1, runtime.GOMAXPROCS(0))
		// Each pacer keeps its P while it sleeps (sleepUntil): these are theirs.
		runtime.GOMAXPROCS(2 * n)
		for range n {
			p := &pacer{reads: newReader()}
			pacers = append(pacers, p)
			go p.run()
		}
	})
}

// anyPacer picks the pacer for the next stream or socket, in turn.
func anyPacer() *pacer {
	startPacers()
	return pacers[nextPacer.Add(1)%uint64(len(pacers))]
}

func schedule(period time.Duration, first time.Duration, send func(skipped int)) *slot {
	s := &slot{due: monotonic() + int64(startLead+first), period: int64(period), send: send}
	p := anyPacer()
	p.mu.Lock()
	heap.Push(&p.queue, s)
	p.mu.Unlock()
	return s
}

func monotonic() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

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
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), pacerNice) // best effort: needs privilege
	for {
		now := monotonic()
		if p.reads.starved(now) && p.reads.step(now) {
			continue
		}
		if s := p.due(now); s != nil {
			p.send(s, now)
			continue
		}
		// Nothing to send: one socket's read, if a round is due, keeps a
		// slot that falls due meanwhile waiting one socket at most.
		if p.reads.step(now) {
			continue
		}
		sleepUntil(min(p.next(now), p.reads.nextRound))
	}
}

// due takes the slot whose time has come, if any.
func (p *pacer) due(now int64) *slot {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 || p.queue[0].due > now {
		return nil
	}
	return heap.Pop(&p.queue).(*slot)
}

// next is when the earliest slot falls due, maxSleep from now at the latest.
func (p *pacer) next(now int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	until := now + int64(maxSleep)
	if len(p.queue) > 0 {
		until = min(until, p.queue[0].due)
	}
	return until
}

func (p *pacer) send(s *slot, now int64) {
	if s.stopped.Load() {
		return
	}
	late := now - s.due
	pacing.record(time.Duration(late))
	// A pacer held up for more than a period skips the slots it missed,
	// as a camera and encoder would drop those frames: timestamps stay
	// on real time.
	skipped := late / s.period
	s.due += (skipped + 1) * s.period
	s.send(int(skipped))
	p.mu.Lock()
	heap.Push(&p.queue, s)
	p.mu.Unlock()
}
