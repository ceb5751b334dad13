package main

import (
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/transport/v4"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/client"
	"sfubench/sfu/inhouse/directrtp"
)

// The fast path: received media without pion's pipeline. pion still does
// what a connection needs once (ICE, DTLS, the signalling's offers and
// answers) and what is rare (RTCP, retransmissions, the first packets of a
// new stream, which tell it the track); the media the SFU forwards, most of
// what a synthetic participant handles, goes from one batched read of its
// socket through SRTP to the stream's counters in the reading goroutine.
// Through pion each packet crossed three goroutines and three buffers.
//
// The feedback a browser sends is kept: the NACKs and receiver reports of
// pion's interceptors (recvfb, fed here without their chain), and
// transport-wide congestion feedback recorded from every RTP packet's header
// (which SRTP leaves in the clear) before it is told apart.

// pathEnv set to "pion" leaves every packet to pion's own pipeline, as before
// the fast path (to compare the two: make bench).
const pathEnv = "SFUBENCH_SYNTH_PATH"

const (
	receiveMTU   = 1500
	twccInterval = 100 * time.Millisecond // as pion's TWCC sender interceptor
	toPionQueue  = 256
)

// newPeerConnection makes one of a member's connections; its sockets are
// read, and its published media written, by the fast path unless the
// environment says otherwise.
func (g *generator) newPeerConnection(conns *fastConns) (*webrtc.PeerConnection, error) {
	o := g.apiOptions
	if os.Getenv(pathEnv) == "pion" {
		api, err := client.NewAPI(o)
		if err != nil {
			return nil, err
		}
		return api.NewPeerConnection(webrtc.Configuration{})
	}
	peer := &fastPeer{}
	direct := &directrtp.Factory{}
	sender := &client.SenderFactory{}
	o.OwnFeedback, o.Sender = true, sender
	o.WrapNet = func(n transport.Net) transport.Net { return fastNet{n, conns, peer} }
	o.First = append(o.First[:len(o.First):len(o.First)], direct) // innermost: what every other interceptor sent
	api, err := client.NewAPI(o)
	if err != nil {
		return nil, err
	}
	pc, w, err := direct.NewPeerConnection(api, webrtc.Configuration{})
	if err != nil {
		return nil, err
	}
	peer.writer.Store(w)
	peer.pc.Store(pc)
	conns.addSender(sender.Made())
	return pc, nil
}

// fastPeer is what a connection's sockets share: the connection, once made,
// and the writer of its published media.
type fastPeer struct {
	pc     atomic.Pointer[webrtc.PeerConnection]
	writer atomic.Pointer[directrtp.Writer]
}

// fastNet opens each UDP socket ICE asks for, for the connection of `peer`,
// as a fastConn of `conns`.
type fastNet struct {
	transport.Net
	conns *fastConns
	peer  *fastPeer
}

func (n fastNet) ListenUDP(network string, laddr *net.UDPAddr) (transport.UDPConn, error) {
	if network == "udp6" || laddr == nil || laddr.IP.To4() == nil {
		return n.Net.ListenUDP(network, laddr) // pion reads it all
	}
	s, err := openSocket(laddr)
	if err != nil {
		return nil, err
	}
	c := &fastConn{sock: s, owner: n.conns, peer: n.peer, toPion: make(chan datagram, toPionQueue),
		done: make(chan struct{})}
	polling.add(c)
	return c, nil
}

// fastConns are one participant's sockets and the streams it receives, which
// any of its connections (a publishing and a subscribing one) may carry, and
// the send sides of those connections.
type fastConns struct {
	mu      sync.Mutex
	streams map[uint32]*registration
	gen     atomic.Uint64 // counts registrations: a reader whose count is behind looks again
	senders []*client.Sender
}

type registration struct {
	in      *inbound // nil: read for the feedback only (an SFU's probing stream)
	codec   webrtc.RTPCodecParameters
	repairs uint32 // an RTX stream's: the SSRC of the stream it repairs
}

