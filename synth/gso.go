package main

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A video frame's packets leave a participant back to back, all but the last
// as full as the MTU allows: each send cost the generator a system call and,
// on the lab's veth links, the SFU's side of the delivery too (its IP and UDP
// receive and the wake-up of its reading thread, in the sender's context).
// Held while the frame is written, they go as one message the kernel cuts
// into those same datagrams (UDP GSO, Linux 4.18): what reaches the SFU, and
// when, is what it was, at one delivery's cost on the way. What a held socket
// is given meanwhile by other writers (RTCP, retransmissions) goes in order,
// as runs of its own.

// gsoMaxSegments and gsoMaxBytes keep a message within what every kernel with
// UDP GSO takes (64 segments before Linux 5.5; one IP packet's length).
const (
	gsoMaxSegments = 64
	gsoMaxBytes    = 60000
)

// held is a socket's run of datagrams, to one address, of one size but for a
// shorter last one, kept until the run breaks or the socket is released.
type held struct {
	mu      sync.Mutex
	on      atomic.Bool
	to      netip.AddrPort
	data    []byte
	size    int // the run's segment size: its first datagram's length
	last    int // its last datagram's length
	count   int
	refused atomic.Bool // the kernel refused a GSO message: each datagram alone from then on
	control []byte
}

// hold keeps what is sent until release.
func (s *socket) hold() { s.run.on.Store(true) }

// release sends the run held and stops holding.
func (s *socket) release() {
	r := &s.run
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on.Store(false)
	s.flush()
}

// keep adds b for to to the run; false when the socket is not held (the
// caller sends b itself).
func (s *socket) keep(b []byte, to netip.AddrPort) bool {
	r := &s.run
	if !r.on.Load() || r.refused.Load() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.on.Load() {
		return false
	}
	if r.count > 0 && !r.fits(len(b), to) {
		s.flush()
	}
	if r.count == 0 {
		r.to, r.size = to, len(b)
	}
	r.data = append(r.data, b...)
	r.last = len(b)
	r.count++
	return true
}

func (r *held) fits(length int, to netip.AddrPort) bool {
	return to == r.to && r.last == r.size && length <= r.size && r.count < gsoMaxSegments &&
		len(r.data)+length <= gsoMaxBytes
}

// flush sends the run (run.mu held): one datagram as it is, more as one GSO
// message, or each alone where the kernel refuses that.
func (s *socket) flush() {
	r := &s.run
	defer func() { r.data, r.count = r.data[:0], 0 }()
	switch {
	case r.count == 0:
		return
	case r.count == 1:
		_, _ = s.send(r.data, r.to, nil)
		return
	}
	if r.control == nil {
		r.control = make([]byte, unix.CmsgSpace(2))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&r.control[0]))
		h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
		h.SetLen(unix.CmsgLen(2))
	}
	*(*uint16)(unsafe.Pointer(&r.control[unix.CmsgLen(0)])) = uint16(r.size)
	_, err := s.send(r.data, r.to, r.control)
	if errno, ok := err.(unix.Errno); ok && gsoRefused(errno) {
		r.refused.Store(true)
		for off := 0; off < len(r.data); off += r.size {
			_, _ = s.send(r.data[off:min(off+r.size, len(r.data))], r.to, nil)
		}
	}
}

// gsoRefused says whether a send failed for being a GSO message: a device
// without checksum offload on an older kernel (EIO), a kernel that takes
// fewer segments (EINVAL), or none with UDP GSO.
func gsoRefused(errno unix.Errno) bool {
	return errno == unix.EIO || errno == unix.EINVAL || errno == unix.ENOPROTOOPT || errno == unix.EOPNOTSUPP
}
