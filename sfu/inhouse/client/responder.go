package client

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
)

// responder answers NACKs with the packets asked for, of the last
// sentHistory a stream sent, as pion's responder does, on the stream's RTX
// stream where one was negotiated. pion's takes a copy of every packet sent
// into pooled buffers and a cloned header, an allocation each, which was a
// twentieth of a synthetic publisher's CPU; here a packet is marshalled into
// a slot of a ring that lives as long as its stream. RTX sequence numbers
// count retransmissions, as a browser's do (pion's count every packet).
type responder struct {
	interceptor.NoOp
	mu      sync.Mutex
	streams map[uint32]*sentStream
}

// sentHistory is how many of a stream's packets can be resent: pion's
// responder's default.
const sentHistory = 1024

type sentStream struct {
	w       interceptor.RTPWriter
	rtxSSRC uint32
	rtxPT   uint8

	mu    sync.Mutex // the slots': the sender's writes do not wait for resends
	slots [sentHistory]sentSlot

	resending sync.Mutex // resends take turns: what follows is theirs
	packet    sentSlot   // a copy of the slot being resent
	rtx       []byte     // a retransmission's payload
	rtxSeq    uint16
}

type sentSlot struct {
	seq uint16
	n   int // bytes of buf: the marshalled header, then the payload; 0 empty
	buf [keptSize]byte
}

// keptSize bounds a packet the responder keeps; a larger one is sent and not
// kept, as pion's responder refuses it.
const keptSize = 1500

type responderFactory struct{}

func (responderFactory) NewInterceptor(string) (interceptor.Interceptor, error) {
	return &responder{streams: map[uint32]*sentStream{}}, nil
}

// BindLocalStream keeps what a stream whose receiver asks for losses sends.
func (r *responder) BindLocalStream(info *interceptor.StreamInfo, w interceptor.RTPWriter) interceptor.RTPWriter {
	if !asksForLosses(info.RTCPFeedback) {
		return w
	}
	s := &sentStream{w: w, rtxSSRC: info.SSRCRetransmission, rtxPT: info.PayloadTypeRetransmission,
		rtxSeq: uint16(rand.Uint32())}
	r.mu.Lock()
	r.streams[info.SSRC] = s
	r.mu.Unlock()
	return interceptor.RTPWriterFunc(func(h *rtp.Header, payload []byte, a interceptor.Attributes) (int, error) {
		if h.SSRC == info.SSRC {
			s.keep(h, payload)
		}
		return w.Write(h, payload, a)
	})
}

func (r *responder) UnbindLocalStream(info *interceptor.StreamInfo) {
	r.mu.Lock()
	delete(r.streams, info.SSRC)
	r.mu.Unlock()
}

// BindRTCPReader resends what each NACK read asks for, as pion's responder,
// in a goroutine of its own: the reader goes on.
func (r *responder) BindRTCPReader(reader interceptor.RTCPReader) interceptor.RTCPReader {
	return nackReader(reader, func(nack *rtcp.TransportLayerNack) {
		r.mu.Lock()
		s := r.streams[nack.MediaSSRC]
		r.mu.Unlock()
		if s != nil && len(nack.Nacks) > 0 {
			go s.resend(nack.Nacks)
		}
	})
}

// keep marshals the packet into its slot.
func (s *sentStream) keep(h *rtp.Header, payload []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot := &s.slots[h.SequenceNumber%sentHistory]
	slot.n = 0
	n, err := h.MarshalTo(slot.buf[:])
	if err != nil || n+len(payload) > len(slot.buf) {
		return
	}
	slot.seq, slot.n = h.SequenceNumber, n+copy(slot.buf[n:], payload)
}

// resend writes the kept packets the pairs ask for.
func (s *sentStream) resend(pairs []rtcp.NackPair) {
	s.resending.Lock()
	defer s.resending.Unlock()
	for _, pair := range pairs {
		pair.Range(func(seq uint16) bool {
			if s.copyOut(seq) {
				s.write()
			}
			return true
		})
	}
}

// copyOut copies packet seq into s.packet, if it is kept.
func (s *sentStream) copyOut(seq uint16) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot := &s.slots[seq%sentHistory]
	if slot.n == 0 || slot.seq != seq {
		return false
	}
	s.packet.seq, s.packet.n = seq, copy(s.packet.buf[:], slot.buf[:slot.n])
	return true
}

// write sends s.packet again, as RTX when negotiated (RFC 4588: the
// original sequence number leads the payload; padding is left out).
func (s *sentStream) write() {
	var h rtp.Header
	off, err := h.Unmarshal(s.packet.buf[:s.packet.n])
	if err != nil {
		return
	}
	payload := s.packet.buf[off:s.packet.n]
	if s.rtxSSRC == 0 || s.rtxPT == 0 {
		_, _ = s.w.Write(&h, payload, interceptor.Attributes{})
		return
	}
	if h.Padding && len(payload) > 0 {
		payload = payload[:max(0, len(payload)-int(payload[len(payload)-1]))]
	}
	s.rtx = binary.BigEndian.AppendUint16(s.rtx[:0], h.SequenceNumber)
	s.rtx = append(s.rtx, payload...)
	h.SSRC, h.PayloadType, h.SequenceNumber = s.rtxSSRC, s.rtxPT, s.rtxSeq
	h.Padding, h.PaddingSize = false, 0
	s.rtxSeq++
	_, _ = s.w.Write(&h, s.rtx, interceptor.Attributes{})
}
