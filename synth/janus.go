package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/webrtc/v4"
)

// janusDriver speaks the Janus WebSocket API to the videoroom plugin as a
// Janus 1.x multistream client does. Per participant: one session; a
// publisher handle whose PeerConnection sends both tracks; one subscriber
// handle whose PeerConnection carries every remote feed, grown by "update"
// renegotiations as publishers arrive. That is two PeerConnections per
// participant, close to the in-house SFU's one, so the comparison measures
// forwarding rather than per-connection overhead.
type janusDriver struct{}

// janusKeepalive stays well inside Janus's default 60 s session timeout.
const janusKeepalive = 25 * time.Second

func (janusDriver) Join(ctx context.Context, p Participant) (Session, error) {
	url, err := server(p)
	if err != nil {
		return nil, err
	}
	room, err := strconv.ParseUint(p.Room, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("janus rooms are numbers, got %q", p.Room)
	}
	s := &janusSession{p: p, room: room, stop: make(chan struct{}), wake: make(chan struct{}, 1),
		subscribed: map[uint64]bool{}, mids: map[string]string{}}
	if s.c, err = dialJanus(ctx, url, s.event); err != nil {
		return nil, err
	}
	if err := s.publish(ctx); err != nil {
		s.Close()
		return nil, err
	}
	s.wg.Go(s.keepalive)
	s.wg.Go(s.subscribeLoop)
	s.wg.Go(s.watchSignalling)
	return s, nil
}

// watchSignalling ends the session when Janus's WebSocket closes without
// our leaving, as janus.js reports a lost connection at once: the media
// connections would otherwise fail only at ICE's timeout, half a minute on.
func (s *janusSession) watchSignalling() {
	select {
	case <-s.stop:
	case <-s.c.done:
		select {
		case <-s.stop:
		default:
			s.p.Ended(errors.New("lost the connection to the server"))
		}
	}
}

type janusSession struct {
	c    *janusConn
	p    Participant
	room uint64
	stop chan struct{}
	wake chan struct{}
	wg   sync.WaitGroup

	pub, sub   janusPeer
	privateID  uint64
	closeOnce  sync.Once
	subHandle  atomic.Uint64
	pubHandle  atomic.Uint64
	mu         sync.Mutex
	subscribed map[uint64]bool // feed ids asked for or already in the subscriber connection
	newFeeds   []uint64
	offers     []janusOffer
	mids       map[string]string // subscriber connection's mid → publisher's display name (user id)
}

// janusPeer is one PeerConnection with the candidates Janus trickled before
// its remote description was set.
type janusPeer struct {
	mu     sync.Mutex
	pc     *webrtc.PeerConnection
	ready  bool
	queued []webrtc.ICECandidateInit
}

func (p *janusPeer) candidate(c webrtc.ICECandidateInit) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ready {
		p.queued = append(p.queued, c)
		return
	}
	_ = p.pc.AddICECandidate(c)
}

func (p *janusPeer) setRemote(sd webrtc.SessionDescription) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.pc.SetRemoteDescription(sd); err != nil {
		return err
	}
	p.ready = true
	for _, c := range p.queued {
		_ = p.pc.AddICECandidate(c)
	}
	p.queued = nil
	return nil
}

func (p *janusPeer) close() {
	p.mu.Lock()
	pc := p.pc
	p.mu.Unlock()
	if pc != nil {
		_ = pc.Close()
	}
}

