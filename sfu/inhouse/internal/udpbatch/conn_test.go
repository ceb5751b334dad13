//go:build linux

package udpbatch

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

func pair(t testing.TB) (a, b *Conn) {
	t.Helper()
	var err error
	if a, err = Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if b, err = Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func addrOf(c *Conn) netip.AddrPort {
	return c.uc.LocalAddr().(interface{ AddrPort() netip.AddrPort }).AddrPort()
}

func TestHeldWritesLeaveInOneCallInOrder(t *testing.T) {
	a, b := pair(t)
	dst := addrOf(b)
	const n = 40
	a.Hold()
	for i := 0; i < n; i++ {
		msg := make([]byte, 100+i)
		binary.BigEndian.PutUint32(msg, uint32(i))
		if _, err := a.WriteToAddrPort(msg, dst); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.Stats.SendCalls.Load(); got != 0 {
		t.Fatalf("held writes were sent early: %d calls", got)
	}
	a.Release()
	if calls, sent := a.Stats.SendCalls.Load(), a.Stats.SentPackets.Load(); calls != 1 || sent != n {
		t.Fatalf("calls=%d sent=%d, want 1 call with %d datagrams", calls, sent, n)
	}
	buf := make([]byte, 1500)
	_ = b.SetReadDeadline(time.Now().Add(2 * time.Second))
	for i := 0; i < n; i++ {
		k, from, err := b.ReadFromAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		if from != addrOf(a) {
			t.Fatalf("source %v, want %v", from, addrOf(a))
		}
		if k != 100+i || binary.BigEndian.Uint32(buf) != uint32(i) {
			t.Fatalf("datagram %d: len %d seq %d", i, k, binary.BigEndian.Uint32(buf))
		}
	}
	if b.Stats.RecvCalls.Load() >= n {
		t.Fatalf("reads were not batched: %d calls for %d datagrams", b.Stats.RecvCalls.Load(), n)
	}
}

func TestOverflowingTheQueueFlushes(t *testing.T) {
	a, b := pair(t)
	dst := addrOf(b)
	a.Hold()
	for i := 0; i < 3*sendBatch; i++ {
		if _, err := a.WriteToAddrPort([]byte{byte(i)}, dst); err != nil {
			t.Fatal(err)
		}
	}
	if calls, sent := a.Stats.SendCalls.Load(), a.Stats.SentPackets.Load(); calls != 3 || sent != 3*sendBatch {
		t.Fatalf("calls=%d sent=%d while held, want each full batch sent", calls, sent)
	}
	a.Release()
	buf := make([]byte, 16)
	_ = b.SetReadDeadline(time.Now().Add(2 * time.Second))
	for i := 0; i < 3*sendBatch; i++ {
		if _, _, err := b.ReadFromAddrPort(buf); err != nil {
			t.Fatal(err)
		}
		if buf[0] != byte(i) {
			t.Fatalf("datagram %d arrived as %d", i, buf[0])
		}
	}
}

func TestUnheldWriteIsSentAtOnce(t *testing.T) {
	a, b := pair(t)
	if _, err := a.WriteTo([]byte("hi"), b.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	_ = b.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, from, err := b.ReadFrom(buf)
	if err != nil || !bytes.Equal(buf[:n], []byte("hi")) || from.String() != a.LocalAddr().String() {
		t.Fatalf("got %q from %v, err %v", buf[:n], from, err)
	}
}

func TestSteadyStateDoesNotAllocate(t *testing.T) {
	a, b := pair(t)
	dst := addrOf(b)
	msg := make([]byte, 1200)
	buf := make([]byte, 1500)
	allocs := testing.AllocsPerRun(200, func() {
		a.Hold()
		for i := 0; i < 8; i++ {
			_, _ = a.WriteToAddrPort(msg, dst)
		}
		a.Release()
		for i := 0; i < 8; i++ {
			_, _, _ = b.ReadFromAddrPort(buf)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per fan-out of 8", allocs)
	}
}

func TestCloseUnblocksReader(t *testing.T) {
	a, _ := pair(t)
	done := make(chan error, 1)
	go func() {
		_, _, err := a.ReadFromAddrPort(make([]byte, 10))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	a.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("read after close returned no error")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("reader still blocked after Close")
	}
	if _, err := a.WriteToAddrPort([]byte("x"), netip.MustParseAddrPort("127.0.0.1:9")); err == nil {
		t.Fatal("write after close succeeded")
	}
}

// drainedPair is a sender and a receiver whose datagrams are read and
// dropped, so the benchmarks measure the send side alone.
func drainedPair(b *testing.B) (*Conn, netip.AddrPort, []byte) {
	a, r := pair(b)
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := r.ReadFromAddrPort(buf); err != nil {
				return
			}
		}
	}()
	msg := make([]byte, 1100)
	b.ReportAllocs()
	b.SetBytes(int64(6 * len(msg)))
	return a, addrOf(r), msg
}

func BenchmarkFanoutWrite(b *testing.B) {
	a, dst, msg := drainedPair(b)
	for b.Loop() {
		a.Hold()
		for i := 0; i < 6; i++ {
			_, _ = a.WriteToAddrPort(msg, dst)
		}
		a.Release()
	}
}

// BenchmarkFanoutWriteUnbatched is the baseline: one sendto per datagram.
func BenchmarkFanoutWriteUnbatched(b *testing.B) {
	a, dst, msg := drainedPair(b)
	for b.Loop() {
		for i := 0; i < 6; i++ {
			_, _ = a.uc.WriteToUDPAddrPort(msg, dst)
		}
	}
}
