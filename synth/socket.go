package main

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A fast connection's socket is one the Go runtime does not know. A
// net.UDPConn is registered with the runtime's epoll, and every datagram that
// reached it woke the thread the scheduler had parked there, although no
// goroutine waits on the socket (the poller reads it on its own schedule):
// thousands of wake-ups a second, a quarter of the generator's CPU. This
// socket blocks on no read (the poller reads with MSG_DONTWAIT), and its
// sends are plain system calls.

// receiveBuffer is what a fast socket's kernel buffer holds. A socket read
// every 10 ms (later when the clients' core is busy) has to keep what an SFU
// sends meanwhile, bursts included (an SFU throttled for a CFS period sends
// what it held back at once). Linux's default of 208 KiB holds some 80
// full-size datagrams: reads 40 ms apart overflowed it at 42 participants of
// Janus. A browser reads each datagram as it comes and needs less.
const receiveBuffer = 4 << 20

// socket is one bound IPv4 UDP socket; its file descriptor stays valid for
// every call that holds mu for reading, and close takes it for writing.
type socket struct {
	mu    sync.RWMutex
	fd    int // -1 once closed
	local *net.UDPAddr
}

// openSocket binds a UDP socket to laddr (an IPv4 address) with kernel
// arrival timestamps (SO_TIMESTAMPNS) on every datagram.
func openSocket(laddr *net.UDPAddr) (*socket, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	sa := &unix.SockaddrInet4{Port: laddr.Port, Addr: [4]byte(laddr.IP.To4())}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, &net.OpError{Op: "listen", Net: "udp4", Addr: laddr, Err: os.NewSyscallError("bind", err)}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("setsockopt", err)
	}
	// Beyond net.core.rmem_max needs CAP_NET_ADMIN (the lab runs as root);
	// without it, as much as rmem_max allows.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, receiveBuffer) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, receiveBuffer)
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("getsockname", err)
	}
	in4 := bound.(*unix.SockaddrInet4)
	return &socket{fd: fd, local: &net.UDPAddr{IP: net.IP(in4.Addr[:]), Port: in4.Port}}, nil
}

// use runs f with the descriptor; false once the socket is closed.
func (s *socket) use(f func(fd int)) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.fd < 0 {
		return false
	}
	f(s.fd)
	return true
}

var errNotIPv4 = errors.New("sfubench-synth: a fast socket sends to IPv4 addresses only")

func (s *socket) sendTo(b []byte, to netip.AddrPort) (int, error) {
	ip := to.Addr().Unmap()
	if !ip.Is4() {
		return 0, errNotIPv4
	}
	sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ip.As4()}
	port := (*[2]byte)(unsafe.Pointer(&sa.Port))
	port[0], port[1] = byte(to.Port()>>8), byte(to.Port())
	var n uintptr
	var errno unix.Errno
	// A send never waits (MSG_DONTWAIT: a full buffer drops the datagram,
	// as a full queue on the way would), so it is a raw system call: the
	// runtime never hands the pacer's P away mid-frame for it to win back.
	if !s.use(func(fd int) {
		n, _, errno = unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))),
			uintptr(len(b)), unix.MSG_DONTWAIT, uintptr(unsafe.Pointer(&sa)), unix.SizeofSockaddrInet4)
	}) {
		return 0, net.ErrClosed
	}
	if errno != 0 {
		return 0, &net.OpError{Op: "write", Net: "udp4", Addr: net.UDPAddrFromAddrPort(to), Err: os.NewSyscallError("sendto", errno)}
	}
	return int(n), nil
}

func (s *socket) setInt(opt, v int) error {
	var err error
	if !s.use(func(fd int) { err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, v) }) {
		return net.ErrClosed
	}
	return err
}

func (s *socket) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return net.ErrClosed
	}
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}

// What pion asks of a UDP connection (transport.UDPConn): reads are served
// from the datagrams the fast path leaves to pion, writes go to the socket.

func (c *fastConn) LocalAddr() net.Addr  { return c.sock.local }
func (c *fastConn) RemoteAddr() net.Addr { return nil }

func (c *fastConn) ReadFromAddrPort(b []byte) (int, netip.AddrPort, error) {
	var timeout <-chan time.Time
	if d := c.deadline.Load(); d != nil && !d.IsZero() {
		t := time.NewTimer(time.Until(*d))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case d := <-c.toPion:
		return copy(b, d.b), d.from, nil
	case <-c.done:
		if e := c.err.Load(); e != nil {
			return 0, netip.AddrPort{}, *e
		}
		return 0, netip.AddrPort{}, net.ErrClosed
	case <-timeout:
		return 0, netip.AddrPort{}, os.ErrDeadlineExceeded
	}
}

func (c *fastConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, from, err := c.ReadFromAddrPort(b)
	return n, net.UDPAddrFromAddrPort(from), err
}

func (c *fastConn) ReadFromUDP(b []byte) (int, *net.UDPAddr, error) {
	n, from, err := c.ReadFromAddrPort(b)
	return n, net.UDPAddrFromAddrPort(from), err
}

func (c *fastConn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	return c.ReadFromAddrPort(b)
}

func (c *fastConn) Read(b []byte) (int, error) {
	n, _, err := c.ReadFromAddrPort(b)
	return n, err
}

func (c *fastConn) ReadMsgUDP(b, _ []byte) (int, int, int, *net.UDPAddr, error) {
	n, from, err := c.ReadFromUDP(b)
	return n, 0, 0, from, err
}

func (c *fastConn) WriteToAddrPort(b []byte, to netip.AddrPort) (int, error) {
	return c.sock.sendTo(b, to)
}

func (c *fastConn) WriteTo(b []byte, to net.Addr) (int, error) {
	u, ok := to.(*net.UDPAddr)
	if !ok {
		return 0, &net.OpError{Op: "write", Net: "udp4", Addr: to, Err: unix.EINVAL}
	}
	return c.WriteToUDP(b, u)
}

func (c *fastConn) WriteToUDP(b []byte, to *net.UDPAddr) (int, error) {
	return c.sock.sendTo(b, to.AddrPort())
}

func (c *fastConn) WriteMsgUDP(b, _ []byte, to *net.UDPAddr) (int, int, error) {
	n, err := c.WriteToUDP(b, to)
	return n, 0, err
}

func (c *fastConn) Write([]byte) (int, error) {
	return 0, &net.OpError{Op: "write", Net: "udp4", Err: unix.EDESTADDRREQ}
}

func (c *fastConn) SetReadDeadline(t time.Time) error {
	c.deadline.Store(&t)
	return nil
}

// Sends never wait long (a datagram socket's buffer drains at the link's
// speed): there is no write deadline to keep.
func (c *fastConn) SetWriteDeadline(time.Time) error { return nil }
func (c *fastConn) SetDeadline(t time.Time) error    { return c.SetReadDeadline(t) }

func (c *fastConn) SetReadBuffer(n int) error  { return c.sock.setInt(unix.SO_RCVBUF, n) }
func (c *fastConn) SetWriteBuffer(n int) error { return c.sock.setInt(unix.SO_SNDBUF, n) }

func (c *fastConn) Close() error {
	var err error
	c.once.Do(func() {
		close(c.done)
		err = c.sock.close()
	})
	return err
}
