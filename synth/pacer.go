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
	// pacerSlice is the time slice the pacer threads ask of the kernel's
	// EEVDF scheduler (Linux 6.12 and later; earlier ones ignore it). A
	// higher weight alone (nice) gives a woken pacer a larger share but not
	// the CPU at once: the task it wakes beside runs on to the end of its
	// slice (3 ms by default), and sends came 1-5 ms late beside a browser.
	// A short slice gives the pacer an early deadline, which preempts on
	// wake-up; a pacer's turn (a frame's packets) fits in it.
	pacerSlice = 100 * time.Microsecond
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
		runtime.GOMAXPROCS(2 * n)
		for range n {
			p := &pacer{}
			pacers = append(pacers, p)
			go p.run()
		}
	})
	s := &slot{due: monotonic() + int64(startLead+first), period: int64(period), send: send}
	p := pacers[nextPacer.Add(1)%uint64(len(pacers))]
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
	prioritise()
	for {
		p.mu.Lock()
		now := monotonic()
		if len(p.queue) == 0 || p.queue[0].due > now {
			until := now + int64(maxSleep)
			if len(p.queue) > 0 {
				until = min(until, p.queue[0].due)
			}
			p.mu.Unlock()
			sleepUntil(until)
			continue
		}
		s := heap.Pop(&p.queue).(*slot)
		p.mu.Unlock()
		if s.stopped.Load() {
			continue
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
}

// prioritise gives the calling thread the pacer's nice value and slice; best
// effort (a raised priority needs privilege).
func prioritise() {
	attr := unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: pacerNice, Runtime: uint64(pacerSlice)}
	if unix.SchedSetAttr(0, &attr, 0) != nil {
		_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), pacerNice)
	}
}
