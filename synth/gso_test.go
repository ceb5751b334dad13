package main

import (
	"bytes"
	"testing"
	"time"
)

// received is every datagram the socket holds now, in order.
func received(t *testing.T, s *socket) [][]byte {
	t.Helper()
	b := newBatch()
	var out [][]byte
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		n, err := b.read(s)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			out = append(out, append([]byte(nil), b.bufs[i][:b.hdrs[i].Len]...))
		}
		if n == 0 && len(out) > 0 {
			return out
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return out
}

func filled(size int, fill byte) []byte { return bytes.Repeat([]byte{fill}, size) }

// A held socket's frame reaches the receiver as the datagrams it was
// written as, in order, whatever breaks its runs: a shorter datagram, one of
// another size after it, another address.
func TestAHeldSocketSendsTheDatagramsItWasGivenInOrder(t *testing.T) {
	from, to := loopbackPair(t)
	_, other := loopbackPair(t)
	dest, elsewhere := to.local.AddrPort(), other.local.AddrPort()
	sent := [][]byte{filled(1216, 1), filled(1216, 2), filled(1216, 3), filled(700, 4), // one run
		filled(90, 5), filled(1216, 6), filled(1216, 7)} // a run broken by a shorter datagram
	from.hold()
	for i, d := range sent {
		if n, err := from.sendTo(d, dest); err != nil || n != len(d) {
			t.Fatalf("datagram %d: %d, %v", i, n, err)
		}
		if i == 1 { // another address breaks the run, and is sent in its turn
			if _, err := from.sendTo(filled(1216, 9), elsewhere); err != nil {
				t.Fatal(err)
			}
		}
	}
	if from.run.count == 0 || from.run.refused.Load() {
		t.Fatalf("the socket sent its last run (%d datagrams kept) or GSO was refused", from.run.count)
	}
	from.release()
	got := received(t, to)
	if len(got) != len(sent) {
		t.Fatalf("received %d datagrams, sent %d", len(got), len(sent))
	}
	for i := range sent {
		if !bytes.Equal(got[i], sent[i]) {
			t.Fatalf("datagram %d: %d bytes of %d, sent %d of %d", i, len(got[i]), got[i][0], len(sent[i]), sent[i][0])
		}
	}
	if o := received(t, other); len(o) != 1 || !bytes.Equal(o[0], filled(1216, 9)) {
		t.Fatalf("the other address received %d datagrams", len(o))
	}
	if _, err := from.sendTo(filled(10, 1), dest); err != nil || from.run.count != 0 {
		t.Fatalf("a released socket kept a datagram: %v, %d kept", err, from.run.count)
	}
}

// A run goes as one message: the kernel hands the receiver its datagrams
// together, stamped at one instant.
func TestAHeldRunArrivesAsOneDelivery(t *testing.T) {
	from, to := loopbackPair(t)
	from.hold()
	for i := range 4 {
		_, _ = from.sendTo(filled(1216, byte(i)), to.local.AddrPort())
	}
	from.release()
	b := newBatch()
	time.Sleep(10 * time.Millisecond)
	n, err := b.read(to)
	if err != nil || n != 4 {
		t.Fatalf("read %d datagrams (%v), want the run's 4", n, err)
	}
	first := arrival(b.control[0][:b.hdrs[0].Hdr.Controllen])
	for i := 1; i < n; i++ {
		if at := arrival(b.control[i][:b.hdrs[i].Hdr.Controllen]); !at.Equal(first) {
			t.Fatalf("datagram %d arrived %v after the first: not one delivery", i, at.Sub(first))
		}
	}
}
