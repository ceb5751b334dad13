package main

import (
	"testing"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/client"
)

// A stream's first packets reach pion, the rest the fast path: when its
// sequence numbers wrap in between, the fast path must still decrypt them
// (it once took the wrapped stream for rollover 0 and dropped every packet).
func TestAStreamThatWrappedBeforeTheFastPathTookItOverIsDecrypted(t *testing.T) {
	profile := srtp.ProtectionProfileAes128CmHmacSha1_80
	key, salt := make([]byte, 16), make([]byte, 14)
	for i := range key {
		key[i] = byte(i + 1)
	}
	sfu, err := srtp.CreateContext(key, salt, profile)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := srtp.CreateContext(key, salt, profile)
	if err != nil {
		t.Fatal(err)
	}
	ir, err := client.ReceiveFeedback()
	if err != nil {
		t.Fatal(err)
	}
	feedback, err := ir.Build("")
	if err != nil {
		t.Fatal(err)
	}
	feedback.BindRTCPWriter(interceptor.RTCPWriterFunc(func([]rtcp.Packet, interceptor.Attributes) (int, error) {
		return 0, nil
	}))
	defer feedback.Close()
	const ssrc = 1234
	conns := newFastConns()
	in := &inbound{kind: "audio", ssrc: ssrc, clock: 48000}
	conns.streams[ssrc] = &registration{in: in, track: &webrtc.TrackRemote{}}
	rx := &receiver{conn: &fastConn{owner: conns}, srtp: []*srtp.Context{ours}, feedback: feedback,
		streams: map[uint32]*fastStream{}, plain: make([]byte, receiveMTU), buf: make([]byte, receiveMTU),
		attrs: interceptor.Attributes{}}

	seq := uint16(65530)
	for sent := 0; sent < 12; sent, seq = sent+1, seq+1 {
		p := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 111, SequenceNumber: seq, SSRC: ssrc,
			Timestamp: uint32(sent) * 960}, Payload: []byte{1, 2, 3, 4}}
		plain, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		b, err := sfu.EncryptRTP(nil, plain, nil)
		if err != nil {
			t.Fatal(err)
		}
		if sent < 8 {
			continue // pion's: the fast path sees the stream from seq 2, after the wrap
		}
		var h rtp.Header
		if _, err := h.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		rx.deliver(b, &h, time.Now())
	}
	if in.packets != 4 {
		t.Fatalf("the fast path counted %d of the 4 packets after the wrap", in.packets)
	}
}
