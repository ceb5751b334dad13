// Package directrtp sends a connection's RTP past pion's lower layers. Through
// pion, each packet passed the SRTP session (a lock and a stream lookup), the
// DTLS/SRTP demultiplexer, the ICE connection and the socket's wrapper before
// it reached the socket: more CPU than its encryption. Once the connection is
// up, a Writer encrypts its RTP with a context of its own and writes it to the
// socket for the selected candidate's address. It is the innermost
// interceptor, so those above it (sender reports, the NACK responder) still
// see every packet; RTCP, and RTP before Start, take pion's path. The in-house
// SFU writes what it forwards with it, the synthetic participants what they
// publish.
package directrtp

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/srtpkeys"
)

// Conn is where the encrypted packets go.
type Conn interface {
	WriteToAddrPort(b []byte, addr netip.AddrPort) (int, error)
}

// Factory makes one Writer per PeerConnection. pion builds a connection's
// interceptors inside NewPeerConnection, with nothing that says for which
// connection (the id it passes is a clock reading, which two connections made
// at once can share), so connections are made one at a time through
// NewPeerConnection and each takes the writer made during its construction.
type Factory struct {
	// Sent, if set, counts the packets every writer sent.
	Sent *atomic.Uint64

	mu   sync.Mutex // held across a NewPeerConnection
	made *Writer
}

func (f *Factory) NewInterceptor(string) (interceptor.Interceptor, error) {
	f.made = &Writer{sent: f.Sent, rollovers: map[uint32]*rollover{}}
	return f.made, nil
}

// NewPeerConnection makes a PeerConnection with api, whose interceptor
// registry holds f first (innermost), and returns the writer it holds.
func (f *Factory) NewPeerConnection(api *webrtc.API, cfg webrtc.Configuration) (*webrtc.PeerConnection, *Writer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.made = nil
	pc, err := api.NewPeerConnection(cfg)
	if err != nil {
		return nil, nil, err
	}
	if f.made == nil {
		_ = pc.Close()
		return nil, nil, errors.New("directrtp: the writer was not built for the connection")
	}
	return pc, f.made, nil
}

// Writer is one connection's outgoing RTP.
type Writer struct {
	interceptor.NoOp
	sent *atomic.Uint64
	on   atomic.Bool // Start has run

	mu        sync.Mutex // guards what follows: a context is not safe for concurrent use
	conn      Conn
	ctx       srtpkeys.RTP
	to        netip.AddrPort
	rollovers map[uint32]*rollover // until Start: each stream's sequence as pion's context counted it
	plain     []byte
	out       []byte
}

// rollover follows a stream's sequence numbers as an SRTP sender does: how
// many times they wrapped (its rollover counter).
type rollover struct {
	last  uint16
	count uint32
}

func (r *rollover) see(seq uint16) {
	if int16(seq-r.last) > 0 {
		if seq < r.last {
			r.count++
		}
		r.last = seq
	}
}

// Start writes the connection's RTP, encrypted with ctx (this side's own
// context for the connection), to `to` through conn from now on. It runs
// once: a second context would restart the streams' rollover counters. The
// streams pion's context sent go on with the rollover counters it reached.
func (w *Writer) Start(conn Conn, ctx srtpkeys.RTP, to netip.AddrPort) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.on.Load() {
		return
	}
	for ssrc, r := range w.rollovers {
		ctx.SetROC(ssrc, r.count)
	}
	w.rollovers = nil
	w.conn, w.ctx, w.to = conn, ctx, to
	w.on.Store(true)
}

// Started says whether Start has run.
func (w *Writer) Started() bool { return w.on.Load() }

// Redirect sends to another address (ICE selected another pair).
func (w *Writer) Redirect(to netip.AddrPort) {
	w.mu.Lock()
	w.to = to
	w.mu.Unlock()
}

func (w *Writer) BindLocalStream(_ *interceptor.StreamInfo, next interceptor.RTPWriter) interceptor.RTPWriter {
	return interceptor.RTPWriterFunc(func(h *rtp.Header, payload []byte, a interceptor.Attributes) (int, error) {
		if w.on.Load() {
			return w.write(h, payload)
		}
		w.mu.Lock()
		if w.on.Load() { // started meanwhile
			w.mu.Unlock()
			return w.write(h, payload)
		}
		defer w.mu.Unlock()
		n, err := next.Write(h, payload, a)
		if n > 0 { // pion's context encrypted it (before its keys, pion drops what it is given)
			if r := w.rollovers[h.SSRC]; r != nil {
				r.see(h.SequenceNumber)
			} else {
				w.rollovers[h.SSRC] = &rollover{last: h.SequenceNumber}
			}
		}
		return n, err
	})
}

func (w *Writer) write(h *rtp.Header, payload []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := h.MarshalSize()
	if need := n + len(payload); cap(w.plain) < need {
		w.plain = make([]byte, need)
	}
	plain := w.plain[:n+len(payload)]
	if _, err := h.MarshalTo(plain); err != nil {
		return 0, err
	}
	copy(plain[n:], payload)
	out, err := w.ctx.EncryptRTP(w.out[:0], plain, h, n)
	if err != nil {
		return 0, err
	}
	w.out = out // grown by EncryptRTP if it had to
	if _, err := w.conn.WriteToAddrPort(out, w.to); err != nil {
		return 0, err
	}
	if w.sent != nil {
		w.sent.Add(1)
	}
	return len(out), nil
}

// SelectedAddrs are the local and remote addresses of a connection's
// selected candidate pair.
func SelectedAddrs(p *webrtc.ICECandidatePair) (local, remote netip.AddrPort, err error) {
	if p == nil || p.Remote == nil || p.Local == nil {
		return local, remote, errors.New("directrtp: no selected candidate pair")
	}
	if local, err = addrPort(p.Local); err != nil {
		return local, remote, err
	}
	remote, err = addrPort(p.Remote)
	return local, remote, err
}

func addrPort(c *webrtc.ICECandidate) (netip.AddrPort, error) {
	a, err := netip.ParseAddr(c.Address)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(a.Unmap(), c.Port), nil
}
