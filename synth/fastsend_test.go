package main

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/client"
)

// A participant's published media goes through pion until its connection is
// up, then through its direct writer; a pion receiver (as an SFU's) decrypts
// every packet either way, sequence numbers going on across the switch. The
// receiver re-offers first, as Medooze does: the participant's answer then
// names a DTLS role its connection does not have, which the writer's keys
// must not follow.
func TestPublishedMediaTakesTheDirectWriterOnceConnected(t *testing.T) {
	loopback := client.APIOptions{IPFilter: func(ip net.IP) bool { return ip.IsLoopback() }}
	pub, conns := fastConnection(t, loopback)
	track, _ := publishVP8(t, pub)
	sub := testSubscriber(t, loopback)
	var received, lastSeq atomic.Uint32
	gaps := atomic.Int32{}
	sub.OnTrack(func(tr *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		for {
			p, _, err := tr.ReadRTP()
			if err != nil {
				return
			}
			if n := received.Add(1); n > 1 && uint16(p.SequenceNumber) != uint16(lastSeq.Load())+1 {
				gaps.Add(1)
			}
			lastSeq.Store(uint32(p.SequenceNumber))
		}
	})
	connect(t, pub, sub)
	negotiate(t, sub, pub)

	// Sequence numbers that wrap early, while pion may still be sending them.
	seq := uint16(65500)
	stop := make(chan struct{})
	sent := make(chan int)
	go func() {
		n := 0
		defer func() { sent <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			p := &rtp.Packet{Header: rtp.Header{Version: 2, SequenceNumber: seq, Timestamp: uint32(n) * 3000, Marker: true},
				Payload: []byte{0x10, 0, 0, 0x9d, 1, 2, 3, 4}}
			if track.WriteRTP(p) == nil {
				n++
				seq++
			}
		}
	}()
	writer := conns.writerOf(t, pub)
	deadline := time.Now().Add(10 * time.Second)
	for !writer.Started() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !writer.Started() {
		t.Fatal("the direct writer did not start within 10 s of the connection")
	}
	before := received.Load()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	n := <-sent
	time.Sleep(100 * time.Millisecond)
	if got := received.Load(); got < uint32(n)*9/10 || got-before < 50 {
		t.Fatalf("the receiver decrypted %d of %d packets, %d after the writer started", got, n, got-before)
	}
	if gaps.Load() > 2 {
		t.Errorf("%d gaps in the received sequence", gaps.Load())
	}
}

// fastConnection is a participant's connection on the fast path, on the
// stack o gives, closed with the test, and the participant's sockets.
func fastConnection(tb testing.TB, o client.APIOptions) (*webrtc.PeerConnection, *fastConns) {
	tb.Helper()
	g := &generator{apiOptions: o}
	conns := newFastConns()
	pc, err := g.newPeerConnection(conns)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { pc.Close() })
	return pc, conns
}

// publishVP8 adds a VP8 track to pc.
func publishVP8(tb testing.TB, pc *webrtc.PeerConnection) (*webrtc.TrackLocalStaticRTP, *webrtc.RTPSender) {
	tb.Helper()
	track, err := webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000}, "video", "pub")
	if err != nil {
		tb.Fatal(err)
	}
	sender, err := pc.AddTrack(track)
	if err != nil {
		tb.Fatal(err)
	}
	return track, sender
}

// testSubscriber is a pion connection on the participants' own stack, as an
// SFU's receiving side would be, closed with the test.
func testSubscriber(t testing.TB, o client.APIOptions) *webrtc.PeerConnection {
	t.Helper()
	api, err := client.NewAPI(o)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	return sub
}

// writerOf is the direct writer of pc's connection, found through the
// sockets the poller reads.
func (f *fastConns) writerOf(t testing.TB, pc *webrtc.PeerConnection) interface{ Started() bool } {
	t.Helper()
	polling.mu.Lock()
	defer polling.mu.Unlock()
	for _, c := range polling.conns {
		if c.owner == f && c.peer.pc.Load() == pc {
			return c.peer.writer.Load()
		}
	}
	t.Fatal("no socket of the connection is polled")
	return nil
}

// connect negotiates between a and b and waits for both to be connected.
func connect(t testing.TB, a, b *webrtc.PeerConnection) {
	t.Helper()
	up := make(chan struct{}, 2)
	for _, pc := range []*webrtc.PeerConnection{a, b} {
		pc.OnConnectionStateChange(func(s webrtc.PeerConnectionState) {
			if s == webrtc.PeerConnectionStateConnected {
				up <- struct{}{}
			}
		})
	}
	negotiate(t, a, b)
	for range 2 {
		select {
		case <-up:
		case <-time.After(10 * time.Second):
			t.Fatal("not connected within 10 s")
		}
	}
}

// negotiate runs an offer from a and b's answer, with complete candidates.
func negotiate(t testing.TB, a, b *webrtc.PeerConnection) {
	t.Helper()
	describe := func(pc *webrtc.PeerConnection, d webrtc.SessionDescription) webrtc.SessionDescription {
		done := webrtc.GatheringCompletePromise(pc)
		if err := pc.SetLocalDescription(d); err != nil {
			t.Fatal(err)
		}
		<-done
		return *pc.LocalDescription()
	}
	offer, err := a.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetRemoteDescription(describe(a, offer)); err != nil {
		t.Fatal(err)
	}
	answer, err := b.CreateAnswer(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetRemoteDescription(describe(b, answer)); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkPublishedPacket is a publisher's CPU per packet of a connected
// stream, through pion's track and the interceptors around it against past
// them (SentStream.Write), in one run so that the machine's drift falls on
// both; each includes the encryption and the system call (on loopback, with
// the delivery to the receiving pion connection's socket).
func BenchmarkPublishedPacket(b *testing.B) {
	loopback := client.APIOptions{IPFilter: func(ip net.IP) bool { return ip.IsLoopback() }}
	pub, conns := fastConnection(b, loopback)
	track, sender := publishVP8(b, pub)
	sub := testSubscriber(b, loopback)
	sub.OnTrack(func(tr *webrtc.TrackRemote, _ *webrtc.RTPReceiver) { drain(tr) })
	connect(b, pub, sub)
	writer := conns.writerOf(b, pub)
	for deadline := time.Now().Add(10 * time.Second); !writer.Started() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	st := conns.sentStream(uint32(sender.GetParameters().Encodings[0].SSRC))
	if !writer.Started() || st == nil {
		b.Fatal("the stream is not bound to a started direct writer")
	}
	s := newVP8Stream()
	frame := make([]byte, 4*(mtu-rtpHeaderSize-vp8DescriptorSize))
	for _, path := range []struct {
		name  string
		write func(*rtp.Packet) error
	}{
		{"track", track.WriteRTP},
		{"direct", func(p *rtp.Packet) error { return st.Write(&p.Header, p.Payload) }},
	} {
		b.Run(path.name, func(b *testing.B) {
			packets := 0
			for b.Loop() { // a frame of four packets
				n, _ := s.send(frame, 6000, path.write)
				packets += n
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(packets)/1000, "µs/packet")
		})
	}
}
