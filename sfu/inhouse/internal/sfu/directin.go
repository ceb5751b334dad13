package sfu

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/interceptor/pkg/twcc"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/client"
	"sfubench/sfu/inhouse/internal/rtpfwd"
	"sfubench/sfu/inhouse/internal/udpbatch"
	"sfubench/sfu/inhouse/recvfb"
	"sfubench/sfu/inhouse/srtpkeys"
)

// The direct read path. Through pion, a packet a publisher sent crossed the
// UDP mux, the ICE connection, the DTLS/SRTP demultiplexer, the SRTP session
// and the track's buffer, three goroutines and four copies, before the
// forwarding loop read it: a quarter of the SFU's CPU at 70 participants
// (`make bench`). Once a publisher's connection is up, the socket's reader
// takes its media itself: decrypted with a context of the SFU's own into a
// forwarding buffer and fanned out in the reading goroutine, which is then
// where forwarding runs (one core's worth per socket, as a mediasoup worker).
// What pion's receive interceptors did is done for both paths: NACKs and
// receiver reports as theirs (recvfb), fed by each published track
// (source.forward), transport-wide congestion feedback recorded from every
// RTP header, which SRTP leaves in the clear. Retransmissions (RTX) are
// taken too: pion's track hands them out only beside a packet of the
// stream, which no longer comes its way. STUN, DTLS, RTCP and a new
// stream's first packets (which tell pion the track) reach pion as before.

// twccInterval is how often transport-wide feedback goes out, as pion's
// sender interceptor sends it.
const twccInterval = 100 * time.Millisecond

// directReader is the shared socket as pion's mux reads it, less the media
// of the connections attached.
type directReader struct {
	*udpbatch.Conn
	taken *atomic.Uint64 // packets the direct path took

	mu    sync.RWMutex
	peers map[netip.AddrPort]*directIn
}

func newDirectReader(c *udpbatch.Conn, taken *atomic.Uint64) *directReader {
	return &directReader{Conn: c, taken: taken, peers: map[netip.AddrPort]*directIn{}}
}

// ReadFromAddrPort returns the next datagram the direct path does not take.
func (r *directReader) ReadFromAddrPort(b []byte) (int, netip.AddrPort, error) {
	for {
		n, from, err := r.Conn.ReadFromAddrPort(b)
		if err != nil || n < 12 || b[0]&0xc0 != 0x80 {
			return n, from, err // STUN, DTLS
		}
		if pt := b[1] & 0x7f; pt >= 64 && pt <= 95 {
			return n, from, err // RTCP
		}
		if !r.take(b[:n], from) {
			return n, from, err
		}
		r.taken.Add(1)
	}
}

// take forwards b if the connection it came from is attached and b is media
// of a published track. It holds the lock throughout: once attach has
// detached a connection, none of its packets is being forwarded.
func (r *directReader) take(b []byte, from netip.AddrPort) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	in := r.peers[from]
	return in != nil && in.take(b, time.Now())
}

// attach sends what addr sends to in from now on; the zero address detaches.
func (r *directReader) attach(in *directIn, addr netip.AddrPort) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.peers[in.addr] == in {
		delete(r.peers, in.addr)
	}
	in.addr = addr
	if addr.IsValid() {
		r.peers[addr] = in
	}
}

// directIn is one connection's received media: the feedback on every
// published track (from its creation, whichever path a packet takes) and,
// once started, the direct path's decryption.
type directIn struct {
	pc       *webrtc.PeerConnection
	feedback *recvfb.Streams
	sending  sync.Once     // the feedback's, from the first track on
	stop     chan struct{} // ends it

	streams atomic.Pointer[map[uint32]*inStream] // replaced whole when a track is added
	twccExt atomic.Uint32                        // the transport-wide sequence's header extension, 0 unknown

	addr netip.AddrPort // where the connection's media comes from (the reader's lock)

	// the reader's alone, from start on
	ctx      srtpkeys.RTP
	hdr      rtp.Header
	twcc     *twcc.Recorder
	began    time.Time
	nextTWCC time.Time
}

type inStream struct {
	src *source
	// rtx: the track's retransmissions (RFC 4588), as the packets they
	// repeat: this payload type and SSRC
	rtx       bool
	pt        uint8
	ssrc      uint32
	decrypted bool // a packet of it has been: its rollover counter is known
}

// newDirectIn makes the feedback on pc's published tracks.
func newDirectIn(pc *webrtc.PeerConnection) *directIn {
	in := &directIn{pc: pc, feedback: recvfb.New(time.Now()), stop: make(chan struct{})}
	in.streams.Store(&map[uint32]*inStream{})
	return in
}

// sendFeedback sends the NACKs and receiver reports as they fall due.
func (in *directIn) sendFeedback() {
	tick := time.NewTicker(recvfb.NACKInterval)
	defer tick.Stop()
	for {
		select {
		case <-in.stop:
			return
		case now := <-tick.C:
			in.feedback.Send(now, in.pc.WriteRTCP)
		}
	}
}

