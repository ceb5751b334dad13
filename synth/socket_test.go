package main

import (
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel's share of a datagram, the floor under the generator's cost:
// what a fast socket's batched read (with its arrival timestamp) and a send
// cost in CPU time, on loopback, with the other end on another CPU as the
// lab's SFU is. The datagrams read were written there (the kernel hands what
// a read frees back to the CPU that allocated it, an interrupt to that CPU
// every few dozen), and a send delivers into the other socket (on loopback,
// as on the lab's veth links, the sender pays the receiving side's IP and
// UDP work): to a reader at work (the floor), or, apart, to one asleep in
// its read, which the send wakes. bench/forwarding.py prints what they allow.

// threadCPU is the calling thread's CPU time, user and system, to the
// nanosecond (getrusage's counts only move with the scheduler's tick, coarser
// than a chunk of datagrams takes).
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func loopbackPair(tb testing.TB) (from, to *socket) {
	var err error
	if from, err = openSocket(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		tb.Fatal(err)
	}
	if to, err = openSocket(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = from.close(); _ = to.close() })
	return from, to
}

// fullDatagram is what a video packet from an SFU weighs: MTU-full.
var fullDatagram = make([]byte, mtu+16)

// sides are the CPUs of the generator and of the SFU: two the process may
// run on, or its one twice (CPU 0 where the kernel will not say: pinning
// there then fails with the reason).
func sides() (generator, sfu int) {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return 0, 0
	}
	var cpus []int
	for cpu := 0; cpu < 1024 && len(cpus) < 2; cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus[len(cpus)-1], cpus[0]
}

// pin runs the calling goroutine on its own thread on cpu alone, until the
// returned function undoes it.
func pin(cpu int) (func(), error) {
	runtime.LockOSThread()
	var was, set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return func() {
		_ = unix.SchedSetaffinity(0, &was)
		runtime.UnlockOSThread()
	}, nil
}

// onSFUSide runs each call sent to the returned channel on the SFU's CPU, in
// turn, and answers on done; closing the channel ends it.
func onSFUSide(b *testing.B, cpu int) (calls chan func() error, done chan error) {
	calls, done = make(chan func() error), make(chan error)
	go func() {
		unpin, err := pin(cpu)
		if err == nil {
			defer unpin()
		}
		for call := range calls {
			if err != nil {
				done <- err
				continue
			}
			done <- call()
		}
	}()
	b.Cleanup(func() { close(calls) })
	return calls, done
}

// acrossCPUs pins the benchmark to the generator's CPU and gives it a pair of
// sockets and the SFU's CPU; unpin undoes the pinning.
func acrossCPUs(b *testing.B) (from, to *socket, sfuCPU int, unpin func()) {
	here, there := sides()
	unpin, err := pin(here)
	if err != nil {
		b.Fatal(err)
	}
	from, to = loopbackPair(b)
	return from, to, there, unpin
}

func BenchmarkKernelFloorReceive(b *testing.B) {
	from, to, there, unpin := acrossCPUs(b)
	defer unpin()
	dest := to.local.AddrPort()
	sfu, done := onSFUSide(b, there)
	batch := newBatch()
	const chunk = 1000 // what the socket's buffer holds with room to spare
	var spent time.Duration
	received := 0
	for received < b.N {
		n := min(chunk, b.N-received)
		sfu <- func() error {
			for range n {
				if _, err := from.sendTo(fullDatagram, dest); err != nil {
					return err
				}
			}
			return nil
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		began := threadCPU()
		for {
			n, err := batch.read(to)
			if err != nil {
				b.Fatal(err)
			}
			for i := range n {
				_ = arrival(batch.control[i][:batch.hdrs[i].Hdr.Controllen])
			}
			received += n
			if n == 0 {
				break
			}
		}
		spent += threadCPU() - began
	}
	b.ReportMetric(float64(spent.Nanoseconds())/float64(received)/1000, "cpu-µs/datagram")
}

// BenchmarkKernelFloorSend sends to a socket whose reader, on the SFU's CPU,
// drains it between chunks: no send has a reader to wake.
func BenchmarkKernelFloorSend(b *testing.B) {
	from, to, there, unpin := acrossCPUs(b)
	defer unpin()
	dest := to.local.AddrPort()
	sfu, done := onSFUSide(b, there)
	drain := func() error {
		batch := newBatch()
		for n := 1; n > 0; {
			var err error
			if n, err = batch.read(to); err != nil {
				return err
			}
		}
		return nil
	}
	var spent time.Duration
	for sent := 0; sent < b.N; {
		began := threadCPU()
		for range min(1000, b.N-sent) {
			if _, err := from.sendTo(fullDatagram, dest); err != nil {
				b.Fatal(err)
			}
			sent++
		}
		spent += threadCPU() - began
		sfu <- drain // untimed, so no send meets a full buffer
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N)/1000, "cpu-µs/datagram")
}

// BenchmarkKernelFloorWakingSend sends to a socket whose reader sleeps in a
// blocking read on the SFU's CPU, as an idle SFU's does: each send also
// wakes it. Each send is timed alone, the clock's own reading taken off.
func BenchmarkKernelFloorWakingSend(b *testing.B) {
	from, to, there, unpin := acrossCPUs(b)
	defer unpin()
	dest := to.local.AddrPort()
	var fd int
	to.use(func(d int) { fd = d })
	// The reader's reads give up now and then, so that it ends with the benchmark.
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000}); err != nil {
		b.Fatal(err)
	}
	took := make(chan error, 1)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		unpin, err := pin(there)
		if err != nil {
			took <- err
			return
		}
		defer unpin()
		buf := make([]byte, receiveMTU)
		for {
			_, _, err := unix.Recvfrom(fd, buf, 0)
			select {
			case <-stop:
				return
			default:
			}
			if err == nil {
				took <- nil
			} else if err != unix.EAGAIN && err != unix.EINTR {
				took <- err
				return
			}
		}
	}()
	defer func() { close(stop); <-stopped }() // before the socket closes
	const readings = 100
	clock := threadCPU()
	for range readings - 1 {
		threadCPU()
	}
	clock = (threadCPU() - clock) / readings
	var spent time.Duration
	for range b.N {
		// Untimed: the reader goes back to its read and sleeps (a sleep of
		// this thread's own could take milliseconds).
		for wait := time.Now(); time.Since(wait) < 30*time.Microsecond; {
		}
		began := threadCPU()
		if _, err := from.sendTo(fullDatagram, dest); err != nil {
			b.Fatal(err)
		}
		spent += threadCPU() - began - clock
		if err := <-took; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N)/1000, "cpu-µs/datagram")
}
