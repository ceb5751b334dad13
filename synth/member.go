package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/webrtc/v4"
)

// joinTimeout bounds a join's signalling; the engine's own rule (a page
// that never reports joined) takes over after it.
const joinTimeout = 30 * time.Second

// driverReasonGrace is how long a driver has to say why a session ended
// before its closed connection is the reason.
const driverReasonGrace = time.Second

// member is one synthetic participant: it joins through its SFU's driver,
// publishes the clip, unless it only watches, and receives everyone else.
type member struct {
	user    string
	room    int
	params  map[string]string
	layer   string // the simulcast layer it asks for
	watches bool   // a viewer: it publishes nothing
	pub     *publisher
	camera  *series
	fast    *fastConns

	mu      sync.Mutex
	pcs     []*webrtc.PeerConnection // every one its driver made
	state   string                   // joining, joined, failed
	reason  string
	sess    Session
	inbound []*inbound
	closed  bool
}

func newMember(user string, room int, params map[string]string, layer string, c *clip, fps int) *member {
	m := &member{user: user, room: room, params: params, layer: layer, camera: &series{}, state: "joining",
		fast: newFastConns()}
	m.pub = newPublisher(c, fps, user, m.camera, m.midOf, m.fast.sentStream)
	return m
}

// join runs the driver and starts publishing; it reports through the
// member's state, which the engine link posts.
func (m *member) join(g *generator) {
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	p := Participant{
		Room: strconv.Itoa(m.room), User: m.user, Params: m.params,
		Width: g.clip.full().width, Height: g.clip.full().height, Codec: g.clip.codec.name,
		NewPeerConnection: func() (*webrtc.PeerConnection, error) { return m.newPeerConnection(g) },
		ReceiveLayer:      m.layer,
		Publishing:        m.pub.watch,
		OnTrack:           func(from string, t *webrtc.TrackRemote) { m.receive(from, t, g.clip) },
		Ended:             func(err error) { m.ended(g.driverName + ": " + err.Error()) },
	}
	if !m.watches {
		p.Tracks, p.Encodings, p.SpatialLayers = m.pub.tracks(), m.pub.encodings(), g.clip.spatialLayers()
	}
	sess, err := g.driver.Join(ctx, p)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		if sess != nil {
			go sess.Close()
		}
		return
	}
	if err != nil {
		m.state, m.reason = "failed", fmt.Sprintf("%s: %v", g.driverName, err)
		return
	}
	m.sess, m.state = sess, "joined"
	if !m.watches {
		m.pub.start()
	}
}

func (m *member) newPeerConnection(g *generator) (*webrtc.PeerConnection, error) {
	pc, err := g.newPeerConnection(m.fast)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.pcs = append(m.pcs, pc)
	m.mu.Unlock()
	// A connection that failed, or closed once connected: one a driver drops
	// unconnected (a step it retries) ends nothing. Said a second later: a
	// driver told why on its signalling (LiveKit's leave often comes after
	// the server closed the connection) says it better.
	var connected atomic.Bool
	pc.OnConnectionStateChange(func(state webrtc.PeerConnectionState) {
		switch {
		case state == webrtc.PeerConnectionStateConnected:
			connected.Store(true)
		case state == webrtc.PeerConnectionStateFailed, state == webrtc.PeerConnectionStateClosed && connected.Load():
			reason := fmt.Sprintf("%s: a connection to the SFU %s", g.driverName, state)
			time.AfterFunc(driverReasonGrace, func() { m.ended(reason) })
		}
	})
	return pc, nil
}

// ended fails a joined member whose session ended without its leaving (its
// SFU dropped it, a connection failed): the engine records why, where it
// had only missing videos to go by. The first reason stays: a driver's own,
// then the connections it closes.
func (m *member) ended(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.state != "joined" {
		return
	}
	m.state, m.reason = "failed", reason
}

// midOf is the section s's track was given, once negotiated.
func (m *member) midOf(s *webrtc.RTPSender) string {
	m.mu.Lock()
	pcs := m.pcs
	m.mu.Unlock()
	for _, pc := range pcs {
		for _, tr := range pc.GetTransceivers() {
			if tr.Sender() == s {
				return tr.Mid()
			}
		}
	}
	return ""
}

func (m *member) receive(from string, t *webrtc.TrackRemote, c *clip) {
	if from == "" || from == m.user {
		// Not a participant's (an SFU's probation stream) or our own echoed back: read and
		// dropped, but read, because the SFU wants feedback on these packets too, as a
		// browser gives it, and the interceptors see only what is read.
		m.fast.register(t, nil)
		go drain(t)
		return
	}
	in := newInbound(from, t, c, &series{})
	in.askKey = m.keyframeRequest(t)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	in.video.follow(m.camera.following())
	m.inbound = append(m.inbound, in)
	m.mu.Unlock()
	m.fast.register(t, in)
	in.read(t) // what reaches pion before the fast path takes the stream over

}

// keyframeRequest asks the SFU for a keyframe of track t: a PLI on the
// connection that receives it.
func (m *member) keyframeRequest(t *webrtc.TrackRemote) func() {
	pli := []rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: uint32(t.SSRC())}}
	return func() {
		m.mu.Lock()
		pcs := slices.Clone(m.pcs)
		m.mu.Unlock()
		for _, pc := range pcs {
			for _, r := range pc.GetReceivers() {
				if r.Track() == t {
					_ = pc.WriteRTCP(pli)
					return
				}
			}
		}
	}
}

func (m *member) follow(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.camera.follow(on)
	for _, in := range m.inbound {
		if in.kind == "video" {
			in.video.follow(on)
		}
	}
}

// frames takes the followed frames since the last call: the member's own
// camera under its user id, each received video under its sender's.
func (m *member) frames() map[string]frames {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]frames{}
	if e := m.camera.take(); len(e) > 0 {
		out[m.user] = e
	}
	for _, in := range m.inbound {
		if e := in.video.take(); len(e) > 0 {
			out[in.peer] = append(out[in.peer], e...)
		}
	}
	return out
}

func (m *member) samples(now time.Time) []record {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != "joined" {
		return nil
	}
	var out []record
	var rtt any // a viewer sends nothing, so hears of no round trip
	if !m.watches {
		// What it receives crosses its own link to the SFU: the round trip
		// its audio's receiver reports give, as a browser gives its candidate
		// pair's for received streams (an audio stream's one-way delay in the
		// E-model is half of it plus the jitter buffer's).
		out = m.pub.samples(now)
		rtt = out[0]["rtt"]
	}
	for _, in := range m.inbound {
		s := in.sample(now)
		s["rtt"] = rtt
		out = append(out, s)
	}
	return out
}

func (m *member) status() (state, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state, m.reason
}

// close leaves: the session's connections close, which ends every reader.
func (m *member) close() {
	m.mu.Lock()
	m.closed = true
	sess, started := m.sess, m.state == "joined"
	m.mu.Unlock()
	if sess != nil {
		_ = sess.Close()
	}
	if started {
		m.pub.close()
	}
}

// drain reads a track until it ends.
func drain(t *webrtc.TrackRemote) {
	buf := make([]byte, 1500)
	for {
		if _, _, err := t.Read(buf); err != nil {
			return
		}
	}
}
