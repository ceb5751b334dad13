package sfu

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/srtpkeys"
)

// The direct write path. Through pion, each forwarded packet passed the SRTP
// session (a lock and a stream lookup), the DTLS/SRTP demultiplexer, the ICE
// connection and the UDP mux before it reached the shared socket: more CPU
// than its encryption (profile of 70 participants, `make bench`). Once a
// subscriber's connection is up, its RTP is encrypted here with a context of
// its own and queued on the shared socket for the selected candidate's
// address. The interceptor sits innermost in pion's chain, so the RTCP
// sender reports above it still count every packet; RTCP itself, and RTP
// before the connection is up, take pion's path.

// directFactory makes one directWriter per PeerConnection. pion builds a
// connection's interceptors inside NewPeerConnection, with nothing that says
// for which peer (the id it passes is a clock reading, which two connections
// made at once can share: visitors of the 1000-visit test then got no media),
// so connections are made one at a time through newPC and each takes the
// writer made during its own construction.
type directFactory struct {
	conn addrPortWriter
	sent *atomic.Uint64 // packets every writer sent
	mu   sync.Mutex     // held across a NewPeerConnection
	made *directWriter
}

type addrPortWriter interface {
	WriteToAddrPort(b []byte, addr netip.AddrPort) (int, error)
}

func newDirectFactory(conn addrPortWriter, sent *atomic.Uint64) *directFactory {
	return &directFactory{conn: conn, sent: sent}
}

func (f *directFactory) NewInterceptor(string) (interceptor.Interceptor, error) {
	f.made = &directWriter{conn: f.conn, sent: f.sent}
	return f.made, nil
}

// newPC makes a PeerConnection with api and returns the writer its
// interceptors hold.
func (f *directFactory) newPC(api *webrtc.API, cfg webrtc.Configuration) (*webrtc.PeerConnection, *directWriter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.made = nil
	pc, err := api.NewPeerConnection(cfg)
	if err != nil {
		return nil, nil, err
	}
	if f.made == nil {
		pc.Close()
		return nil, nil, errors.New("sfu: the direct writer was not built for the connection")
	}
	return pc, f.made, nil
}

// directWriter is one subscriber connection's outgoing RTP.
type directWriter struct {
	interceptor.NoOp
	conn addrPortWriter
	sent *atomic.Uint64
	on   atomic.Bool // start has run

	mu    sync.Mutex // guards what follows: the context is not safe for concurrent use
	ctx   *srtp.Context
	to    netip.AddrPort
	plain []byte
	out   []byte
	hdr   rtp.Header // EncryptRTP's scratch
}

// startDirect takes pc's media off pion's paths, both ways (w and in), once
// its connection is up. It runs once: a second context would restart the
// streams' rollover counters.
func (s *Server) startDirect(pc *webrtc.PeerConnection, w *directWriter, in *directIn) error {
	if w.on.Load() {
		return nil
	}
	asClient, err := srtpkeys.LocalIsClient(pc)
	if err != nil {
		return err
	}
	dt := pc.SCTP().Transport()
	local, remote, err := srtpkeys.Contexts(dt, asClient)
	if err != nil {
		return err
	}
	pair, err := dt.ICETransport().GetSelectedCandidatePair()
	if err != nil {
		return err
	}
	to, err := candidateAddr(pair)
	if err != nil {
		return err
	}
	dt.ICETransport().OnSelectedCandidatePairChange(func(p *webrtc.ICECandidatePair) {
		if a, err := candidateAddr(p); err == nil {
			w.mu.Lock()
			w.to = a
			w.mu.Unlock()
			s.reader.attach(in, a)
		}
	})
	w.mu.Lock()
	w.ctx, w.to = local, to
	w.mu.Unlock()
	w.on.Store(true)
	in.start(s.reader, remote, to)
	return nil
}

func (w *directWriter) BindLocalStream(_ *interceptor.StreamInfo, next interceptor.RTPWriter) interceptor.RTPWriter {
	return interceptor.RTPWriterFunc(func(h *rtp.Header, payload []byte, a interceptor.Attributes) (int, error) {
		if !w.on.Load() {
			return next.Write(h, payload, a)
		}
		return w.write(h, payload)
	})
}

func (w *directWriter) write(h *rtp.Header, payload []byte) (int, error) {
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
	out, err := w.ctx.EncryptRTP(w.out[:0], plain, &w.hdr)
	if err != nil {
		return 0, err
	}
	w.out = out // grown by EncryptRTP if it had to
	if _, err := w.conn.WriteToAddrPort(out, w.to); err != nil {
		return 0, err
	}
	w.sent.Add(1)
	return len(out), nil
}

func candidateAddr(p *webrtc.ICECandidatePair) (netip.AddrPort, error) {
	if p == nil || p.Remote == nil {
		return netip.AddrPort{}, errors.New("no selected candidate pair")
	}
	a, err := netip.ParseAddr(p.Remote.Address)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(a.Unmap(), p.Remote.Port), nil
}
