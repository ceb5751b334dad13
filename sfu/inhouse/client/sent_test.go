package client

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
)

type written struct {
	h       rtp.Header
	payload []byte
}

// boundSender is a Sender with one stream of info bound, its writes sent to
// the returned channel, and a function that reads a NACK for seqs through
// it.
func boundSender(t *testing.T, info *interceptor.StreamInfo) (interceptor.RTPWriter, chan written, func(seqs ...uint16)) {
	t.Helper()
	f := &SenderFactory{}
	i, _ := f.NewInterceptor("")
	r := i.(*Sender)
	if f.Made() != r {
		t.Fatal("the factory did not keep the Sender it made")
	}
	out := make(chan written, 2*sentHistory)
	w := r.BindLocalStream(info, interceptor.RTPWriterFunc(func(h *rtp.Header, p []byte, _ interceptor.Attributes) (int, error) {
		out <- written{h.Clone(), bytes.Clone(p)}
		return len(p), nil
	}))
	nack := func(seqs ...uint16) {
		raw, err := (&rtcp.TransportLayerNack{MediaSSRC: info.SSRC, Nacks: rtcp.NackPairsFromSequenceNumbers(seqs)}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		reader := r.BindRTCPReader(interceptor.RTCPReaderFunc(func(b []byte, a interceptor.Attributes) (int, interceptor.Attributes, error) {
			return copy(b, raw), a, nil
		}))
		if _, _, err := reader.Read(make([]byte, 1500), nil); err != nil {
			t.Fatal(err)
		}
	}
	return w, out, nack
}

// next is the next write, or fails after a second.
func next(t *testing.T, out chan written) written {
	t.Helper()
	select {
	case w := <-out:
		return w
	case <-time.After(time.Second):
		t.Fatal("nothing was written")
		return written{}
	}
}

func quiet(t *testing.T, out chan written) {
	t.Helper()
	select {
	case w := <-out:
		t.Fatalf("wrote %v", w.h)
	case <-time.After(50 * time.Millisecond):
	}
}

var withNACK = []interceptor.RTCPFeedback{{Type: "nack", Parameter: "pli"}, {Type: "nack"}}

// send writes packets numbered from..to of the stream, each naming its
// section (an extension, as the MID) and numbering its payload.
func send(t *testing.T, w interceptor.RTPWriter, out chan written, ssrc uint32, from, to uint16) {
	t.Helper()
	for seq := from; seq != to+1; seq++ {
		h := &rtp.Header{Version: 2, PayloadType: 96, SSRC: ssrc, SequenceNumber: seq, Timestamp: uint32(seq) * 3000, Marker: seq%3 == 0}
		if err := h.SetExtension(4, []byte("0")); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(h, binary.BigEndian.AppendUint16([]byte{0xaa}, seq), nil); err != nil {
			t.Fatal(err)
		}
		next(t, out) // the packet itself
	}
}

func TestANackedPacketIsSentAgainAsItWasSent(t *testing.T) {
	w, out, nack := boundSender(t, &interceptor.StreamInfo{SSRC: 5, RTCPFeedback: withNACK})
	send(t, w, out, 5, 65000, 65535)
	send(t, w, out, 5, 0, 100) // across the wrap
	nack(65530, 3, 101)        // 101 was never sent
	for _, seq := range []uint16{65530, 3} {
		got := next(t, out)
		want := []byte{0xaa, byte(seq >> 8), byte(seq)}
		if got.h.SSRC != 5 || got.h.SequenceNumber != seq || got.h.Timestamp != uint32(seq)*3000 ||
			got.h.Marker != (seq%3 == 0) || string(got.h.GetExtension(4)) != "0" || !bytes.Equal(got.payload, want) {
			t.Errorf("resent %+v %x, want packet %d as it was sent", got.h, got.payload, seq)
		}
	}
	quiet(t, out)
	// what is sentHistory packets old is gone
	send(t, w, out, 5, 101, 101+sentHistory)
	nack(100, 101, 102)
	if got := next(t, out); got.h.SequenceNumber != 102 {
		t.Errorf("resent %d, want 102 alone", got.h.SequenceNumber)
	}
	quiet(t, out)
}

func TestWithRTXARetransmissionLeadsWithItsNumberOnTheRTXStream(t *testing.T) {
	w, out, nack := boundSender(t, &interceptor.StreamInfo{SSRC: 5, RTCPFeedback: withNACK,
		SSRCRetransmission: 6, PayloadTypeRetransmission: 97})
	send(t, w, out, 5, 10, 20)
	nack(12, 15)
	first := next(t, out)
	second := next(t, out)
	for i, got := range []written{first, second} {
		seq := []uint16{12, 15}[i]
		want := []byte{byte(seq >> 8), byte(seq), 0xaa, byte(seq >> 8), byte(seq)}
		if got.h.SSRC != 6 || got.h.PayloadType != 97 || got.h.Timestamp != uint32(seq)*3000 || !bytes.Equal(got.payload, want) {
			t.Errorf("retransmission %+v %x, want packet %d on SSRC 6, payload type 97", got.h, got.payload, seq)
		}
	}
	if second.h.SequenceNumber != first.h.SequenceNumber+1 {
		t.Errorf("RTX sequence numbers %d then %d: they count retransmissions", first.h.SequenceNumber, second.h.SequenceNumber)
	}
	// a padded packet is resent without its padding
	h := &rtp.Header{Version: 2, PayloadType: 96, SSRC: 5, SequenceNumber: 21, Padding: true}
	if _, err := w.Write(h, []byte{1, 2, 0, 0, 3}, nil); err != nil {
		t.Fatal(err)
	}
	next(t, out)
	nack(21)
	if got := next(t, out); got.h.Padding || !bytes.Equal(got.payload, []byte{0, 21, 1, 2}) {
		t.Errorf("padded packet resent as %+v %x, want 0015 0102 unpadded", got.h, got.payload)
	}
}

func TestAStreamWithoutNACKIsNotKept(t *testing.T) {
	w, out, nack := boundSender(t, &interceptor.StreamInfo{SSRC: 5, RTCPFeedback: []interceptor.RTCPFeedback{{Type: "nack", Parameter: "pli"}}})
	send(t, w, out, 5, 1, 5)
	nack(2)
	quiet(t, out)
}

// A stream written past pion's track takes its binding's SSRC and payload
// type, and is kept and reported as what passes the interceptor.
func TestAStreamWrittenDirectlyIsBoundKeptAndReported(t *testing.T) {
	f := &SenderFactory{}
	i, _ := f.NewInterceptor("")
	s := i.(*Sender)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	out := make(chan written, 10)
	s.BindLocalStream(&interceptor.StreamInfo{SSRC: 5, PayloadType: 96, ClockRate: 90000, RTCPFeedback: withNACK},
		interceptor.RTPWriterFunc(func(h *rtp.Header, p []byte, _ interceptor.Attributes) (int, error) {
			out <- written{h.Clone(), bytes.Clone(p)}
			return len(p), nil
		}))
	st := s.Stream(5)
	if st == nil || s.Stream(6) != nil {
		t.Fatal("the bound stream is not found by its SSRC alone")
	}
	for seq := uint16(7); seq < 10; seq++ { // a frame of three packets, then the next frame's first
		ts := uint32(3000)
		if seq == 9 {
			ts, now = 6000, now.Add(time.Second/30)
		}
		if err := st.Write(&rtp.Header{Version: 2, SequenceNumber: seq, Timestamp: ts}, []byte{1, 2, 3, byte(seq)}); err != nil {
			t.Fatal(err)
		}
		if got := next(t, out); got.h.SSRC != 5 || got.h.PayloadType != 96 || got.h.SequenceNumber != seq {
			t.Fatalf("wrote %+v, want packet %d on SSRC 5, payload type 96", got.h, seq)
		}
	}
	now = now.Add(time.Second / 2)
	r := st.senderReport(now)
	if r.SSRC != 5 || r.PacketCount != 3 || r.OctetCount != 12 || r.RTPTime != 6000+45000 || r.NTPTime != ntpTime(now) {
		t.Errorf("sender report %+v, want 3 packets, 12 bytes, RTP time 51000 (the last frame's, half a second on)", r)
	}
	if ntpTime(time.Unix(0, 500_000_000)) != (2208988800<<32 | 1<<31) {
		t.Errorf("NTP time of 1970's first half second %x, want 2208988800.5", ntpTime(time.Unix(0, 500_000_000)))
	}
	raw, _ := (&rtcp.TransportLayerNack{MediaSSRC: 5, Nacks: rtcp.NackPairsFromSequenceNumbers([]uint16{8})}).Marshal()
	reader := s.BindRTCPReader(interceptor.RTCPReaderFunc(func(b []byte, a interceptor.Attributes) (int, interceptor.Attributes, error) {
		return copy(b, raw), a, nil
	}))
	if _, _, err := reader.Read(make([]byte, 1500), nil); err != nil {
		t.Fatal(err)
	}
	if got := next(t, out); got.h.SequenceNumber != 8 || !bytes.Equal(got.payload, []byte{1, 2, 3, 8}) {
		t.Errorf("resent %+v %x, want packet 8 as written", got.h, got.payload)
	}
}

// A Sender resends within the budget resendLimiter keeps: no more than the
// stream's media, and a packet not twice within resendGap.
func TestASendersResendsKeepWithinTheMedia(t *testing.T) {
	w, out, nack := boundSender(t, &interceptor.StreamInfo{SSRC: 5, RTCPFeedback: withNACK})
	send(t, w, out, 5, 0, 9)
	nack(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	for range 10 {
		next(t, out)
	}
	nack(0, 1, 2) // at once again, and the budget spent
	quiet(t, out)
}

// Every second the Sender reports each stream, as pion's report interceptor.
func TestASenderReportsEachStreamEverySecond(t *testing.T) {
	w, out, _ := boundSender(t, &interceptor.StreamInfo{SSRC: 5, ClockRate: 90000, RTCPFeedback: withNACK})
	send(t, w, out, 5, 1, 4)
	f := &SenderFactory{}
	i, _ := f.NewInterceptor("")
	s := i.(*Sender)
	s.BindLocalStream(&interceptor.StreamInfo{SSRC: 8, ClockRate: 48000}, w)
	reports := make(chan []rtcp.Packet, 4)
	s.BindRTCPWriter(interceptor.RTCPWriterFunc(func(pkts []rtcp.Packet, _ interceptor.Attributes) (int, error) {
		reports <- pkts
		return 0, nil
	}))
	defer s.Close()
	select {
	case pkts := <-reports:
		if sr, ok := pkts[0].(*rtcp.SenderReport); !ok || sr.SSRC != 8 || len(pkts) != 1 {
			t.Errorf("reported %v, want stream 8's sender report", pkts)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no sender report within two seconds")
	}
}
