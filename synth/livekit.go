package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/livekit/protocol/livekit"
	"github.com/pion/webrtc/v4"
	"google.golang.org/protobuf/proto"
)

// livekitDriver speaks LiveKit's signalling (protobuf over WebSocket) in its
// single-PeerConnection mode, the one livekit-client 2.x uses by default and
// so the one the adapter's page runs: the participant's join request carries
// its tracks and its offer; it stays the offerer, and when the server has
// more tracks to send than the connection has free receiving sections it
// says how many to add (MediaSectionsRequirement) and the participant
// offers again. Remote tracks arrive in streams named
// "<participant sid>|<track sid>"; participant updates name the sids.
type livekitDriver struct{}

// livekitProtocol is the signalling protocol version livekit-client 2.23
// announces; the server enables features (packed stream ids among them) by it.
const livekitProtocol = 17

// livekitLayers describe the video's layers as livekit-client does: one per
// rid, each rid's quality (q LOW, h MEDIUM, f HIGH); of SVC one per spatial
// layer, the largest first, none with an SSRC of its own.
func livekitLayers(p Participant, video webrtc.TrackLocal) []*livekit.VideoLayer {
	if n := p.SpatialLayers; n > 0 {
		var out []*livekit.VideoLayer
		for down := range n {
			out = append(out, &livekit.VideoLayer{Quality: min(livekit.VideoQuality_HIGH, livekit.VideoQuality(n-1)) - livekit.VideoQuality(down),
				Width: uint32(p.Width >> down), Height: uint32(p.Height >> down), SpatialLayer: int32(n - 1 - down)})
		}
		return out
	}
	if len(p.Encodings) == 0 {
		return []*livekit.VideoLayer{{Quality: livekit.VideoQuality_HIGH, Width: uint32(p.Width), Height: uint32(p.Height)}}
	}
	tracks := append([]webrtc.TrackLocal{video}, p.Encodings...)
	var out []*livekit.VideoLayer
	for i, t := range tracks {
		down := len(tracks) - 1 - i // halvings below the full picture
		out = append(out, &livekit.VideoLayer{Quality: livekit.VideoQuality_LOW + livekit.VideoQuality(i),
			Width: uint32(p.Width >> down), Height: uint32(p.Height >> down), Rid: t.RID()})
	}
	return out
}

