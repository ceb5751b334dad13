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
	"sfubench/sfu/inhouse/srtpkeys"
)

// A stream's first packets reach pion, the rest the fast path: when its
// sequence numbers wrap in between, the fast path must still decrypt them
// (it once took the wrapped stream for rollover 0 and dropped every packet).
// The SFU's side is pion's context; the fast path's is ours for AES-GCM.
func TestAStreamThatWrappedBeforeTheFastPathTookItOverIsDecrypted(t *testing.T) {
	for _, profile := range []srtp.ProtectionProfile{srtp.ProtectionProfileAeadAes128Gcm, srtp.ProtectionProfileAes128CmHmacSha1_80} {
		t.Run(profile.String(), func(t *testing.T) {
			key := make([]byte, 16)
			for i := range key {
				key[i] = byte(i + 1)
			}
			salt := benchSalt(profile)
			sfu, err := srtp.CreateContext(key, salt, profile)
			if err != nil {
				t.Fatal(err)
			}
			ours, err := srtpkeys.NewRTP(key, salt, profile)
			if err != nil {
				t.Fatal(err)
			}
			const ssrc = 1234
			conns := newFastConns()
			in := &inbound{kind: "audio", ssrc: ssrc, clock: 48000}
			conns.streams[ssrc] = &registration{in: in, track: &webrtc.TrackRemote{}}
			rx := testReceiver(t, ours, conns)
			defer rx.close()

			seq := uint16(65530)
			for sent := 0; sent < 12; sent, seq = sent+1, seq+1 {
				p := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 111, SequenceNumber: seq, SSRC: ssrc,
					Timestamp: uint32(sent) * 960}, Payload: []byte{1, 2, 3, 4}}
				b := sealed(t, sfu, &p)
				if sent < 8 {
					continue // pion's: the fast path sees the stream from seq 2, after the wrap
				}
				var h rtp.Header
				n, err := h.Unmarshal(b)
				if err != nil {
					t.Fatal(err)
				}
				rx.deliver(b, &h, n, time.Now())
			}
			if in.packets != 4 {
				t.Fatalf("the fast path counted %d of the 4 packets after the wrap", in.packets)
			}
		})
	}
}

// BenchmarkReceivedPacket is the fast path's user-space cost per received
// packet, as a subscriber of six video and six audio streams of the clip
// takes them (decryption, feedback, counters, frame reassembly and digest);
// the system calls are the bench's (bench/forwarding.py).
func BenchmarkReceivedPacket(b *testing.B) {
	for _, profile := range []srtp.ProtectionProfile{srtp.ProtectionProfileAeadAes128Gcm, srtp.ProtectionProfileAes128CmHmacSha1_80} {
		b.Run(profile.String(), func(b *testing.B) {
			c := testClip(b)
			packets := subscriberTraffic(b, c, profile, 6, 20000)
			var rx *receiver
			for i := 0; b.Loop(); i++ {
				if i%len(packets) == 0 { // the packets again: a receiver that has not seen them
					b.StopTimer()
					if rx != nil {
						rx.close()
					}
					rx = benchReceiver(b, c, profile)
					b.StartTimer()
				}
				if !rx.conn.media(packets[i%len(packets)], time.Now()) {
					b.Fatal("a packet was left to pion")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs/packet")
		})
	}
}

// subscriberTraffic is n packets from `publishers` participants' video and
// audio streams, interleaved as they arrive, encrypted as the SFU would.
func subscriberTraffic(b *testing.B, c *clip, profile srtp.ProtectionProfile, publishers, n int) [][]byte {
	ctx, err := srtp.CreateContext(benchKey, benchSalt(profile), profile)
	if err != nil {
		b.Fatal(err)
	}
	var out [][]byte
	add := func(p *rtp.Packet, ssrc uint32, pt uint8) {
		p.SSRC, p.PayloadType = ssrc, pt
		out = append(out, sealed(b, ctx, p))
	}
	video, audio := make([]*vp8Stream, publishers), make([]*rtpStream, publishers)
	for i := range publishers {
		video[i], audio[i] = newVP8Stream(), newRTPStream()
	}
	for tick := 0; len(out) < n; tick++ { // 20 ms ticks: audio each, video at 15 fps (every 3.33)
		for i := range publishers {
			audio[i].skip(audioStep)
			add(audio[i].next(c.audio[tick%len(c.audio)], true), uint32(200+i), 111)
			if tick*15/50 != (tick+1)*15/50 {
				video[i].send(c.full().frames[(tick*15/50)%len(c.nextKey)], 6000, func(p *rtp.Packet) error {
					add(p, uint32(100+i), 96)
					return nil
				})
			}
		}
	}
	return out[:n]
}

// sealed is p as an SFU sends it: marshalled and encrypted with ctx.
func sealed(tb testing.TB, ctx *srtp.Context, p *rtp.Packet) []byte {
	tb.Helper()
	plain, err := p.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	enc, err := ctx.EncryptRTP(nil, plain, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return enc
}

var benchKey = make([]byte, 16)

func benchSalt(profile srtp.ProtectionProfile) []byte {
	n, err := profile.SaltLen()
	if err != nil {
		panic(err)
	}
	return make([]byte, n)
}

func benchReceiver(b *testing.B, c *clip, profile srtp.ProtectionProfile) *receiver {
	ctx, err := srtpkeys.NewRTP(benchKey, benchSalt(profile), profile)
	if err != nil {
		b.Fatal(err)
	}
	conns := newFastConns()
	for i := range 6 {
		video := &series{}
		video.follow(true)
		conns.streams[uint32(100+i)] = &registration{in: &inbound{kind: "video", ssrc: uint32(100 + i), clock: 90000, clip: c, video: video},
			track: &webrtc.TrackRemote{}}
		conns.streams[uint32(200+i)] = &registration{in: &inbound{kind: "audio", ssrc: uint32(200 + i), clock: 48000},
			track: &webrtc.TrackRemote{}}
	}
	return testReceiver(b, ctx, conns)
}

// testReceiver is a connection's fast path decrypting with ctx the streams
// registered in conns, the feedback it would send dropped; its caller closes
// it.
func testReceiver(tb testing.TB, ctx srtpkeys.RTP, conns *fastConns) *receiver {
	ir, err := client.ReceiveFeedback()
	if err != nil {
		tb.Fatal(err)
	}
	feedback, err := ir.Build("")
	if err != nil {
		tb.Fatal(err)
	}
	feedback.BindRTCPWriter(interceptor.RTCPWriterFunc(func([]rtcp.Packet, interceptor.Attributes) (int, error) {
		return 0, nil
	}))
	conn := &fastConn{owner: conns}
	rx := &receiver{conn: conn, srtp: ctx, feedback: feedback,
		streams: map[uint32]*fastStream{}, plain: make([]byte, receiveMTU), buf: make([]byte, receiveMTU),
		attrs: interceptor.Attributes{}}
	conn.rx.Store(rx)
	return rx
}