func newFastConns() *fastConns { return &fastConns{streams: map[uint32]*registration{}} }

// register hands a track's packets to the fast path from now on, and its
// retransmissions where the SFU declared their stream: pion's track would
// hand those out only beside a packet of the track, which no longer comes
// its way.
func (f *fastConns) register(t *webrtc.TrackRemote, in *inbound) {
	ssrc := uint32(t.SSRC())
	f.mu.Lock()
	f.streams[ssrc] = &registration{in: in, codec: t.Codec()}
	if rtx := uint32(t.RtxSSRC()); rtx != 0 {
		f.streams[rtx] = &registration{codec: t.Codec(), repairs: ssrc}
	}
	f.mu.Unlock()
	f.gen.Add(1)
}

func (f *fastConns) addSender(s *client.Sender) {
	if s == nil {
		return
	}
	f.mu.Lock()
	f.senders = append(f.senders, s)
	f.mu.Unlock()
}

// sentStream is the stream ssrc that one of the participant's connections
// sends, once pion has bound it; nil before, or on pion's own path.
func (f *fastConns) sentStream(ssrc uint32) *client.SentStream {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.senders {
		if st := s.Stream(ssrc); st != nil {
			return st
		}
	}
	return nil
}

func (f *fastConns) lookup(ssrc uint32) *registration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.streams[ssrc]
}

type datagram struct {
	b    []byte
	from netip.AddrPort
}

// fastConn is one socket: the poller drains it, keeps the media it can
// decrypt and queues the rest for pion, whose reads it serves.
type fastConn struct {
	sock   *socket
	owner  *fastConns
	toPion chan datagram
	done   chan struct{}
	once   sync.Once
	err    atomic.Pointer[error]

	deadline    atomic.Pointer[time.Time]
	peer        *fastPeer // whose keys, feedback and writer
	rx          atomic.Pointer[receiver]
	checked     time.Time  // when the poller last looked for the DTLS keys to read with
	sendChecked time.Time  // and to write with
	sending     bool       // the connection's writer has started: no more to look for
	hdr         rtp.Header // the poller's, reused: a packet's header
}

// take handles one datagram the poller read.
func (c *fastConn) take(b []byte, from netip.AddrPort, at time.Time) {
	if c.media(b, at) {
		return
	}
	select {
	case c.toPion <- datagram{append([]byte(nil), b...), from}:
	default: // pion is behind: dropped, as by a full socket buffer
	}
}

func (c *fastConn) fail(err error) {
	c.err.Store(&err)
	_ = c.Close()
}

// media takes an SRTP packet of a registered stream once the keys are
// known; false leaves the datagram to pion.
func (c *fastConn) media(b []byte, now time.Time) bool {
	if len(b) < 12 || b[0]&0xc0 != 0x80 {
		return false // STUN, DTLS
	}
	if pt := b[1] & 0x7f; pt >= 64 && pt <= 95 {
		return false // RTCP
	}
	rx := c.rx.Load()
	if rx == nil {
		if rx = c.activate(now); rx == nil {
			return false
		}
	}
	h := &c.hdr
	headerLen, err := h.Unmarshal(b)
	if err != nil {
		return false
	}
	rx.noteArrival(h, len(b), now)
	return rx.deliver(b, h, headerLen, now)
}

// activate makes the receiver once the connection's DTLS handshake has
// given SRTP its keys; it looks at most every 50 ms (the poller's alone).
func (c *fastConn) activate(now time.Time) *receiver {
	if now.Sub(c.checked) < 50*time.Millisecond {
		return nil
	}
	c.checked = now
	pc := c.peer.pc.Load()
	if pc == nil {
		return nil
	}
	dt := pc.SCTP().Transport()
	if dt == nil || dt.State() != webrtc.DTLSTransportStateConnected {
		return nil
	}
	rx, err := newReceiver(c, pc, dt)
	if err != nil {
		return nil
	}
	c.rx.Store(rx)
	return rx
}
