package main

import (
	"bytes"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/recvfb"
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
			conns.streams[ssrc] = &registration{in: in, codec: opus}
			rx := testReceiver(ours, conns)

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

// The codecs as a browser's answer negotiates them: NACKs for video alone.
var (
	opus = webrtc.RTPCodecParameters{RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000}}
	vp8  = webrtc.RTPCodecParameters{RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000,
		RTCPFeedback: []webrtc.RTCPFeedback{{Type: "nack"}, {Type: "nack", Parameter: "pli"}}}}
)

// gcmPair is an SFU's AES-GCM context (pion's) that seals what the fast
// path's (ours) opens.
func gcmPair(t *testing.T) (*srtp.Context, srtpkeys.RTP) {
	t.Helper()
	profile := srtp.ProtectionProfileAeadAes128Gcm
	sfu, err := srtp.CreateContext(benchKey, benchSalt(profile), profile)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := srtpkeys.NewRTP(benchKey, benchSalt(profile), profile)
	if err != nil {
		t.Fatal(err)
	}
	return sfu, ours
}

// A synthetic receiver sends back what a browser does: a NACK for a video
// packet the network lost, every 100 ms until it came, and a receiver
// report of each stream every second.
func TestTheFastPathAsksForLostVideoAndReportsEachStream(t *testing.T) {
	sfu, ours := gcmPair(t)
	conns := newFastConns()
	conns.streams[1] = &registration{in: &inbound{kind: "audio", ssrc: 1, clock: 48000}, codec: opus}
	conns.streams[2] = &registration{codec: vp8} // an SFU's probing stream: read for the feedback alone
	rx := testReceiver(ours, conns)
	var sent []rtcp.Packet
	rx.rtcp = func(p []rtcp.Packet) error {
		sent = append(sent, p...)
		return nil
	}
	t0 := time.Now()
	for i := range 20 {
		at := t0.Add(time.Duration(i) * 20 * time.Millisecond)
		for ssrc, pt := range map[uint32]uint8{1: 111, 2: 96} {
			if i == 7 {
				continue // both streams' eighth packet lost
			}
			p := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: pt, SequenceNumber: uint16(100 + i), SSRC: ssrc,
				Timestamp: uint32(i) * 960}, Payload: []byte{1, 2, 3, 4}}
			if !rx.conn.media(sealed(t, sfu, &p), at) {
				t.Fatal("a packet of a registered stream was left to pion")
			}
		}
	}
	rx.sendFeedback(t0.Add(recvfb.NACKInterval), false)
	if len(sent) != 1 {
		t.Fatalf("sent %v, want one NACK", sent)
	}
	if n, ok := sent[0].(*rtcp.TransportLayerNack); !ok || n.MediaSSRC != 2 || len(n.Nacks) != 1 || n.Nacks[0].PacketID != 107 {
		t.Errorf("sent %v, want a NACK of video packet 107", sent[0])
	}
	sent = nil
	rx.sendFeedback(t0.Add(recvfb.ReportInterval), false)
	reported := map[uint32]uint32{}
	for _, p := range sent {
		if rr, ok := p.(*rtcp.ReceiverReport); ok {
			for _, r := range rr.Reports {
				reported[r.SSRC] = r.TotalLost
			}
		}
	}
	if len(reported) != 2 || reported[1] != 1 || reported[2] != 1 {
		t.Errorf("reports of %v (SSRC: lost), want both streams with one packet lost", reported)
	}
}