func (livekitDriver) Join(ctx context.Context, p Participant) (Session, error) {
	base, err := server(p)
	if err != nil {
		return nil, err
	}
	token := p.Params["token"]
	if token == "" {
		return nil, errors.New(`no "token" client parameter`)
	}
	pc, err := p.NewPeerConnection()
	if err != nil {
		return nil, err
	}
	s := &livekitSession{p: p, pc: pc, names: map[string]string{}, named: make(chan struct{}),
		done: make(chan struct{}), renegotiate: make(chan struct{}, 1)}
	fail := func(err error) (Session, error) {
		s.Close()
		return nil, err
	}
	var adds []*livekit.AddTrackRequest
	for _, t := range p.Tracks {
		tr, err := pc.AddTransceiverFromTrack(t, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionSendonly})
		if err == nil {
			err = p.addLayers(tr.Sender())
		}
		if err != nil {
			return fail(fmt.Errorf("adding %s track: %w", t.Kind(), err))
		}
		p.Publishing(tr.Sender())
		add := &livekit.AddTrackRequest{Cid: t.ID(), Name: t.Kind().String(), Stream: "camera", DisableDtx: true}
		if t.Kind() == webrtc.RTPCodecTypeAudio {
			add.Type, add.Source = livekit.TrackType_AUDIO, livekit.TrackSource_MICROPHONE
		} else {
			add.Type, add.Source = livekit.TrackType_VIDEO, livekit.TrackSource_CAMERA
			add.Width, add.Height = uint32(p.Width), uint32(p.Height)
			add.Layers = livekitLayers(p, t)
			if p.SpatialLayers > 0 {
				// livekit-client names the codec of the stream's layers; without it LiveKit takes
				// each layer for a stream of its own (simulcast) and forwards the base alone
				add.SimulcastCodecs = []*livekit.SimulcastCodec{{Codec: p.Codec, Cid: t.ID(), Layers: add.Layers,
					VideoLayerMode: livekit.VideoLayer_MULTIPLE_SPATIAL_LAYERS_PER_STREAM}}
			}
		}
		adds = append(adds, add)
	}
	if len(p.Tracks) == 0 {
		// a viewer's offer has a section all the same: livekit-client's data channel, which
		// LiveKit refuses an offer without (STATE_MISMATCH)
		if _, err := pc.CreateDataChannel("_reliable", nil); err != nil {
			return fail(err)
		}
	}
	pc.OnTrack(func(t *webrtc.TrackRemote, _ *webrtc.RTPReceiver) { go s.track(t) })
	offer, err := s.offer(ctx)
	if err != nil {
		return fail(err)
	}
	join, err := proto.Marshal(&livekit.JoinRequest{
		ClientInfo:         &livekit.ClientInfo{Sdk: livekit.ClientInfo_GO, Protocol: livekitProtocol},
		ConnectionSettings: &livekit.ConnectionSettings{AutoSubscribe: true},
		AddTrackRequests:   adds,
		PublisherOffer:     offer,
	})
	if err != nil {
		return fail(err)
	}
	wrapped, err := proto.Marshal(&livekit.WrappedJoinRequest{JoinRequest: join})
	if err != nil {
		return fail(err)
	}
	q := url.Values{"access_token": {token}, "join_request": {base64.URLEncoding.EncodeToString(wrapped)}}
	if s.ws, _, err = websocket.DefaultDialer.DialContext(ctx, strings.TrimRight(base, "/")+"/rtc/v1?"+q.Encode(), nil); err != nil {
		return fail(fmt.Errorf("connecting to %s: %w", base, err))
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = s.ws.SetReadDeadline(dl)
	}
	// The join response comes first, then the answer to the offer it carried.
	for joined, answered := false, false; !joined || !answered; {
		res, err := s.read()
		if err != nil {
			return fail(err)
		}
		switch m := res.Message.(type) {
		case *livekit.SignalResponse_Join:
			joined = true
			s.ping = time.Duration(m.Join.PingInterval) * time.Second
			s.update(m.Join.OtherParticipants)
		case *livekit.SignalResponse_Answer:
			applied, err := s.answer(m.Answer)
			if err != nil {
				return fail(err)
			}
			answered = answered || applied
		case *livekit.SignalResponse_Leave:
			return fail(fmt.Errorf("the server refused the join: %s", m.Leave.Reason))
		default:
			if err := s.handle(res); err != nil {
				return fail(err)
			}
		}
	}
	_ = s.ws.SetReadDeadline(time.Time{})
	s.wg.Go(s.loop)
	s.wg.Go(s.negotiate)
	s.wg.Go(s.keepalive)
	return s, nil
}

type livekitSession struct {
	p      Participant
	pc     *webrtc.PeerConnection
	ws     *websocket.Conn
	wmu    sync.Mutex
	ping   time.Duration
	offers atomic.Uint32 // the latest offer's id

	mu      sync.Mutex
	names   map[string]string // participant sid → identity (the user id)
	named   chan struct{}     // closed and replaced whenever names grows or an answer is applied
	pending []webrtc.ICECandidateInit
	remote  bool // a remote description is set: candidates apply at once

	renegotiate chan struct{}
	owed        atomic.Bool // the server asked for an offer (MediaSectionsRequirement) not yet sent
	done        chan struct{}
	once        sync.Once
	wg          sync.WaitGroup
}

func (s *livekitSession) read() (*livekit.SignalResponse, error) {
	kind, b, err := s.ws.ReadMessage()
	if err != nil {
		return nil, err
	}
	res := &livekit.SignalResponse{}
	if kind == websocket.TextMessage {
		return res, nil // protobuf only: the JSON form is not asked for
	}
	if err := proto.Unmarshal(b, res); err != nil {
		return nil, fmt.Errorf("a signalling message: %w", err)
	}
	return res, nil
}

func (s *livekitSession) send(req *livekit.SignalRequest) error {
	b, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return s.ws.WriteMessage(websocket.BinaryMessage, b)
}

