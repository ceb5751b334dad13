//go:build linux

// Package udpbatch moves UDP datagrams in batches with recvmmsg/sendmmsg.
//
// Conn is the one socket every peer's ICE, DTLS, SRTP and SRTCP traffic goes
// through (pion's ICE UDP mux sits on top of it). Writes are queued in
// preallocated slots and leave in one sendmmsg per batch; reads pull up to
// maxBatch datagrams per recvmmsg. Conn implements pion's
// ice.AddrPortReaderWriter so the mux never builds a net.Addr per packet:
// in steady state neither direction allocates.
//
// Batching on the write side is driven by Hold/Release: while any goroutine
// holds the conn, writes only queue; the last Release flushes everything
// queued. The reader holds the conn while it works through a batch it read,
// so what handling those datagrams writes (the forwarded copies of a whole
// frame to every subscriber) leaves together once the batch is used up, in
// one system call, and each subscriber's run of equal-sized datagrams as one
// UDP GSO message (gso.go). Writes made while nobody holds the conn are sent
// at once.
package udpbatch

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// maxBatch bounds the datagrams per read. 64 covers a full fan-out of
	// audio+video to a room of 32 with one call.
	maxBatch = 64
	// sendBatch bounds the datagrams queued for one flush: the copies of a
	// read batch's frames, to every subscriber.
	sendBatch = 4 * maxBatch
	// slotSize holds any datagram pion sends or accepts (its receive MTU is
	// 1460); larger writes bypass the queue.
	slotSize = 2048
)

// Stats are the conn's counters, for the metrics endpoint.
type Stats struct {
	SendCalls, SentPackets, SendErrors atomic.Uint64
	RecvCalls, RecvPackets             atomic.Uint64
}

// Conn is a batching net.PacketConn over one bound UDP socket.
type Conn struct {
	uc    *net.UDPConn
	rc    syscall.RawConn
	v6    bool
	Stats Stats

	holds    atomic.Int32
	readHold bool // the reader holds the conn until its batch is used up (rmu's)

	mu      sync.Mutex // guards pending and closed
	pending *batch
	closed  bool

	// fmu serialises flushes so datagrams leave in the order they were
	// written; the plan being sent and sendOff belong to its holder.
	fmu     sync.Mutex
	spare   *batch
	sendOff int
	sendN   int
	sendErr syscall.Errno
	sendFn  func(fd uintptr) bool
	plan    plan        // the batch being sent, as messages
	noGSO   atomic.Bool // the kernel refused a GSO message: one datagram per message from then on

	// rmu guards the receive side; pion's mux reads from one goroutine.
	rmu     sync.Mutex
	rb      *batch
	rpos    int
	rn      int
	recvErr syscall.Errno
	recvFn  func(fd uintptr) bool
}

// batch is datagrams in slots: those read, or those queued to send (to
// addrs[i], whose sockaddr is names[i]).
type batch struct {
	n     int
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
	addrs []netip.AddrPort
	bufs  [][slotSize]byte
}

func newBatch(size int) *batch {
	b := &batch{hdrs: make([]unix.Mmsghdr, size), iovs: make([]unix.Iovec, size),
		names: make([]unix.RawSockaddrInet6, size), addrs: make([]netip.AddrPort, size),
		bufs: make([][slotSize]byte, size)}
	for i := range b.hdrs {
		b.iovs[i].Base = &b.bufs[i][0]
		b.hdrs[i].Hdr.Iov = &b.iovs[i]
		b.hdrs[i].Hdr.SetIovlen(1)
		b.hdrs[i].Hdr.Name = (*byte)(unsafe.Pointer(&b.names[i]))
	}
	return b
}

