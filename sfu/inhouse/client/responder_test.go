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

// boundResponder is a responder with one stream of info bound, its writes
// sent to the returned channel, and a function that reads a NACK for seqs
// through it.
func boundResponder(t *testing.T, info *interceptor.StreamInfo) (interceptor.RTPWriter, chan written, func(seqs ...uint16)) {
	t.Helper()
	i, _ := responderFactory{}.NewInterceptor("")
	r := i.(*responder)
	out := make(chan written, 100)
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
	w, out, nack := boundResponder(t, &interceptor.StreamInfo{SSRC: 5, RTCPFeedback: withNACK})
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
	w, out, nack := boundResponder(t, &interceptor.StreamInfo{SSRC: 5, RTCPFeedback: withNACK,
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
	w, out, nack := boundResponder(t, &interceptor.StreamInfo{SSRC: 5, RTCPFeedback: []interceptor.RTCPFeedback{{Type: "nack", Parameter: "pli"}}})
	send(t, w, out, 5, 1, 5)
	nack(2)
	quiet(t, out)
}