// numberedBy notes the extension recv's parameters name for the
// transport-wide sequence, if they do.
func (in *directIn) numberedBy(recv *webrtc.RTPReceiver) {
	for _, e := range recv.GetParameters().HeaderExtensions {
		if e.URI == sdp.TransportCCURI {
			in.twccExt.Store(uint32(e.ID))
		}
	}
}

// add makes src's feedback and, once started, its packets the direct path's.
func (in *directIn) add(src *source, recv *webrtc.RTPReceiver) {
	in.numberedBy(recv)
	codec, ssrc := src.remote.Codec(), uint32(src.remote.SSRC())
	src.feedback = in.feedback.Add(ssrc, codec.ClockRate, client.AsksForLosses(codec))
	in.sending.Do(func() { go in.sendFeedback() })
	old := in.streams.Load()
	streams := make(map[uint32]*inStream, len(*old)+1)
	for k, v := range *old {
		streams[k] = v
	}
	streams[ssrc] = &inStream{src: src}
	if rtx := uint32(src.remote.RtxSSRC()); rtx != 0 {
		// pion's path would hold them until the track's next packet, which
		// the direct path takes
		streams[rtx] = &inStream{src: src, rtx: true, pt: uint8(codec.PayloadType), ssrc: ssrc}
	}
	in.streams.Store(&streams)
}

// readRTCP dates the receiver reports by the sender reports in b, an RTCP
// packet the publisher sent.
func (in *directIn) readRTCP(b []byte, now time.Time) {
	pkts, err := rtcp.Unmarshal(b)
	if err != nil {
		return
	}
	for _, p := range pkts {
		if sr, ok := p.(*rtcp.SenderReport); ok {
			in.feedback.SenderReport(sr, now)
		}
	}
}

// start takes the connection's media from `from` on, decrypted with remote
// (its own context: pion's keeps the rollover counters of what pion reads).
func (in *directIn) start(r *directReader, remote srtpkeys.RTP, from netip.AddrPort) {
	in.ctx, in.twcc, in.began = remote, twcc.NewRecorder(rand.Uint32()), time.Now()
	// From the negotiation, not the first track: the packets before it
	// (Chrome's first bandwidth probes among them) are numbered too.
	for _, t := range in.pc.GetTransceivers() {
		if r := t.Receiver(); r != nil {
			in.numberedBy(r)
		}
	}
	r.attach(in, from)
}

// take forwards b, an SRTP packet of the connection, if it is a published
// track's; false leaves it to pion.
func (in *directIn) take(b []byte, now time.Time) bool {
	h := &in.hdr
	headerLen, err := h.Unmarshal(b)
	if err != nil {
		return false
	}
	in.recordTWCC(h, now)
	s := (*in.streams.Load())[h.SSRC]
	if s == nil {
		return false
	}
	p := rtpfwd.NewPacket()
	out, err := in.ctx.DecryptRTP(p.Buf()[:0], b, h, headerLen)
	if err != nil && !s.decrypted {
		// The stream's first packets went through pion; this context takes
		// the first it sees for rollover 0. Had the sequence wrapped in
		// between (it starts anywhere), every packet would fail; pion's share
		// is a few packets, so the rollover is 0 or 1.
		in.ctx.SetROC(h.SSRC, 1)
		if out, err = in.ctx.DecryptRTP(p.Buf()[:0], b, h, headerLen); err != nil {
			in.ctx.SetROC(h.SSRC, 0)
		}
	}
	if err != nil || len(out) > len(p.Buf()) {
		p.Release()
		return true // not authentic (or larger than any forwarded): dropped, as pion's session drops it
	}
	s.decrypted = true
	n := len(out)
	if s.rtx {
		if n = client.UnwrapRTX(out, headerLen, s.pt, s.ssrc); n == 0 {
			p.Release()
			return true
		}
	}
	s.src.forward(p, n, now)
	return true
}

func (in *directIn) recordTWCC(h *rtp.Header, now time.Time) {
	ext := uint8(in.twccExt.Load())
	if ext == 0 {
		return
	}
	if seq := h.GetExtension(ext); len(seq) >= 2 {
		in.twcc.Record(h.SSRC, uint16(seq[0])<<8|uint16(seq[1]), now.Sub(in.began).Microseconds())
	}
	if now.Before(in.nextTWCC) {
		return
	}
	in.nextTWCC = now.Add(twccInterval)
	if pkts := in.twcc.BuildFeedbackPacket(); len(pkts) > 0 {
		_ = in.pc.WriteRTCP(pkts)
	}
}

// close stops the feedback; the reader lets go of the connection.
func (in *directIn) close(r *directReader) {
	r.attach(in, netip.AddrPort{})
	close(in.stop)
}