// handle takes what the server says after the join.
func (s *livekitSession) handle(res *livekit.SignalResponse) error {
	switch m := res.Message.(type) {
	case *livekit.SignalResponse_Answer:
		if applied, err := s.answer(m.Answer); err != nil || !applied {
			return err
		}
		s.ask() // a requirement that came while this offer was out still needs one
	case *livekit.SignalResponse_Trickle:
		var c webrtc.ICECandidateInit
		if err := json.Unmarshal([]byte(m.Trickle.CandidateInit), &c); err != nil {
			return nil
		}
		s.mu.Lock()
		if !s.remote {
			s.pending = append(s.pending, c)
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
		_ = s.pc.AddICECandidate(c)
	case *livekit.SignalResponse_Update:
		s.update(m.Update.Participants)
	case *livekit.SignalResponse_MediaSectionsRequirement:
		for range m.MediaSectionsRequirement.NumAudios {
			if _, err := s.pc.AddTransceiverFromKind(webrtc.RTPCodecTypeAudio, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
				return err
			}
		}
		for range m.MediaSectionsRequirement.NumVideos {
			if _, err := s.pc.AddTransceiverFromKind(webrtc.RTPCodecTypeVideo, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
				return err
			}
		}
		// An offer is owed even for no new section: the server assigns tracks to
		// sections it has and names them in its answer, as livekit-client's
		// addMediaSections then negotiate do.
		s.owed.Store(true)
		s.ask()
	case *livekit.SignalResponse_Leave:
		return fmt.Errorf("the server asked the participant to leave: %s", m.Leave.Reason)
	}
	return nil
}

func (s *livekitSession) update(ps []*livekit.ParticipantInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	grew := false
	for _, p := range ps {
		if _, ok := s.names[p.Sid]; !ok && p.Identity != "" {
			s.names[p.Sid], grew = p.Identity, true
		}
	}
	if grew {
		s.notify()
	}
}

// notify wakes the tracks waiting for their names (s.mu held).
func (s *livekitSession) notify() {
	close(s.named)
	s.named = make(chan struct{})
}

// track hands a received track on with its publisher's user id, waiting for
// the participant update that names it if the media came first, and for the
// answer that gives its stream: a track whose media came before the answer
// that declares it has no stream id yet.
func (s *livekitSession) track(t *webrtc.TrackRemote) {
	deadline := time.After(10 * time.Second)
	for {
		sid, _, _ := strings.Cut(t.StreamID(), "|")
		s.mu.Lock()
		name, ok := s.names[sid]
		named := s.named
		s.mu.Unlock()
		if ok {
			if i, ok := s.p.receiveIndex(); ok && t.Kind() == webrtc.RTPCodecTypeVideo {
				s.askLayer(t, livekit.VideoQuality(i))
			}
			s.p.OnTrack(name, t)
			return
		}
		select {
		case <-named:
		case <-deadline:
			s.p.OnTrack("", t)
			return
		case <-s.done:
			return
		}
	}
}

// askLayer asks for a quality of a received video, as livekit-client's
// setVideoQuality does.
func (s *livekitSession) askLayer(t *webrtc.TrackRemote, q livekit.VideoQuality) {
	_, track, _ := strings.Cut(t.StreamID(), "|")
	if err := s.send(&livekit.SignalRequest{Message: &livekit.SignalRequest_TrackSetting{TrackSetting: &livekit.UpdateTrackSettings{
		TrackSids: []string{track}, Quality: q}}}); err != nil {
		fmt.Fprintf(os.Stderr, "livekit: %s asking for quality %s of %s: %v\n", s.p.User, q, track, err)
	}
}

func (s *livekitSession) loop() {
	for {
		res, err := s.read()
		if err == nil {
			err = s.handle(res)
		}
		if err != nil {
			s.ended(err)
			return
		}
	}
}

// ended closes a session that ends without its owner asking, and says why
// to the engine and in the generator's log: otherwise only the missing
// videos tell (a conformance run once lost a participant 59 ms after it
// joined).
func (s *livekitSession) ended(err error) {
	select {
	case <-s.done:
	default:
		fmt.Fprintf(os.Stderr, "synth: %s (livekit): the session ended: %v\n", s.p.User, err)
		if s.p.Ended != nil {
			s.p.Ended(fmt.Errorf("the session ended: %w", err))
		}
	}
	s.Close()
}

// keepalive pings as often as the join response asks: the server drops a
// participant that stays silent past its ping timeout.
func (s *livekitSession) keepalive() {
	every := s.ping
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case now := <-t.C:
			ms := now.UnixMilli()
			if err := s.send(&livekit.SignalRequest{Message: &livekit.SignalRequest_PingReq{PingReq: &livekit.Ping{Timestamp: ms}}}); err != nil {
				s.ended(fmt.Errorf("a ping: %w", err))
				return
			}
		}
	}
}

func (s *livekitSession) Close() error {
	s.once.Do(func() {
		close(s.done)
		if s.ws != nil {
			_ = s.send(&livekit.SignalRequest{Message: &livekit.SignalRequest_Leave{Leave: &livekit.LeaveRequest{
				Reason: livekit.DisconnectReason_CLIENT_INITIATED}}})
			_ = s.ws.Close()
		}
		_ = s.pc.Close()
	})
	return nil
}
