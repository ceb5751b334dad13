package sfu

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/interceptor/pkg/twcc"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/client"
	"sfubench/sfu/inhouse/internal/signal"
	"sfubench/sfu/inhouse/internal/udpbatch"
)

func startServer(t testing.TB, mod func(*Config)) (*Server, string) {
	t.Helper()
	conn, err := udpbatch.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{UDP: conn, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: s.Handler()}
	go hs.Serve(ln)
	t.Cleanup(func() {
		s.Close()
		hs.Close()
	})
	return s, "ws://" + ln.Addr().String() + "/"
}

// clientOptions tune a test participant's pion stack.
type clientOptions struct {
	// drop, if set, sees each received RTP header first and may drop it,
	// as a lossy network would.
	drop func(h *rtp.Header) bool
	// dropSent, if set, sees each RTP header the client sends and may drop
	// it (once: the retransmission a NACK asks for is let through).
	dropSent func(h *rtp.Header) bool
	// twcc numbers what the client sends with transport-wide sequence
	// numbers, as Chrome does, for the SFU's congestion feedback.
	twcc bool
	// conn, if set, carries the client's ICE traffic.
	conn net.PacketConn
	// noUDP leaves the client without candidates, so ICE never connects.
	noUDP bool
	// deaf participants do not read what they receive (benchmarks).
	deaf bool
	// layers publishes the video in that many simulcast layers (publishLayers).
	layers int
	// codec is the published video's media type (VP8 when empty), its
	// payloads started as descriptors says.
	codec string
}

// descriptors start a keyframe's and another frame's payloads of each video
// codec but VP8 (payload's own) with what the SFU reads to tell them apart,
// in VP8's five bytes: for H.264 a STAP-A holding a sequence parameter set
// against a non-IDR slice; for VP9 a frame's start that is not inter-picture
// predicted against one that is; for AV1 the first packet of a new coded
// video sequence against another packet.
var descriptors = map[string][2][]byte{
	webrtc.MimeTypeH264: {{0x78, 0x00, 0x01, 0x67, 0x42}, {0x41, 0x9a, 0x00, 0x00, 0x00}},
	webrtc.MimeTypeVP9:  {{0x08, 0x00, 0x00, 0x00, 0x00}, {0x48, 0x00, 0x00, 0x00, 0x00}},
	webrtc.MimeTypeAV1:  {{0x18, 0x00, 0x00, 0x00, 0x00}, {0x10, 0x00, 0x00, 0x00, 0x00}},
}

