package client

import (
	"sync"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
)

// resendLimiter keeps a sender's retransmissions within what a browser
// sends. pion's NACK responder resends a packet every time it is asked;
// libwebrtc resends one at most once per round trip and keeps its
// retransmissions within its media's rate (RTPSender::ReSendPacket's rate
// limiter). Without that, an SFU short of CPU, dropping datagrams and asking
// for them, drew what it had dropped again and again: 242 Mbps into an SFU
// whose media was 36 (in-house SFU, 49 synthetic participants, 0.5 core),
// and the generator fell behind sending its media. It sits inside pion's
// responder, which reads the NACKs it leaves; a Sender keeps the same budget.
type resendLimiter struct {
	interceptor.NoOp
	now     func() time.Time
	mu      sync.Mutex
	streams map[uint32]*resendBudget
}

const (
	// resendGap is how soon a packet may be resent again: a round trip on
	// a congested path, and the SFU's NACK interval.
	resendGap = 100 * time.Millisecond
	// resendMemory is how many of a stream's packets' last resends are kept.
	resendMemory = 1024
)

// resendBudget is one stream's: what it sent in the current and the previous
// second, and when each recent packet was last resent.
type resendBudget struct {
	second          int64
	written, resent [2]int // [this second, the one before]; written counts resends too
	last            [resendMemory]struct {
		seq uint16
		at  time.Time
	}
}

type resendLimiterFactory struct{}

func (resendLimiterFactory) NewInterceptor(string) (interceptor.Interceptor, error) {
	return &resendLimiter{now: time.Now, streams: map[uint32]*resendBudget{}}, nil
}

func (l *resendLimiter) BindLocalStream(info *interceptor.StreamInfo, w interceptor.RTPWriter) interceptor.RTPWriter {
	l.mu.Lock()
	b := &resendBudget{}
	l.streams[info.SSRC] = b
	l.mu.Unlock()
	return interceptor.RTPWriterFunc(func(h *rtp.Header, payload []byte, a interceptor.Attributes) (int, error) {
		l.mu.Lock()
		b.roll(l.now())
		b.written[0]++
		l.mu.Unlock()
		return w.Write(h, payload, a)
	})
}

func (l *resendLimiter) UnbindLocalStream(info *interceptor.StreamInfo) {
	l.mu.Lock()
	delete(l.streams, info.SSRC)
	l.mu.Unlock()
}

// BindRTCPReader leaves in each NACK the packets the budget allows resending.
func (l *resendLimiter) BindRTCPReader(r interceptor.RTCPReader) interceptor.RTCPReader {
	return nackReader(r, l.limit)
}

// nackReader shows each NACK that r reads to seen. The packets are parsed
// once, into the attributes: the interceptors outside read the same ones,
// as seen left them.
func nackReader(r interceptor.RTCPReader, seen func(*rtcp.TransportLayerNack)) interceptor.RTCPReader {
	return interceptor.RTCPReaderFunc(func(b []byte, a interceptor.Attributes) (int, interceptor.Attributes, error) {
		n, attrs, err := r.Read(b, a)
		if err != nil {
			return n, attrs, err
		}
		if attrs == nil {
			attrs = interceptor.Attributes{}
		}
		pkts, err := attrs.GetRTCPPackets(b[:n])
		if err != nil {
			return n, attrs, nil
		}
		for _, p := range pkts {
			if nack, ok := p.(*rtcp.TransportLayerNack); ok {
				seen(nack)
			}
		}
		return n, attrs, nil
	})
}

func (l *resendLimiter) limit(nack *rtcp.TransportLayerNack) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.streams[nack.MediaSSRC]; b != nil {
		nack.Nacks = rtcp.NackPairsFromSequenceNumbers(b.allow(nack.Nacks, l.now()))
	}
}

// allow is what the budget lets resend at now of the packets the pairs ask
// for; those it counts as resent.
func (b *resendBudget) allow(pairs []rtcp.NackPair, now time.Time) []uint16 {
	b.roll(now)
	// what a second's media was, resends left out
	budget := max(b.written[0]-b.resent[0], b.written[1]-b.resent[1])
	var kept []uint16
	for _, pair := range pairs {
		pair.Range(func(seq uint16) bool {
			last := &b.last[seq%resendMemory]
			if b.resent[0] >= budget || (last.seq == seq && now.Sub(last.at) < resendGap) {
				return true
			}
			last.seq, last.at = seq, now
			b.resent[0]++
			kept = append(kept, seq)
			return true
		})
	}
	return kept
}

// roll starts a new second's counts when now is in one.
func (b *resendBudget) roll(now time.Time) {
	s := now.Unix()
	switch {
	case s == b.second:
		return
	case s == b.second+1:
		b.written[1], b.resent[1] = b.written[0], b.resent[0]
	default:
		b.written[1], b.resent[1] = 0, 0
	}
	b.second, b.written[0], b.resent[0] = s, 0, 0
}
