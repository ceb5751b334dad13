package main

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// port is one interface, read and written whole frames at a time.
type port struct {
	name string
	fd   int
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func openPort(name string) (*port, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, fmt.Errorf("a packet socket (needs CAP_NET_RAW): %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("binding to %s: %w", name, err)
	}
	// The frames this process writes out of the interface are not read back
	// (half of all reads otherwise); read() still tells them apart where a
	// kernel reads them all the same.
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	// A second of a busy link: bursts wait here, not in drops.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20)
	return &port{name, fd}, nil
}

// read returns a frame that arrived on the interface, or n < 0 for one that
// left it (which this process wrote).
func (p *port) read(buf []byte) (int, error) {
	for {
		n, from, err := unix.Recvfrom(p.fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			return -1, nil
		}
		return n, nil
	}
}

func (p *port) write(frame []byte) error {
	for {
		_, err := unix.Write(p.fd, frame)
		if err == unix.EINTR {
			continue
		}
		return err
	}
}