// A lost packet's retransmission, on the RTX stream the SFU declared, ends
// the asking for it; it is not counted, as a browser leaves recovered
// packets out of its receive statistics.
func TestARetransmissionEndsTheAskingForThePacketItRepeats(t *testing.T) {
	sfu, ours := gcmPair(t)
	conns := newFastConns()
	in := &inbound{kind: "video", ssrc: 2, clock: 90000, clip: testClip(t), video: &series{}}
	in.reads(vp8Codec)
	conns.streams[2] = &registration{in: in, codec: vp8}
	conns.streams[3] = &registration{codec: vp8, repairs: 2}
	rx := testReceiver(ours, conns)
	var nacked []uint16
	rx.rtcp = func(pkts []rtcp.Packet) error {
		for _, p := range pkts {
			if n, ok := p.(*rtcp.TransportLayerNack); ok {
				for _, pair := range n.Nacks {
					nacked = append(nacked, pair.PacketList()...)
				}
			}
		}
		return nil
	}
	t0 := time.Now()
	packet := func(ssrc uint32, pt uint8, seq uint16, payload []byte) {
		p := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: pt, SequenceNumber: seq, SSRC: ssrc}, Payload: payload}
		if !rx.conn.media(sealed(t, sfu, &p), t0) {
			t.Fatal("a packet of a registered stream was left to pion")
		}
	}
	for seq := uint16(100); seq < 110; seq++ {
		if seq != 104 && seq != 106 {
			packet(2, 96, seq, []byte{0x90, 0x80, 0x80, 0, 1})
		}
	}
	packet(3, 97, 5000, []byte{0, 104, 0x90, 0x80, 0x80, 0, 1}) // 104 again, on the RTX stream
	rx.sendFeedback(t0.Add(recvfb.NACKInterval), false)
	if !slices.Equal(nacked, []uint16{106}) {
		t.Errorf("asked for %v, want 106 alone (104 came again)", nacked)
	}
	if in.packets != 8 {
		t.Errorf("counted %d packets, want the 8 the network did not lose", in.packets)
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

// BenchmarkReceivedPacketAmongMany is the same path with the state of many
// subscribers touched between two packets of a stream, in the order the
// poller meets them (a batch of one socket's datagrams, then the next
// socket's): in a run most of the path's cost is cache misses on a stream's
// state, which the benchmark above, with one subscriber's, does not show.
func BenchmarkReceivedPacketAmongMany(b *testing.B) {
	const subscribers, batch = 168, 8
	c := testClip(b)
	profile := srtp.ProtectionProfileAeadAes128Gcm
	packets := subscriberTraffic(b, c, profile, 6, 400*batch)
	perRound := len(packets) * subscribers
	rxs := make([]*receiver, subscribers)
	for i := 0; b.Loop(); i++ {
		pos := i % perRound
		if pos == 0 { // the packets again: receivers that have not seen them
			b.StopTimer()
			for r := range rxs {
				rxs[r] = benchReceiver(b, c, profile)
			}
			runtime.GC()
			b.StartTimer()
		}
		k, rest := pos/(batch*subscribers), pos%(batch*subscribers)
		if !rxs[rest/batch].conn.media(packets[k*batch+rest%batch], time.Now()) {
			b.Fatal("a packet was left to pion")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs/packet")
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
		in := &inbound{kind: "video", ssrc: uint32(100 + i), clock: 90000, clip: c, video: video}
		in.reads(vp8Codec)
		conns.streams[uint32(100+i)] = &registration{in: in, codec: vp8}
		conns.streams[uint32(200+i)] = &registration{in: &inbound{kind: "audio", ssrc: uint32(200 + i), clock: 48000},
			codec: opus}
	}
	return testReceiver(ctx, conns)
}

// testReceiver is a connection's fast path decrypting with ctx the streams
// registered in conns; the feedback it sends goes nowhere.
func testReceiver(ctx srtpkeys.RTP, conns *fastConns) *receiver {
	conn := &fastConn{owner: conns}
	rx := &receiver{conn: conn, rtcp: func([]rtcp.Packet) error { return nil }, srtp: ctx, feedback: recvfb.New(time.Now()),
		plain: make([]byte, receiveMTU)}
	conn.rx.Store(rx)
	return rx
}

func TestUnpaddedLeavesOutThePaddingItsLastByteCounts(t *testing.T) {
	header := make([]byte, 12)
	for _, c := range []struct {
		body   []byte
		padded bool
		want   []byte
		ok     bool
	}{
		{[]byte("abc"), false, []byte("abc"), true},
		{[]byte{'a', 'b', 0, 0, 3}, true, []byte("ab"), true},
		{[]byte{0, 0, 3}, true, []byte{}, true}, // a probe: padding alone
		{[]byte{'a', 0}, true, nil, false},      // a count of 0
		{[]byte{'a', 9}, true, nil, false},      // more than the payload
		{nil, true, nil, false},
	} {
		got, ok := unpadded(append(slices.Clone(header), c.body...), len(header), c.padded)
		if ok != c.ok || !bytes.Equal(got, c.want) {
			t.Errorf("unpadded(%v, padded %v) = %v, %v; want %v, %v", c.body, c.padded, got, ok, c.want, c.ok)
		}
	}
}

func TestStreamTableFindsStreamsWhoseSlotsCollide(t *testing.T) {
	var tbl streamTable
	a, b, c := &fastStream{ssrc: 5}, &fastStream{ssrc: 5 + 32}, &fastStream{ssrc: 6}
	for _, s := range []*fastStream{a, b, c} {
		tbl.put(s)
	}
	for _, s := range []*fastStream{a, b, c} {
		if tbl.get(s.ssrc) != s {
			t.Errorf("stream %d not found", s.ssrc)
		}
	}
	if tbl.get(5+64) != nil || len(tbl.all()) != 3 {
		t.Errorf("an SSRC never put found, or %d streams listed, want 3", len(tbl.all()))
	}
	tbl.remove(5) // the slot's: the stream in the map is still found
	if tbl.get(5) != nil || tbl.get(5+32) != b {
		t.Error("after the slot's stream left, it was found, or the colliding one was not")
	}
	tbl.put(&fastStream{ssrc: 5 + 64})
	tbl.remove(5 + 32)
	if tbl.get(5+64) == nil || tbl.get(5+32) != nil || len(tbl.all()) != 2 {
		t.Error("a stream put in the freed slot not found, or the removed map stream still there")
	}
}

func TestDeclaredSSRCsAreThoseTheDescriptionsSSRCLinesName(t *testing.T) {
	description := "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n" +
		"m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 127.0.0.1\r\na=mid:0\r\na=ssrc:1111 cname:janus\r\n" +
		"m=video 9 UDP/TLS/RTP/SAVPF 96 97\r\nc=IN IP4 127.0.0.1\r\na=mid:1\r\na=ssrc-group:FID 2222 3333\r\n" +
		"a=ssrc:2222 cname:janus\r\na=ssrc:3333 cname:janus\r\n" +
		"m=video 9 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 127.0.0.1\r\na=mid:2\r\n"
	got := declaredSSRCs(description)
	if len(got) != 3 || !got[1111] || !got[2222] || !got[3333] {
		t.Fatalf("declared %v, want 1111, 2222 and 3333", got)
	}
	if declaredSSRCs("not a description") != nil {
		t.Fatal("an unparsable description declares nothing")
	}
}
