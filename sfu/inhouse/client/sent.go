package client

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
)

// Sender is the send side of a synthetic participant's connection, in one
// interceptor: the sender reports of pion's report interceptor, the NACK
// responder's memory of each stream's latest packets and the resend budget
// of resendLimiter. Three interceptors cost a packet three locks, two clock
// reads and three cold structures of its stream (a packet's stream is out of
// the cache among hundreds); here one of each. A stream can also be written
// past pion's track (SentStream.Write), which cost as much again.
type Sender struct {
	interceptor.NoOp
	now     func() time.Time
	mu      sync.Mutex
	streams map[uint32]*SentStream
	closed  chan struct{}
	wg      sync.WaitGroup
}

// SenderFactory makes the Sender of the one connection its API makes (give
// each connection an API of its own), which Made then returns.
type SenderFactory struct {
	made atomic.Pointer[Sender]
}

func (f *SenderFactory) NewInterceptor(string) (interceptor.Interceptor, error) {
	s := &Sender{now: time.Now, streams: map[uint32]*SentStream{}, closed: make(chan struct{})}
	f.made.Store(s)
	return s, nil
}

// Made is the connection's Sender; nil before the connection is made.
func (f *SenderFactory) Made() *Sender { return f.made.Load() }

// sentHistory is how many of a stream's packets can be resent: pion's
// responder's default.
const sentHistory = 1024

// SentStream is one stream the connection sends.
type SentStream struct {
	// What each packet updates comes first.
	mu      sync.Mutex
	report  sentReport
	history *[sentHistory]sentSlot // nil: its receiver does not ask for losses
	budget  resendBudget

	ssrc, rtxSSRC uint32
	pt, rtxPT     uint8
	clock         float64
	w             interceptor.RTPWriter // inside: the stream's packets and resends go on through it
	now           func() time.Time      // its Sender's clock

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

// sentReport is what a sender report of the stream tells, as pion's report
// interceptor keeps it: the packets and payload bytes sent, and the RTP time
// of the latest frame's first packet with its wall-clock time.
type sentReport struct {
	packets, octets uint32
	lastSeq         uint16
	lastTS          uint32
	lastTSAt        time.Time
}

func (r *sentReport) add(h *rtp.Header, payloadLen int, now time.Time) {
	// in order (or the first): the latest frame's time, taken at its first
	// packet, as a frame of many packets leaves over time
	if d := h.SequenceNumber - r.lastSeq; r.packets == 0 || d > 0 && d < 1<<15 {
		r.lastSeq = h.SequenceNumber
		if h.Timestamp != r.lastTS || r.packets == 0 {
			r.lastTS, r.lastTSAt = h.Timestamp, now
		}
	}
	r.packets++
	r.octets += uint32(payloadLen)
}

// BindLocalStream notes, and keeps for resending, what the stream sends.
func (s *Sender) BindLocalStream(info *interceptor.StreamInfo, w interceptor.RTPWriter) interceptor.RTPWriter {
	st := &SentStream{ssrc: info.SSRC, rtxSSRC: info.SSRCRetransmission, pt: info.PayloadType,
		rtxPT: info.PayloadTypeRetransmission, clock: float64(info.ClockRate), w: w, now: s.now,
		rtxSeq: uint16(rand.Uint32())}
	if asksForLosses(info.RTCPFeedback) {
		st.history = &[sentHistory]sentSlot{}
	}
	s.mu.Lock()
	s.streams[info.SSRC] = st
	s.mu.Unlock()
	return interceptor.RTPWriterFunc(func(h *rtp.Header, payload []byte, a interceptor.Attributes) (int, error) {
		st.sent(h, payload, st.now())
		return w.Write(h, payload, a)
	})
}

func (s *Sender) UnbindLocalStream(info *interceptor.StreamInfo) {
	s.mu.Lock()
	delete(s.streams, info.SSRC)
	s.mu.Unlock()
}

// Stream is the bound stream ssrc, nil for none.
func (s *Sender) Stream(ssrc uint32) *SentStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[ssrc]
}

// BindRTCPReader resends what each NACK read asks for, within the budget, in
// a goroutine of its own: the reader goes on.
func (s *Sender) BindRTCPReader(reader interceptor.RTCPReader) interceptor.RTCPReader {
	return nackReader(reader, func(nack *rtcp.TransportLayerNack) {
		st := s.Stream(nack.MediaSSRC)
		if st == nil || st.history == nil {
			return
		}
		if seqs := st.allowed(nack.Nacks, s.now()); len(seqs) > 0 {
			go st.resend(seqs)
		}
	})
}

