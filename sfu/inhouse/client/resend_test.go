package client

import (
	"testing"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
)

// nackThrough reads a NACK for seqs through the limiter and returns what it
// left for the responder.
func nackThrough(t *testing.T, l *resendLimiter, seqs []uint16) []uint16 {
	t.Helper()
	raw, err := (&rtcp.TransportLayerNack{MediaSSRC: 1, Nacks: rtcp.NackPairsFromSequenceNumbers(seqs)}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	r := l.BindRTCPReader(interceptor.RTCPReaderFunc(func(b []byte, a interceptor.Attributes) (int, interceptor.Attributes, error) {
		return copy(b, raw), a, nil
	}))
	buf := make([]byte, 1500)
	n, attrs, err := r.Read(buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	pkts, err := attrs.GetRTCPPackets(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	var left []uint16
	for _, pair := range pkts[0].(*rtcp.TransportLayerNack).Nacks {
		left = append(left, pair.PacketList()...)
	}
	return left
}

// A sender resends no more packets than its media has, and a packet not
// again within resendGap, however often it is asked.
func TestResendsKeepWithinTheMediaAndARoundTrip(t *testing.T) {
	i, _ := resendLimiterFactory{}.NewInterceptor("")
	l := i.(*resendLimiter)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	w := l.BindLocalStream(&interceptor.StreamInfo{SSRC: 1}, interceptor.RTPWriterFunc(
		func(*rtp.Header, []byte, interceptor.Attributes) (int, error) { return 0, nil }))
	for n := range 30 {
		_, _ = w.Write(&rtp.Header{SSRC: 1, SequenceNumber: uint16(n)}, nil, nil)
	}
	many := make([]uint16, 100)
	for n := range many {
		many[n] = uint16(n)
	}
	// the responder writes what the limiter left through it
	resend := func(seqs []uint16) []uint16 {
		left := nackThrough(t, l, seqs)
		for _, seq := range left {
			_, _ = w.Write(&rtp.Header{SSRC: 1, SequenceNumber: seq}, nil, nil)
		}
		return left
	}
	if got := resend(many[:10]); len(got) != 10 {
		t.Fatalf("10 packets asked for, %d left to resend", len(got))
	}
	if got := resend(many[:10]); len(got) != 0 {
		t.Errorf("the same 10 asked for again at once: %d left to resend", len(got))
	}
	// a second's media was 30 packets, 10 of them resent already
	if got := resend(many[10:]); len(got) != 20 {
		t.Errorf("90 more asked for with 20 left in the budget: %d left to resend", len(got))
	}
	if got := resend(many[40:]); len(got) != 0 {
		t.Errorf("the budget is spent, yet %d left to resend", len(got))
	}
	// a round trip later, in the next second: the last second's media is the budget
	now = now.Add(time.Second)
	if got := resend(many[:40]); len(got) != 30 {
		t.Errorf("40 asked for again a second later with 30 in the budget: %d left to resend", len(got))
	}
	// another stream's NACKs are not this one's business
	raw := &rtcp.TransportLayerNack{MediaSSRC: 2, Nacks: rtcp.NackPairsFromSequenceNumbers(many)}
	l.limit(raw)
	if len(raw.Nacks) == 0 {
		t.Error("a NACK for a stream the limiter does not send was emptied")
	}
}
