package main

import (
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Each pacer reads its share of the fast sockets every pollEvery, each with
// system calls of up to pollBatch datagrams. A participant's socket takes
// some 700 datagrams a second, one at a time when read as they come: a system
// call each, which was most of the generator's CPU. Read in batches, they
// keep the arrival time the kernel stamped on each (SO_TIMESTAMPNS): jitter,
// delay and congestion feedback see when a packet came, not when it was
// read, and a NACK waits a poll at most.
const (
	pollEvery = int64(10 * time.Millisecond)
	pollBatch = 64
)

// reader is one pacer's sockets and where its rounds of reading them stand.
type reader struct {
	mu        sync.Mutex
	conns     []*fastConn // added from any goroutine
	round     []*fastConn // still to read in the round under way
	rounds    int
	nextRound int64 // CLOCK_MONOTONIC ns
	batch     *batch
}

func newReader() reader { return reader{batch: newBatch(), nextRound: monotonic()} }

// addSocket gives a fast socket to a pacer to read.
func addSocket(c *fastConn) {
	r := &anyPacer().reads
	r.mu.Lock()
	r.conns = append(r.conns, c)
	r.mu.Unlock()
}

// step reads one socket of the round under way, starting a round if one is
// due; false when there is nothing to read yet.
func (r *reader) step(now int64) bool {
	if len(r.round) == 0 {
		if now < r.nextRound {
			return false
		}
		// Behind: no catching up in a burst.
		r.nextRound = max(r.nextRound+pollEvery, now)
		r.rounds++
		if r.round = r.live(); len(r.round) == 0 {
			return false
		}
	}
	c := r.round[0]
	r.round = r.round[1:]
	r.batch.drain(c)
	if rx := c.rx.Load(); rx != nil && r.rounds%int(twccInterval/time.Duration(pollEvery)) == 0 {
		rx.sendTWCC()
	}
	return true
}

// starved says reads have waited a whole round for the sends: the pacer
// reads before it sends again, or an overloaded pacer would never read.
func (r *reader) starved(now int64) bool { return now > r.nextRound+pollEvery }

// live is the sockets to read, the closed ones let go.
func (r *reader) live() []*fastConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.conns[:0]
	for _, c := range r.conns {
		select {
		case <-c.done:
		default:
			kept = append(kept, c)
		}
	}
	clear(r.conns[len(kept):])
	r.conns = kept
	return append([]*fastConn(nil), kept...)
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

// read is one recvmmsg that never waits: 0 when nothing is there (the
// poller comes back) or the socket is closed.
func (b *batch) read(s *socket) (int, error) {
	for i := range b.hdrs {
		b.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
		b.hdrs[i].Hdr.SetControllen(len(b.control[i]))
	}
	var n uintptr
	var errno unix.Errno
	s.use(func(fd int) {
		n, _, errno = unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&b.hdrs[0])),
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
