package main

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A frame leaves in one system call. While a publisher holds its
// participant's sends (the frame's packets, in every layer), what the
// participant's sockets write is queued; on release it leaves in one
// sendmmsg, each run of equal-sized datagrams to one address (a frame's
// packets are cut to the same size but for the last) as one UDP GSO
// message. A datagram sent alone cost the generator a route lookup, a pass
// through the device and, on this machine, the SFU's side of the kernel too
// (the receive is done in the sender's system call) and a wake-up of the
// SFU's reader; a run pays them once. The SFU's socket gets the same
// datagrams, back to back, as from a browser's pacer sending a burst.

// runSegments and runBytes keep a GSO message within what every kernel
// with UDP GSO takes.
const (
	runSegments = 64
	runBytes    = 60000
)

// gsoRefused is set once the kernel refuses a GSO message (a device without
// checksum offload on the route, as an emulated link's veths are): from
// then on every datagram is sent as it is written.
var gsoRefused atomic.Bool

// heldSends is a participant's queue of held writes.
type heldSends struct {
	mu     sync.Mutex
	holds  int
	queued []queuedSend
	data   []byte
	msgs   []unix.Mmsghdr
	iovs   []unix.Iovec
	names  []unix.RawSockaddrInet4
	ctrl   []byte
}

type queuedSend struct {
	conn   *fastConn
	to     netip.AddrPort
	off, n int
}

func (h *heldSends) hold() {
	h.mu.Lock()
	h.holds++
	h.mu.Unlock()
}

// queue keeps b for the release, if sends are held.
func (h *heldSends) queue(c *fastConn, b []byte, to netip.AddrPort) bool {
	if gsoRefused.Load() || !to.Addr().Unmap().Is4() {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holds == 0 {
		return false
	}
	h.queued = append(h.queued, queuedSend{conn: c, to: to, off: len(h.data), n: len(b)})
	h.data = append(h.data, b...)
	return true
}

// release ends a hold; the last sends what was queued. Like any send of a
// fast socket it never waits: what the kernel does not take is dropped.
func (h *heldSends) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holds--; h.holds > 0 {
		return
	}
	for q := h.queued; len(q) > 0; {
		same := 1 // the writes to one socket: one sendmmsg
		for same < len(q) && q[same].conn == q[0].conn {
			same++
		}
		h.send(q[:same])
		q = q[same:]
	}
	h.queued, h.data = h.queued[:0], h.data[:0]
}

// send sends q, writes to one socket, as messages of runs.
func (h *heldSends) send(q []queuedSend) {
	h.messages(q)
	sock := q[0].conn.sock
	for sent := 0; sent < len(h.msgs); {
		var n uintptr
		var errno unix.Errno
		if !sock.use(func(fd int) {
			n, _, errno = unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&h.msgs[sent])),
				uintptr(len(h.msgs)-sent), unix.MSG_DONTWAIT, 0, 0)
		}) {
			return
		}
		if errno == 0 {
			sent += int(n)
			continue
		}
		if h.msgs[sent].Hdr.Iovlen > 1 && (errno == unix.EIO || errno == unix.EINVAL || errno == unix.EOPNOTSUPP) {
			gsoRefused.Store(true)
			h.unbundle(q, sent)
			return
		}
		sent++ // refused or no room: dropped, as a full queue on the way would
	}
}

// messages lays q out as h.msgs: each run of datagrams to one address, of
// one size but for a shorter last one, a message.
func (h *heldSends) messages(q []queuedSend) {
	h.msgs, h.iovs, h.names, h.ctrl = h.msgs[:0], h.iovs[:0], h.names[:0], h.ctrl[:0]
	ctrlSize := unix.CmsgSpace(2)
	for i := 0; i < len(q); {
		run, bytes := 1, q[i].n
		for i+run < len(q) && run < runSegments && q[i+run].to == q[i].to && q[i+run-1].n == q[i].n &&
			q[i+run].n <= q[i].n && bytes+q[i+run].n <= runBytes {
			bytes += q[i+run].n
			run++
		}
		for _, d := range q[i : i+run] {
			var iov unix.Iovec
			iov.Base = &h.data[d.off]
			iov.SetLen(d.n)
			h.iovs = append(h.iovs, iov)
		}
		h.names = append(h.names, sockaddr(q[i].to))
		var m unix.Mmsghdr
		m.Hdr.SetIovlen(run)
		if run > 1 {
			h.ctrl = append(h.ctrl, make([]byte, ctrlSize)...)
			c := h.ctrl[len(h.ctrl)-ctrlSize:]
			cm := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
			cm.Level, cm.Type = unix.SOL_UDP, unix.UDP_SEGMENT
			cm.SetLen(unix.CmsgLen(2))
			*(*uint16)(unsafe.Pointer(&c[unix.CmsgLen(0)])) = uint16(q[i].n)
			m.Hdr.SetControllen(ctrlSize)
		}
		h.msgs = append(h.msgs, m)
		i += run
	}
	// pointers last: the slices above may have moved while they grew
	iov, ctrl := 0, 0
	for m := range h.msgs {
		hdr := &h.msgs[m].Hdr
		hdr.Name, hdr.Namelen = (*byte)(unsafe.Pointer(&h.names[m])), unix.SizeofSockaddrInet4
		hdr.Iov = &h.iovs[iov]
		iov += int(hdr.Iovlen)
		if hdr.Controllen > 0 {
			hdr.Control = &h.ctrl[ctrl]
			ctrl += ctrlSize
		}
	}
}

// unbundle sends the datagrams of messages from.. one at a time.
func (h *heldSends) unbundle(q []queuedSend, from int) {
	first := 0
	for _, m := range h.msgs[:from] {
		first += int(m.Hdr.Iovlen)
	}
	for _, d := range q[first:] {
		_, _ = d.conn.sock.sendTo(h.data[d.off:d.off+d.n], d.to)
	}
}

// sockaddr is an IPv4 address as the kernel takes it.
func sockaddr(a netip.AddrPort) unix.RawSockaddrInet4 {
	sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.Addr().Unmap().As4()}
	port := (*[2]byte)(unsafe.Pointer(&sa.Port))
	port[0], port[1] = byte(a.Port()>>8), byte(a.Port())
	return sa
}
