package main

import (
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel's share of a datagram, the floor under the generator's cost:
// what a fast socket's batched read (with its arrival timestamp) and a send
// cost in CPU time, on loopback, where the sender also pays the delivery into
// the receiver's socket. bench/forwarding.py prints what they allow.

// threadCPU is the calling thread's CPU time, user and system, to the
// nanosecond (getrusage's counts only move with the scheduler's tick, coarser
// than a chunk of datagrams takes).
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func loopbackPair(b *testing.B) (from, to *socket) {
	var err error
	if from, err = openSocket(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		b.Fatal(err)
	}
	if to, err = openSocket(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = from.close(); _ = to.close() })
	return from, to
}

// fullDatagram is what a video packet from an SFU weighs: MTU-full.
var fullDatagram = make([]byte, mtu+16)

func BenchmarkKernelFloorReceive(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	from, to := loopbackPair(b)
	dest := to.local.AddrPort()
	batch := newBatch()
	const chunk = 1000 // what the socket's buffer holds with room to spare
	var spent time.Duration
	received := 0
	for received < b.N {
		for range min(chunk, b.N-received) {
			if _, err := from.sendTo(fullDatagram, dest); err != nil {
				b.Fatal(err)
			}
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

func BenchmarkKernelFloorSend(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	from, to := loopbackPair(b)
	dest := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(to.local.Port))
	batch := newBatch()
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
		for n := 1; n > 0; { // emptied untimed, so no send meets a full buffer
			n, _ = batch.read(to)
		}
	}
	b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N)/1000, "cpu-µs/datagram")
}