// Listen binds a UDP socket on addr ("127.0.1.1:7001").
func Listen(addr string) (*Conn, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	network := "udp4"
	if ua.IP != nil && ua.IP.To4() == nil {
		network = "udp6"
	}
	uc, err := net.ListenUDP(network, ua)
	if err != nil {
		return nil, err
	}
	// Best effort: a burst of fan-out must not overflow the default buffers.
	_ = uc.SetReadBuffer(4 << 20)
	_ = uc.SetWriteBuffer(4 << 20)
	rc, err := uc.SyscallConn()
	if err != nil {
		uc.Close()
		return nil, err
	}
	c := &Conn{uc: uc, rc: rc, v6: network == "udp6", pending: newBatch(sendBatch), spare: newBatch(sendBatch),
		rb: newBatch(maxBatch), plan: newPlan(sendBatch)}
	c.sendFn = c.sendmmsg
	c.recvFn = c.recvmmsg
	return c, nil
}

// DisableGSO sends one datagram per message from now on.
func (c *Conn) DisableGSO() { c.noGSO.Store(true) }

// Hold defers sending until the matching Release.
func (c *Conn) Hold() { c.holds.Add(1) }

// Release ends a Hold; the last one sends everything queued.
func (c *Conn) Release() {
	if c.holds.Add(-1) == 0 {
		c.Flush()
	}
}

// WriteToAddrPort queues b for addr. It reports success once queued: like
// any UDP send, delivery is not confirmed, and a send error only counts.
func (c *Conn) WriteToAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	if len(b) > slotSize {
		return c.uc.WriteToUDPAddrPort(b, addr)
	}
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return 0, net.ErrClosed
		}
		p := c.pending
		if p.n < len(p.hdrs) {
			c.fill(p, b, addr)
			flush := p.n == len(p.hdrs) || c.holds.Load() == 0
			c.mu.Unlock()
			if flush {
				c.Flush()
			}
			return len(b), nil
		}
		c.mu.Unlock()
		c.Flush()
	}
}

func (c *Conn) fill(p *batch, b []byte, addr netip.AddrPort) {
	i := p.n
	copy(p.bufs[i][:], b)
	p.iovs[i].SetLen(len(b))
	p.addrs[i] = addr
	name := &p.names[i]
	if c.v6 {
		*name = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: addr.Addr().As16()}
		putPort(&name.Port, addr.Port())
		p.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
	} else {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(name))
		*sa = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: addr.Addr().Unmap().As4()}
		putPort(&sa.Port, addr.Port())
		p.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
	}
	p.n++
}

// putPort stores port in network byte order into a sockaddr's port field.
func putPort(dst *uint16, port uint16) {
	b := (*[2]byte)(unsafe.Pointer(dst))
	b[0], b[1] = byte(port>>8), byte(port)
}

func getPort(src *uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(src))
	return uint16(b[0])<<8 | uint16(b[1])
}

// Flush sends everything queued.
func (c *Conn) Flush() {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	c.mu.Lock()
	p := c.pending
	if p.n == 0 {
		c.mu.Unlock()
		return
	}
	c.pending, c.spare = c.spare, p
	c.mu.Unlock()

	c.plan.make(p, !c.noGSO.Load())
	c.sendOff = 0
	for c.sendOff < c.plan.n {
		c.sendErr = 0
		if err := c.rc.Write(c.sendFn); err != nil {
			c.Stats.SendErrors.Add(uint64(c.plan.datagrams(c.sendOff, c.plan.n)))
			break
		}
		c.Stats.SendCalls.Add(1)
		c.Stats.SentPackets.Add(uint64(c.plan.datagrams(c.sendOff, c.sendOff+c.sendN)))
		c.sendOff += c.sendN
		if c.sendErr == 0 {
			continue
		}
		if c.plan.segments(c.sendOff) > 1 && gsoRefused(c.sendErr) {
			// The kernel takes no GSO message here (see gsoRefused): the
			// rest go one datagram per message.
			c.noGSO.Store(true)
			c.plan.unbundle(p, c.sendOff)
			continue
		}
		// The message at sendOff was refused (e.g. EPERM from a firewall);
		// the others still go.
		c.Stats.SendErrors.Add(uint64(c.plan.segments(c.sendOff)))
		c.sendOff++
	}
	p.n = 0
}