// localDescription sets d and waits for every candidate, so Janus gets a
// complete description and needs no trickle from us.
func localDescription(ctx context.Context, pc *webrtc.PeerConnection, d webrtc.SessionDescription) (*janusJSEP, error) {
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(d); err != nil {
		return nil, err
	}
	select {
	case <-gathered:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l := pc.LocalDescription()
	return &janusJSEP{Type: l.Type.String(), SDP: l.SDP, Trickle: new(false)}, nil
}

func (s *janusSession) publish(ctx context.Context) error {
	if err := s.c.call(ctx, map[string]any{"janus": "create"}, nil, nil); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	h, err := s.c.attach(ctx)
	if err != nil {
		return err
	}
	s.pubHandle.Store(h)
	// The room as the client page creates it, whoever comes first.
	create := map[string]any{"request": "create", "room": s.room, "publishers": 64, "audiocodec": "opus",
		"videocodec": s.p.Codec, "notify_joining": false, "permanent": false}
	if b, _ := strconv.ParseInt(s.p.Params["bitrate"], 10, 64); b > 0 {
		create["bitrate"] = b
	}
	var created videoroomData
	err = s.c.message(ctx, h, create, nil, &created, nil)
	if err != nil && created.ErrorCode != 427 {
		return fmt.Errorf("create room %d: %w", s.room, err)
	}
	var joined videoroomData
	err = s.c.message(ctx, h, map[string]any{"request": "join", "room": s.room, "ptype": "publisher", "display": s.p.User}, nil, &joined, nil)
	if err != nil {
		return fmt.Errorf("join room %d: %w", s.room, err)
	}
	s.privateID = joined.PrivateID
	s.addFeeds(joined.Publishers)
	if len(s.p.Tracks) == 0 {
		return nil // a viewer: in the room to hear of its publishers, as janus.js's subscriber mode is
	}

	pc, err := s.p.NewPeerConnection()
	if err != nil {
		return err
	}
	s.pub.mu.Lock()
	s.pub.pc = pc
	s.pub.mu.Unlock()
	for _, t := range s.p.Tracks {
		tr, err := pc.AddTransceiverFromTrack(t, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionSendonly})
		if err == nil {
			err = s.p.addLayers(tr.Sender())
		}
		if err != nil {
			return fmt.Errorf("adding %s track: %w", t.Kind(), err)
		}
		s.p.Publishing(tr.Sender())
	}
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		return err
	}
	jsep, err := localDescription(ctx, pc, offer)
	if err != nil {
		return err
	}
	jsep.RidOrder = "lmh" // client.Rids: the smallest layer first
	var answer janusJSEP
	if err := s.c.message(ctx, h, map[string]any{"request": "configure", "audio": true, "video": true}, jsep, nil, &answer); err != nil {
		return fmt.Errorf("configure: %w", err)
	}
	if answer.SDP == "" {
		return errors.New("configure: no answer from Janus")
	}
	return s.pub.setRemote(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: answer.SDP})
}

// event takes what Janus sends unasked: its trickled candidates, the
// publishers that join the room after us, and the offers it makes on the
// subscriber connection when a publisher leaves (its sections go inactive,
// to be reused for the next feed: an offer left unanswered would hold up
// every later subscription).
func (s *janusSession) event(m janusMsg) {
	var peer *janusPeer
	switch m.Sender {
	case s.pubHandle.Load():
		peer = &s.pub
	case s.subHandle.Load():
		peer = &s.sub
	default:
		return
	}
	switch m.Janus {
	case "trickle":
		if m.Candidate != nil && !m.Candidate.Completed {
			peer.candidate(m.Candidate.ICECandidateInit)
		}
	case "event":
		var d videoroomData
		if json.Unmarshal(m.PluginData.Data, &d) != nil {
			return
		}
		if peer == &s.pub {
			s.addFeeds(d.Publishers)
		} else if m.JSEP != nil && m.JSEP.Type == "offer" {
			s.mu.Lock()
			s.offers = append(s.offers, janusOffer{*m.JSEP, d})
			s.mu.Unlock()
			s.poke()
		}
	}
}

// janusOffer is an offer Janus made on its own, with the streams it lists.
type janusOffer struct {
	jsep janusJSEP
	data videoroomData
}

func (s *janusSession) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *janusSession) addFeeds(ps []janusPublisher) {
	s.mu.Lock()
	added := false
	for _, p := range ps {
		if !s.subscribed[p.ID] {
			s.subscribed[p.ID] = true
			s.newFeeds = append(s.newFeeds, p.ID)
			added = true
		}
	}
	s.mu.Unlock()
	if added {
		s.poke()
	}
}