func clientAPI(t testing.TB, o clientOptions) *webrtc.API {
	t.Helper()
	opts := client.APIOptions{IPFilter: func(ip net.IP) bool { return ip.IsLoopback() }, Conn: o.conn}
	if o.drop != nil || o.dropSent != nil {
		opts.First = []interceptor.Factory{&dropperFactory{drop: o.drop, dropSent: o.dropSent}}
	}
	if o.twcc {
		seq, err := twcc.NewHeaderExtensionInterceptor()
		if err != nil {
			t.Fatal(err)
		}
		opts.First = append(opts.First, seq)
	}
	if o.noUDP {
		opts.NetworkTypes = []webrtc.NetworkType{webrtc.NetworkTypeTCP4}
	}
	opts.Simulcast = o.layers > 1
	api, err := client.NewAPI(opts)
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// tc is a test participant: it publishes an Opus-like and a VP8-like stream
// whose payloads name the user and number the packet, and checks what it
// receives.
type tc struct {
	user  string
	pc    *webrtc.PeerConnection
	sess  *client.Session
	audio *webrtc.TrackLocalStaticRTP
	video *webrtc.TrackLocalStaticRTP
	codec string // clientOptions.codec
	// layered: the video's simulcast layers, smallest first (video is nil);
	// sending: how many of them publishLayers sends
	layered []*webrtc.TrackLocalStaticRTP
	sending atomic.Int32

	keyframe  atomic.Bool
	plis      atomic.Int64
	nacked    atomic.Int64 // packets the SFU asked it to resend
	nackedSeq sync.Map     // sequence number → *atomic.Int64: how often each was asked for
	dated     atomic.Int64 // receiver reports dated by its sender reports (an RTT for it)
	feedback  atomic.Int64 // transport-wide congestion feedback packets
	fedFrom   atomic.Int64 // 1 + the lowest transport-wide sequence number feedback began at, 0 none yet
	deaf      bool
	stop      chan struct{}
	wg        sync.WaitGroup

	mu          sync.Mutex
	got         map[string]map[uint32]bool // "user/kind" → packet numbers received
	reported    map[string]uint32          // "user/kind" → packet count of the latest sender report
	ssrcs       map[string]uint32          // "user/kind" → the SSRC it is received on
	corrupt     int
	corruptSeen []string
	closing     bool // close has begun: no goroutine starts
}

func join(t testing.TB, url, room, user string, o clientOptions) *tc {
	t.Helper()
	c, err := tryJoin(t, url, room, user, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func tryJoin(t testing.TB, url, room, user string, o clientOptions) (*tc, error) {
	pc, err := clientAPI(t, o).NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return nil, err
	}
	c := &tc{user: user, pc: pc, stop: make(chan struct{}), got: map[string]map[uint32]bool{}, reported: map[string]uint32{},
		ssrcs: map[string]uint32{}, deaf: o.deaf}
	c.audio, _ = webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "audio", user)
	vp8 := webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000}
	switch o.codec {
	case webrtc.MimeTypeH264:
		vp8 = webrtc.RTPCodecCapability{MimeType: o.codec, ClockRate: 90000, SDPFmtpLine: h264Params}
	case webrtc.MimeTypeVP9:
		vp8 = webrtc.RTPCodecCapability{MimeType: o.codec, ClockRate: 90000, SDPFmtpLine: "profile-id=0"}
	case webrtc.MimeTypeAV1:
		vp8 = webrtc.RTPCodecCapability{MimeType: o.codec, ClockRate: 90000, SDPFmtpLine: "level-idx=5;profile=0;tier=0"}
	}
	c.codec = o.codec
	tracks := []*webrtc.TrackLocalStaticRTP{c.audio}
	if o.layers > 1 {
		for _, rid := range signal.Rids[:o.layers] {
			l, _ := webrtc.NewTrackLocalStaticRTP(vp8, "video", user, webrtc.WithRTPStreamID(rid))
			c.layered = append(c.layered, l)
		}
		tracks = append(tracks, c.layered[0])
	} else {
		c.video, _ = webrtc.NewTrackLocalStaticRTP(vp8, "video", user)
		tracks = append(tracks, c.video)
	}
	for _, tr := range tracks {
		sender, err := pc.AddTrack(tr)
		if err == nil && tr.RID() != "" {
			for _, l := range c.layered[1:] {
				if err = sender.AddEncoding(l); err != nil {
					break
				}
			}
		}
		if err != nil {
			pc.Close()
			return nil, err
		}
		c.wg.Add(1)
		go c.readRTCP(sender.ReadRTCP, func(p rtcp.Packet) {
			switch p := p.(type) {
			case *rtcp.PictureLossIndication:
				c.plis.Add(1)
				c.keyframe.Store(true)
			case *rtcp.TransportLayerNack:
				for _, n := range p.Nacks {
					for _, seq := range n.PacketList() {
						c.nacked.Add(1)
						count, _ := c.nackedSeq.LoadOrStore(seq, &atomic.Int64{})
						count.(*atomic.Int64).Add(1)
					}
				}
			case *rtcp.ReceiverReport:
				for _, r := range p.Reports {
					if r.LastSenderReport != 0 {
						c.dated.Add(1)
					}
				}
			case *rtcp.TransportLayerCC:
				c.feedback.Add(1)
				for from := int64(p.BaseSequenceNumber) + 1; ; {
					if was := c.fedFrom.Load(); (was != 0 && was <= from) || c.fedFrom.CompareAndSwap(was, from) {
						break
					}
				}
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.sess, err = client.Join(ctx, client.Options{URL: url, Room: room, User: user, PC: pc, OnTrack: c.onTrack,
		Layers: o.layers})
	if err != nil {
		pc.Close()
		c.wg.Wait()
		return nil, err
	}
	return c, nil
}

// readRTCP hands each RTCP packet read to handle until the read fails.
func (c *tc) readRTCP(read func() ([]rtcp.Packet, interceptor.Attributes, error), handle func(rtcp.Packet)) {
	defer c.wg.Done()
	for {
		pkts, _, err := read()
		if err != nil {
			return
		}
		for _, p := range pkts {
			handle(p)
		}
	}
}

// payload is what packet n of a stream carries: a VP8 descriptor for video,
// then user and number, padded to a typical size.
func payload(user string, n uint32, video, key bool, size int) []byte {
	var b []byte
	if video {
		frame := byte(1)
		if key {
			frame = 0
		}
		b = []byte{0x90, 0x80, 0x80 | byte(n>>8&0x7f), byte(n), frame}
	}
	b = append(b, user...)
	b = append(b, '/')
	b = binary.BigEndian.AppendUint32(b, n)
	for len(b) < size {
		b = append(b, byte(len(b)))
	}
	return b
}

// publish sends 50 audio and 30 video packets per second until stopped; a
// keyframe starts the video and answers each PLI.
func (c *tc) publish() {
	c.keyframe.Store(true)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		tick := time.NewTicker(time.Second / 150)
		defer tick.Stop()
		var an, vn uint32
		for i := 0; ; i++ {
			select {
			case <-c.stop:
				return
			case <-tick.C:
			}
			if i%3 == 0 {
				_ = c.audio.WriteRTP(&rtp.Packet{Header: rtp.Header{Version: 2, SequenceNumber: uint16(an), Timestamp: an * 960},
					Payload: payload(c.user, an, false, false, 80)})
				an++
			}
			if i%5 == 0 {
				key := c.keyframe.Swap(false)
				pl := payload(c.user, vn, true, key, 1000)
				if d, ok := descriptors[c.codec]; ok && key {
					copy(pl, d[0])
				} else if ok {
					copy(pl, d[1])
				}
				_ = c.video.WriteRTP(&rtp.Packet{Header: rtp.Header{Version: 2, Marker: true, SequenceNumber: uint16(vn), Timestamp: vn * 3000},
					Payload: pl})
				vn++
			}
		}
	}()
}

func (c *tc) onTrack(user string, t *webrtc.TrackRemote, r *webrtc.RTPReceiver) {
	if c.deaf {
		return
	}
	if user == "" {
		// pion's answerer sometimes starts a track from packets that beat
		// its own receiver setup, without the SDP's msid: whose it is is
		// unknown here, so it proves nothing either way.
		return
	}
	video := t.Kind() == webrtc.RTPCodecTypeVideo
	key := user + "/" + t.Kind().String()
	c.mu.Lock()
	if c.closing { // a track pion starts while close waits is nobody's
		c.mu.Unlock()
		return
	}
	c.ssrcs[key] = uint32(t.SSRC())
	c.wg.Add(2)
	c.mu.Unlock()
	go c.readRTCP(r.ReadRTCP, func(p rtcp.Packet) {
		if sr, ok := p.(*rtcp.SenderReport); ok {
			c.mu.Lock()
			c.reported[key] = sr.PacketCount
			c.mu.Unlock()
		}
	})
	go func() {
		defer c.wg.Done()
		for {
			p, _, err := t.ReadRTP()
			if err != nil {
				return
			}
			pl := p.Payload
			if video && len(pl) > 5 {
				pl = pl[5:]
			}
			prefix := []byte(user + "/")
			ok := bytes.HasPrefix(pl, prefix) && len(pl) >= len(prefix)+4
			c.mu.Lock()
			if !ok {
				c.corrupt++
				if len(c.corruptSeen) < 5 {
					c.corruptSeen = append(c.corruptSeen, fmt.Sprintf("%s ssrc %d seq %d: %q", key, p.SSRC, p.SequenceNumber, pl[:min(len(pl), 12)]))
				}
			} else {
				if c.got[key] == nil {
					c.got[key] = map[uint32]bool{}
				}
				c.got[key][binary.BigEndian.Uint32(pl[len(prefix):])] = true
			}
			c.mu.Unlock()
		}
	}()
}

func (c *tc) received(from, kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got[from+"/"+kind])
}

// close leaves politely and waits for every goroutine of the participant.
func (c *tc) close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	if c.sess != nil {
		c.sess.Close()
	} else {
		c.pc.Close()
	}
	c.wg.Wait()
}

func waitFor(t testing.TB, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type dropperFactory struct{ drop, dropSent func(*rtp.Header) bool }

func (f *dropperFactory) NewInterceptor(string) (interceptor.Interceptor, error) {
	return &dropper{drop: f.drop, dropSent: f.dropSent}, nil
}

type dropper struct {
	interceptor.NoOp
	drop, dropSent func(*rtp.Header) bool
}

func (d *dropper) BindLocalStream(_ *interceptor.StreamInfo, w interceptor.RTPWriter) interceptor.RTPWriter {
	if d.dropSent == nil {
		return w
	}
	return interceptor.RTPWriterFunc(func(h *rtp.Header, payload []byte, a interceptor.Attributes) (int, error) {
		if d.dropSent(h) {
			return len(payload), nil
		}
		return w.Write(h, payload, a)
	})
}

func (d *dropper) BindRemoteStream(_ *interceptor.StreamInfo, r interceptor.RTPReader) interceptor.RTPReader {
	if d.drop == nil {
		return r
	}
	return interceptor.RTPReaderFunc(func(b []byte, a interceptor.Attributes) (int, interceptor.Attributes, error) {
		for {
			n, attr, err := r.Read(b, a)
			if err != nil {
				return n, attr, err
			}
			var h rtp.Header
			if _, err := h.Unmarshal(b[:n]); err == nil && d.drop(&h) {
				continue
			}
			return n, attr, nil
		}
	})
}