// sendmmsg and recvmmsg are raw system calls: the socket never blocks (the
// runtime's poller waits for it), and through the runtime's syscall path
// each call woke its monitor thread (sysmon) from its sleep and set
// it polling every 20 µs again: 12 % of the SFU's CPU at 42 synthetic
// participants (perf), 17,000 futex calls a second (now 400).
func (c *Conn) sendmmsg(fd uintptr) bool {
	m := c.plan.msgs[c.sendOff:c.plan.n]
	r, _, errno := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), 0, 0, 0)
	c.sendN = 0
	switch errno {
	case unix.EAGAIN:
		return false
	case unix.EINTR:
	case 0:
		c.sendN = int(r)
	default:
		c.sendErr = errno
	}
	return true
}

func (c *Conn) recvmmsg(fd uintptr) bool {
	p := c.rb
	for i := range p.hdrs {
		p.iovs[i].SetLen(slotSize)
		p.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
	}
	r, _, errno := unix.RawSyscall6(unix.SYS_RECVMMSG, fd,
		uintptr(unsafe.Pointer(&p.hdrs[0])), maxBatch, unix.MSG_WAITFORONE, 0, 0)
	switch errno {
	case unix.EAGAIN:
		return false
	case 0:
		c.rn, c.recvErr = int(r), 0
	default:
		c.rn, c.recvErr = 0, errno
	}
	return true
}

// ReadFromAddrPort returns the next datagram, reading a new batch when the
// previous one is used up.
func (c *Conn) ReadFromAddrPort(b []byte) (int, netip.AddrPort, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for c.rpos >= c.rn {
		if c.readHold {
			// the batch is used up: what handling it wrote leaves before the
			// reader waits for more
			c.readHold = false
			c.Release()
		}
		c.rpos, c.rn = 0, 0
		if err := c.rc.Read(c.recvFn); err != nil {
			return 0, netip.AddrPort{}, err
		}
		switch c.recvErr {
		case 0:
			c.Stats.RecvCalls.Add(1)
			c.Stats.RecvPackets.Add(uint64(c.rn))
		case unix.EINTR, unix.ECONNREFUSED:
			// ECONNREFUSED is a stale ICMP error from an earlier send.
		default:
			return 0, netip.AddrPort{}, c.recvErr
		}
	}
	if !c.readHold {
		c.readHold = true
		c.Hold()
	}
	i := c.rpos
	c.rpos++
	p := c.rb
	// A datagram longer than b is truncated, as a UDP read would do.
	n := copy(b, p.bufs[i][:p.hdrs[i].Len])
	return n, sockaddrToAddrPort(&p.names[i]), nil
}

func sockaddrToAddrPort(name *unix.RawSockaddrInet6) netip.AddrPort {
	if name.Family == unix.AF_INET {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(name))
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), getPort(&sa.Port))
	}
	return netip.AddrPortFrom(netip.AddrFrom16(name.Addr).Unmap(), getPort(&name.Port))
}

// ReadFrom is net.PacketConn's read; pion uses ReadFromAddrPort instead.
func (c *Conn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, ap, err := c.ReadFromAddrPort(b)
	if err != nil {
		return n, nil, err
	}
	return n, net.UDPAddrFromAddrPort(ap), nil
}

// WriteTo is net.PacketConn's write; pion uses WriteToAddrPort instead.
func (c *Conn) WriteTo(b []byte, addr net.Addr) (int, error) {
	ua, ok := addr.(*net.UDPAddr)
	if !ok {
		return 0, errors.New("udpbatch: not a UDP address")
	}
	return c.WriteToAddrPort(b, ua.AddrPort())
}

// Close flushes what is queued and closes the socket.
func (c *Conn) Close() error {
	c.Flush()
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return c.uc.Close()
}

func (c *Conn) LocalAddr() net.Addr                { return c.uc.LocalAddr() }
func (c *Conn) SetDeadline(t time.Time) error      { return c.uc.SetDeadline(t) }
func (c *Conn) SetReadDeadline(t time.Time) error  { return c.uc.SetReadDeadline(t) }
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.uc.SetWriteDeadline(t) }