// subscribeLoop answers Janus's own offers and adds new feeds to the
// subscriber connection, one renegotiation at a time, batching the feeds
// that arrive meanwhile.
func (s *janusSession) subscribeLoop() {
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		}
		s.mu.Lock()
		feeds, offers := s.newFeeds, s.offers
		s.newFeeds, s.offers = nil, nil
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		var err error
		for _, o := range offers {
			if err = s.answer(ctx, s.subHandle.Load(), o.jsep, o.data); err != nil {
				break
			}
		}
		if err == nil && len(feeds) > 0 {
			err = s.subscribe(ctx, feeds)
		}
		cancel()
		if err != nil {
			select {
			case <-s.stop:
			default:
				fmt.Fprintf(os.Stderr, "janus: %s subscribing to %d feeds: %v\n", s.p.User, len(feeds), err)
			}
		}
	}
}

func (s *janusSession) subscribe(ctx context.Context, feeds []uint64) error {
	streams := make([]map[string]any, len(feeds))
	for i, f := range feeds {
		streams[i] = map[string]any{"feed": f}
	}
	h := s.subHandle.Load()
	body := map[string]any{"request": "update", "subscribe": streams}
	if h == 0 {
		pc, err := s.p.NewPeerConnection()
		if err != nil {
			return err
		}
		pc.OnTrack(func(t *webrtc.TrackRemote, r *webrtc.RTPReceiver) {
			for _, tr := range pc.GetTransceivers() {
				if tr.Receiver() == r {
					s.mu.Lock()
					user := s.mids[tr.Mid()]
					s.mu.Unlock()
					s.p.OnTrack(user, t)
					return
				}
			}
		})
		if h, err = s.c.attach(ctx); err != nil {
			pc.Close()
			return err
		}
		s.sub.mu.Lock()
		s.sub.pc = pc
		s.sub.mu.Unlock()
		s.subHandle.Store(h)
		body = map[string]any{"request": "join", "room": s.room, "ptype": "subscriber", "streams": streams, "private_id": s.privateID}
	}
	var d videoroomData
	var offer janusJSEP
	if err := s.c.message(ctx, h, body, nil, &d, &offer); err != nil {
		return err
	}
	if offer.SDP == "" {
		return nil
	}
	return s.answer(ctx, h, offer, d)
}

// answer takes an offer of Janus's on the subscriber connection, whose
// streams say which publisher each section now carries.
func (s *janusSession) answer(ctx context.Context, h uint64, offer janusJSEP, d videoroomData) error {
	s.mu.Lock()
	for _, st := range d.Streams {
		s.mids[st.Mid] = st.FeedDisplay
	}
	s.mu.Unlock()
	if err := s.sub.setRemote(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer.SDP}); err != nil {
		return err
	}
	answer, err := s.sub.pc.CreateAnswer(nil)
	if err != nil {
		return err
	}
	jsep, err := localDescription(ctx, s.sub.pc, answer)
	if err != nil {
		return err
	}
	if err := s.c.message(ctx, h, map[string]any{"request": "start", "room": s.room}, jsep, nil, nil); err != nil {
		return err
	}
	return s.askLayer(ctx, h, d)
}

// askLayer asks for the substream Participant.ReceiveLayer names (0 the
// smallest) of each video the offer's streams list, as the page does once a
// stream is set up.
func (s *janusSession) askLayer(ctx context.Context, h uint64, d videoroomData) error {
	substream, ok := s.p.receiveIndex()
	if !ok {
		return nil
	}
	var streams []map[string]any
	for _, st := range d.Streams {
		if st.Type == "video" && st.FeedDisplay != "" {
			streams = append(streams, map[string]any{"mid": st.Mid, "substream": substream})
		}
	}
	if len(streams) == 0 {
		return nil
	}
	return s.c.message(ctx, h, map[string]any{"request": "configure", "streams": streams}, nil, nil, nil)
}

func (s *janusSession) keepalive() {
	t := time.NewTicker(janusKeepalive)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = s.c.call(ctx, map[string]any{"janus": "keepalive"}, nil, nil)
			cancel()
		}
	}
}

func (s *janusSession) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		if s.c.session.Load() != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = s.c.call(ctx, map[string]any{"janus": "destroy"}, nil, nil)
			cancel()
		}
		s.c.close()
		s.wg.Wait()
		s.pub.close()
		s.sub.close()
	})
	return nil
}
