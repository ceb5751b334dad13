package main

import (
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The poller reads every fast socket of the process every pollEvery, each
// with system calls of up to pollBatch datagrams. A participant's socket
// takes some 700 datagrams a second, one at a time when read as they come:
// a system call each, which was most of the generator's CPU. Read in
// batches, they keep the arrival time the kernel stamped on each
// (SO_TIMESTAMPNS): jitter, delay and congestion feedback see when a packet
// came, not when it was read, and a NACK waits a poll at most. The poller is
// not a pacer's work: reading every socket takes milliseconds, which a send
// due meanwhile would wait (tried: pacing p99 over 1 ms from 14 participants
// beside a browser, against 35 with a poller of its own).
const (
	pollEvery = 10 * time.Millisecond
	pollBatch = 64
)

var polling = &poller{}

type poller struct {
	mu      sync.Mutex
	conns   []*fastConn
	started bool
}

func (p *poller) add(c *fastConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
	if !p.started {
		p.started = true
		go p.run()
	}
}

// live is the sockets to read, the closed ones let go.
func (p *poller) live() []*fastConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.conns[:0]
	for _, c := range p.conns {
		select {
		case <-c.done:
		default:
			kept = append(kept, c)
		}
	}
	clear(p.conns[len(kept):])
	p.conns = kept
	return append([]*fastConn(nil), kept...)
}

func (p *poller) run() {
	b := newBatch()
	next := time.Now()
	for round := 1; ; round++ {
		feedback := round%int(twccInterval/pollEvery) == 0
		now := time.Now()
		for _, c := range p.live() {
			b.drain(c)
			if rx := c.rx.Load(); rx != nil {
				rx.sendFeedback(now, feedback)
			}
			c.startSending(now)
		}
		next = next.Add(pollEvery)
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		} else {
			next = time.Now() // behind: no catching up in a burst
		}
	}
}

// batch is the memory of one recvmmsg: datagrams, their senders and their
// kernel timestamps.
type batch struct {
	hdrs    []unix.Mmsghdr
	iovs    []unix.Iovec
	bufs    [][]byte
	names   []unix.RawSockaddrInet4
	control [][]byte
}

func newBatch() *batch {
	b := &batch{hdrs: make([]unix.Mmsghdr, pollBatch), iovs: make([]unix.Iovec, pollBatch),
		bufs: make([][]byte, pollBatch), names: make([]unix.RawSockaddrInet4, pollBatch),
		control: make([][]byte, pollBatch)}
	for i := range pollBatch {
		b.bufs[i] = make([]byte, receiveMTU)
		b.control[i] = make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{}))))
		b.iovs[i].Base = &b.bufs[i][0]
		b.iovs[i].SetLen(receiveMTU)
		h := &b.hdrs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Iov = &b.iovs[i]
		h.Iovlen = 1
		h.Control = &b.control[i][0]
	}
	return b
}

// drain reads what the socket holds, without waiting for more. The
// datagrams are handled outside the socket's lock: handling one may write to
// the socket or close it.
func (b *batch) drain(c *fastConn) {
	for {
		n, err := b.read(c.sock)
		if err != nil {
			c.fail(err)
			return
		}
		for i := range n {
			h := &b.hdrs[i]
			name := &b.names[i]
			port := uint16(name.Port>>8) | uint16(name.Port<<8)
			from := netip.AddrPortFrom(netip.AddrFrom4(name.Addr), port)
			c.take(b.bufs[i][:h.Len], from, arrival(b.control[i][:h.Hdr.Controllen]))
		}
		if n < len(b.hdrs) {
			return
		}
	}
}

// read is one recvmmsg that never waits (hence a raw system call): 0 when
// nothing is there (the poller comes back) or the socket is closed.
func (b *batch) read(s *socket) (int, error) {
	for i := range b.hdrs {
		b.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
		b.hdrs[i].Hdr.SetControllen(len(b.control[i]))
	}
	var n uintptr
	var errno unix.Errno
	s.use(func(fd int) {
		n, _, errno = unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&b.hdrs[0])),
			uintptr(len(b.hdrs)), unix.MSG_DONTWAIT, 0, 0)
	})
	switch errno {
	case 0:
		return int(n), nil
	case unix.EAGAIN, unix.EINTR:
		return 0, nil
	}
	return 0, errno
}

// arrival is the kernel's timestamp of a datagram (its one control
// message), or now without one.
func arrival(control []byte) time.Time {
	const size = int(unsafe.Sizeof(unix.Timespec{}))
	if len(control) >= unix.SizeofCmsghdr+size {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&control[0]))
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && int(h.Len) >= unix.SizeofCmsghdr+size {
			ts := (*unix.Timespec)(unsafe.Pointer(&control[unix.SizeofCmsghdr]))
			return time.Unix(ts.Sec, ts.Nsec)
		}
	}
	return time.Now()
}
