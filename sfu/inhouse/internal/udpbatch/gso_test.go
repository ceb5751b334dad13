//go:build linux

package udpbatch

import (
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sendRuns queues, held, runs of datagrams to b and c interleaved: to each,
// ten of 1000 bytes and a last one of 300, each numbered; then releases.
func sendRuns(t *testing.T, a, b, c *Conn) {
	t.Helper()
	a.Hold()
	for i := range 11 {
		size := 1000
		if i == 10 {
			size = 300
		}
		for _, to := range []*Conn{b, c} {
			msg := make([]byte, size)
			binary.BigEndian.PutUint32(msg, uint32(i))
			if _, err := a.WriteToAddrPort(msg, addrOf(to)); err != nil {
				t.Fatal(err)
			}
		}
	}
	a.Release()
}

// expectRuns reads what sendRuns sent to r: every datagram, whole, in order.
func expectRuns(t *testing.T, r *Conn) {
	t.Helper()
	buf := make([]byte, 2000)
	_ = r.SetReadDeadline(time.Now().Add(2 * time.Second))
	for i := range 11 {
		n, _, err := r.ReadFromAddrPort(buf)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		want := 1000
		if i == 10 {
			want = 300
		}
		if n != want || binary.BigEndian.Uint32(buf) != uint32(i) {
			t.Fatalf("datagram %d: %d bytes numbered %d, want %d bytes", i, n, binary.BigEndian.Uint32(buf), want)
		}
	}
}

func TestRunsToOneAddressLeaveAsOneMessageEach(t *testing.T) {
	a, b := pair(t)
	_, c := pair(t)
	sendRuns(t, a, b, c)
	if a.plan.n != 2 || a.Stats.SendCalls.Load() != 1 || a.Stats.SentPackets.Load() != 22 {
		t.Fatalf("%d messages in %d calls for %d datagrams, want 2 GSO messages in 1 call for 22",
			a.plan.n, a.Stats.SendCalls.Load(), a.Stats.SentPackets.Load())
	}
	expectRuns(t, b)
	expectRuns(t, c)
}

func TestRefusedGSOFallsBackToOneDatagramPerMessage(t *testing.T) {
	a, b := pair(t)
	_, c := pair(t)
	// a socket with UDP checksums off refuses GSO messages (EINVAL), as a
	// route through a device without checksum offload does on older
	// kernels (EIO)
	if err := a.rc.Control(func(fd uintptr) {
		if err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_NO_CHECK, 1); err != nil {
			t.Fatal(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	sendRuns(t, a, b, c)
	if !a.noGSO.Load() || a.Stats.SendErrors.Load() != 0 || a.Stats.SentPackets.Load() != 22 {
		t.Fatalf("noGSO %v, %d errors, %d sent: want the refusal taken and all 22 sent",
			a.noGSO.Load(), a.Stats.SendErrors.Load(), a.Stats.SentPackets.Load())
	}
	expectRuns(t, b)
	expectRuns(t, c)
	sendRuns(t, a, b, c)
	if a.plan.n != 22 {
		t.Fatalf("%d messages after the refusal, want one per datagram", a.plan.n)
	}
	expectRuns(t, b)
	expectRuns(t, c)
}

func TestWritesWhileReadingABatchLeaveWhenItIsUsedUp(t *testing.T) {
	a, b := pair(t)
	for i := range 3 {
		if _, err := a.WriteToAddrPort([]byte{byte(i)}, addrOf(b)); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 16)
	_ = b.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, _, err := b.ReadFromAddrPort(buf); err != nil {
		t.Fatal(err)
	}
	if b.rn != 3 {
		t.Fatalf("the three datagrams sent came in %d reads", b.Stats.RecvCalls.Load())
	}
	_, _ = b.WriteToAddrPort([]byte("answer"), addrOf(a))
	for range 2 {
		_, _, _ = b.ReadFromAddrPort(buf)
	}
	if b.Stats.SendCalls.Load() != 0 {
		t.Fatal("a write made while the batch was being read left before the batch was used up")
	}
	_ = b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, _, _ = b.ReadFromAddrPort(buf) // nothing more: the reader waits, having flushed
	if b.Stats.SendCalls.Load() != 1 {
		t.Fatal("the reader waited for more with a write still queued")
	}
	_ = a.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, _, err := a.ReadFromAddrPort(buf); err != nil || string(buf[:n]) != "answer" {
		t.Fatalf("got %q, %v", buf[:n], err)
	}
}
