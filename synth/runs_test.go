package main

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// heldPair is a fast socket whose held sends go to two plain sockets (which
// get every datagram apart, as an SFU's do).
func heldPair(t *testing.T) (*heldSends, *fastConn, [2]*net.UDPConn) {
	t.Helper()
	s, err := openSocket(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	var to [2]*net.UDPConn
	for i := range to {
		if to[i], err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = s.close(); to[0].Close(); to[1].Close(); gsoRefused.Store(false) })
	return &heldSends{}, &fastConn{sock: s}, to
}

// sendFrames queues, held, a frame of three full packets and a short one to
// to[0], then a lone datagram to to[1], each numbered; then releases.
func sendFrames(t *testing.T, h *heldSends, c *fastConn, to [2]*net.UDPConn) {
	t.Helper()
	h.hold()
	for i, size := range []int{1000, 1000, 1000, 400, 200} {
		b := make([]byte, size)
		binary.BigEndian.PutUint32(b, uint32(i))
		dest := to[0]
		if i == 4 {
			dest = to[1]
		}
		if !h.queue(c, b, dest.LocalAddr().(*net.UDPAddr).AddrPort()) {
			t.Fatal("a held send was not queued")
		}
	}
	h.release()
}

func expectFrames(t *testing.T, to [2]*net.UDPConn) {
	t.Helper()
	buf := make([]byte, 2000)
	for i, size := range []int{1000, 1000, 1000, 400, 200} {
		r := to[0]
		if i == 4 {
			r = to[1]
		}
		_ = r.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := r.Read(buf)
		if err != nil || n != size || binary.BigEndian.Uint32(buf) != uint32(i) {
			t.Fatalf("datagram %d: %d bytes numbered %d (%v), want %d bytes", i, n, binary.BigEndian.Uint32(buf), err, size)
		}
	}
}

func TestAHeldFrameLeavesAsOneGSOMessagePerAddress(t *testing.T) {
	h, c, to := heldPair(t)
	sendFrames(t, h, c, to)
	if len(h.msgs) != 2 || h.msgs[0].Hdr.Iovlen != 4 {
		t.Fatalf("%d messages, the first of %d datagrams: want the frame as one, the lone datagram apart",
			len(h.msgs), h.msgs[0].Hdr.Iovlen)
	}
	expectFrames(t, to)
	if h.queue(c, []byte("x"), netip.MustParseAddrPort("127.0.0.1:9")) {
		t.Fatal("a send was queued with no hold on")
	}
}

func TestRefusedGSOSendsEachDatagramAsWritten(t *testing.T) {
	h, c, to := heldPair(t)
	// checksums off: the kernel refuses GSO messages (EINVAL), as a route
	// through a device without checksum offload does (EIO)
	c.sock.use(func(fd int) {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_NO_CHECK, 1); err != nil {
			t.Fatal(err)
		}
	})
	sendFrames(t, h, c, to)
	if !gsoRefused.Load() {
		t.Fatal("the refusal was not noticed")
	}
	expectFrames(t, to)
	h.hold()
	if h.queue(c, []byte("x"), to[0].LocalAddr().(*net.UDPAddr).AddrPort()) {
		t.Fatal("queued after GSO was refused: it would go out held")
	}
	h.release()
}