// BindRTCPWriter sends each stream's sender report every second, as pion's
// report interceptor.
func (s *Sender) BindRTCPWriter(w interceptor.RTCPWriter) interceptor.RTCPWriter {
	s.wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-s.closed:
				return
			case <-tick.C:
			}
			now := s.now()
			s.mu.Lock()
			reports := make([]rtcp.Packet, 0, len(s.streams))
			for _, st := range s.streams {
				reports = append(reports, st.senderReport(now))
			}
			s.mu.Unlock()
			for _, r := range reports {
				_, _ = w.Write([]rtcp.Packet{r}, interceptor.Attributes{})
			}
		}
	})
	return w
}

func (s *Sender) Close() error {
	s.mu.Lock()
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Write sends a packet of the stream past pion's track, its SSRC and payload
// type set as the track's binding sets them, noted as the interceptor notes
// what passes it. Before the connection can encrypt, the packet is dropped,
// as pion drops what its track is given then.
func (st *SentStream) Write(h *rtp.Header, payload []byte) error {
	h.SSRC, h.PayloadType = st.ssrc, st.pt
	st.sent(h, payload, st.now())
	_, err := st.w.Write(h, payload, nil)
	return err
}

// sent notes a packet of the stream and keeps it for resending.
func (st *SentStream) sent(h *rtp.Header, payload []byte, now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.budget.roll(now)
	st.budget.written[0]++
	st.report.add(h, len(payload), now)
	if st.history == nil {
		return
	}
	slot := &st.history[h.SequenceNumber%sentHistory]
	slot.n = 0
	n, err := h.MarshalTo(slot.buf[:])
	if err != nil || n+len(payload) > len(slot.buf) {
		return
	}
	slot.seq, slot.n = h.SequenceNumber, n+copy(slot.buf[n:], payload)
}

// resent notes a retransmission: the budget counts what the stream writes,
// resends included, and leaves the resends out of the media.
func (st *SentStream) resent(now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.budget.roll(now)
	st.budget.written[0]++
}

// allowed is what the budget lets resend of the packets the pairs ask for.
func (st *SentStream) allowed(pairs []rtcp.NackPair, now time.Time) []uint16 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.budget.allow(pairs, now)
}

func (st *SentStream) senderReport(now time.Time) *rtcp.SenderReport {
	st.mu.Lock()
	defer st.mu.Unlock()
	r := &st.report
	return &rtcp.SenderReport{SSRC: st.ssrc, NTPTime: ntpTime(now),
		RTPTime:     r.lastTS + uint32(now.Sub(r.lastTSAt).Seconds()*st.clock),
		PacketCount: r.packets, OctetCount: r.octets}
}

// ntpTime is t as a 64-bit NTP timestamp (RFC 5905: seconds since 1900 and
// their fraction).
func ntpTime(t time.Time) uint64 {
	const ntpEpochOffset = 2208988800
	secs := uint64(t.Unix() + ntpEpochOffset)
	frac := uint64(t.Nanosecond()) << 32 / 1e9
	return secs<<32 | frac
}

// resend writes the kept packets numbered seqs.
func (st *SentStream) resend(seqs []uint16) {
	st.resending.Lock()
	defer st.resending.Unlock()
	for _, seq := range seqs {
		if st.copyOut(seq) {
			st.write()
		}
	}
}

// copyOut copies packet seq into st.packet, if it is kept.
func (st *SentStream) copyOut(seq uint16) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	slot := &st.history[seq%sentHistory]
	if slot.n == 0 || slot.seq != seq {
		return false
	}
	st.packet.seq, st.packet.n = seq, copy(st.packet.buf[:], slot.buf[:slot.n])
	return true
}

// write sends st.packet again, as RTX when negotiated (RFC 4588: the
// original sequence number leads the payload; padding is left out).
func (st *SentStream) write() {
	var h rtp.Header
	off, err := h.Unmarshal(st.packet.buf[:st.packet.n])
	if err != nil {
		return
	}
	payload := st.packet.buf[off:st.packet.n]
	if st.rtxSSRC == 0 || st.rtxPT == 0 {
		st.resent(st.now())
		_, _ = st.w.Write(&h, payload, interceptor.Attributes{})
		return
	}
	if h.Padding && len(payload) > 0 {
		payload = payload[:max(0, len(payload)-int(payload[len(payload)-1]))]
	}
	st.rtx = binary.BigEndian.AppendUint16(st.rtx[:0], h.SequenceNumber)
	st.rtx = append(st.rtx, payload...)
	h.SSRC, h.PayloadType, h.SequenceNumber = st.rtxSSRC, st.rtxPT, st.rtxSeq
	h.Padding, h.PaddingSize = false, 0
	st.rtxSeq++
	st.resent(st.now())
	_, _ = st.w.Write(&h, st.rtx, interceptor.Attributes{})
}
