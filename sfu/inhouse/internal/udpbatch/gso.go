//go:build linux

package udpbatch

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A flush sends its queued datagrams as sendmmsg messages, and a run of
// datagrams to one address, of one size but for a shorter last one, as one
// message the kernel segments (UDP GSO, Linux 4.18): one route lookup, one
// pass through the firewall's hooks and the device for the run, where each
// datagram took its own. The forwarded copies of a frame to one subscriber
// are such a run: a frame's packets are cut to equal sizes, and each copy
// has the subscriber's header. On the wire, and to the receiving socket
// unless it asks for the run whole (UDP_GRO), they are the same datagrams.

const (
	// maxSegments keeps a message within what every kernel with UDP GSO takes
	// (UDP_MAX_SEGMENTS was 64 before Linux 5.5).
	maxSegments = 64
	// maxGSOBytes keeps a message's payload within one IP packet's length.
	maxGSOBytes = 60000
)

// plan is a flush's messages: msgs[:n], message m carrying the iovecs of
// slots[first[m]:first[m]+count[m]].
type plan struct {
	n     int
	msgs  []unix.Mmsghdr
	iovs  []unix.Iovec
	slots []int
	first []int
	count []int
	size  []int // the message's segment size: its first datagram's length
	last  []int // its last datagram's length
	bytes []int // its payload
	ctrl  [][]byte
	open  map[netip.AddrPort]int // the message a run to the address goes on in
	order []int                  // each slot's message
}

func newPlan(size int) plan {
	p := plan{msgs: make([]unix.Mmsghdr, size), iovs: make([]unix.Iovec, size), slots: make([]int, size),
		first: make([]int, size), count: make([]int, size), size: make([]int, size), last: make([]int, size),
		bytes: make([]int, size), ctrl: make([][]byte, size), open: map[netip.AddrPort]int{},
		order: make([]int, size)}
	for m := range p.ctrl {
		p.ctrl[m] = make([]byte, unix.CmsgSpace(2))
	}
	return p
}

// make lays out b's datagrams as messages, runs to one address together
// when gso is on; each address's datagrams keep their order.
func (p *plan) make(b *batch, gso bool) {
	p.n = 0
	clear(p.open)
	for i := range b.n {
		length := int(b.iovs[i].Len)
		m, ok := p.open[b.addrs[i]]
		if !gso || !ok || !p.fits(m, length) {
			m = p.n
			p.n++
			p.count[m], p.size[m], p.bytes[m] = 0, length, 0
			if gso {
				p.open[b.addrs[i]] = m
			}
		}
		p.count[m]++
		p.last[m] = length
		p.bytes[m] += length
		p.order[i] = m
	}
	p.layout(b)
}

// fits says whether a datagram of length goes on message m's run.
func (p *plan) fits(m, length int) bool {
	return p.count[m] < maxSegments && p.last[m] == p.size[m] && length <= p.size[m] &&
		p.bytes[m]+length <= maxGSOBytes
}

// layout fills the messages the counts describe with b's datagrams.
func (p *plan) layout(b *batch) {
	next := 0
	for m := range p.n {
		p.first[m] = next
		next += p.count[m]
	}
	for i := range b.n {
		m := p.order[i]
		place := p.first[m]
		p.first[m]++
		p.slots[place], p.iovs[place] = i, b.iovs[i]
	}
	for m := range p.n {
		p.first[m] -= p.count[m]
		first := p.slots[p.first[m]]
		h := &p.msgs[m].Hdr
		h.Name, h.Namelen = b.hdrs[first].Hdr.Name, b.hdrs[first].Hdr.Namelen
		h.Iov = &p.iovs[p.first[m]]
		h.SetIovlen(p.count[m])
		h.Control, h.Controllen = nil, 0
		if p.count[m] > 1 {
			c := p.ctrl[m]
			cm := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
			cm.Level, cm.Type = unix.SOL_UDP, unix.UDP_SEGMENT
			cm.SetLen(unix.CmsgLen(2))
			*(*uint16)(unsafe.Pointer(&c[unix.CmsgLen(0)])) = uint16(p.size[m])
			h.Control = &c[0]
			h.SetControllen(len(c))
		}
	}
}

// segments is how many datagrams message m carries.
func (p *plan) segments(m int) int { return p.count[m] }

// datagrams is how many datagrams messages [from, to) carry.
func (p *plan) datagrams(from, to int) int {
	n := 0
	for m := from; m < to; m++ {
		n += p.count[m]
	}
	return n
}

// unbundle makes the datagrams of messages from..n one message each, in
// the same order, in place of those messages.
func (p *plan) unbundle(b *batch, from int) {
	first := p.first[from]
	rest := append([]int(nil), p.slots[first:p.first[p.n-1]+p.count[p.n-1]]...)
	p.n = from
	for k, i := range rest {
		m := p.n
		p.n++
		p.first[m], p.count[m] = first+k, 1
		p.slots[first+k], p.iovs[first+k] = i, b.iovs[i]
		h := &p.msgs[m].Hdr
		h.Name, h.Namelen = b.hdrs[i].Hdr.Name, b.hdrs[i].Hdr.Namelen
		h.Iov = &p.iovs[first+k]
		h.SetIovlen(1)
		h.Control, h.Controllen = nil, 0
	}
}

// gsoRefused says whether a send failed for being a GSO message: the
// route's device lacks checksum offload (EIO, where the kernel does not
// checksum such a message itself; 6.18 does, as on the emulated link's
// veths, offloads off), the socket has checksums off or the kernel takes
// fewer segments (EINVAL), or no UDP GSO at all.
func gsoRefused(errno unix.Errno) bool {
	return errno == unix.EIO || errno == unix.EINVAL || errno == unix.ENOPROTOOPT || errno == unix.EOPNOTSUPP
}
