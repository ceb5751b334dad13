package sfu

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/internal/signal"
)

type closeReason int

const (
	closeLeft closeReason = iota
	closeSocket
	closeICE
	closeTimeout
	closeReplaced
	closeError
	closeSlow
	closeShutdown
	closeRate
	numCloseReasons
)

var closeReasonNames = [numCloseReasons]string{
	"left", "socket_closed", "ice_failed", "timeout", "replaced", "protocol_error", "slow_client", "shutdown",
	"rate_limited",
}

// maxBadMessages is how many invalid messages a client may send before it
// is disconnected; each one is answered with an error.
const maxBadMessages = 10

// peer is one participant: its WebSocket and its PeerConnection, which
// carries its two published tracks and one subscription per remote track.
type peer struct {
	s    *Server
	ws   *websocket.Conn
	out  chan []byte
	quit chan struct{} // closed when the session ends; the writer then says goodbye
	done chan struct{} // closed when every resource is released
	once sync.Once

	user string
	pc   *webrtc.PeerConnection
	in   *directIn // its received media
	room *room     // guarded by s.mu

	mu       sync.Mutex
	closed   bool
	offerSeq uint64 // last offer sent
	awaiting uint64 // offer waiting for its answer, 0 if none
	pending  bool   // changes made while an offer was out
	subs     map[*pubTrack]*subTrack
	pubs     []*pubTrack
	// layers is how many simulcast layers the participant publishes its
	// video in, pubVideo the section it publishes it into, and published
	// its tracks by receiver (a simulcast track's layers share one).
	layers    int
	pubVideo  *webrtc.RTPTransceiver
	published map[*webrtc.RTPReceiver]*pubTrack
	// freeing holds transceivers of ended subscriptions until an answer
	// confirms them inactive; free holds them after, for reuse, so a
	// long-lived participant's SDP does not grow with every join.
	freeing      []freed
	free         [2][]*webrtc.RTPTransceiver
	answerTimer  *time.Timer
	connectTimer *time.Timer
}

func newPeer(s *Server, ws *websocket.Conn) *peer {
	return &peer{
		s: s, ws: ws,
		out:  make(chan []byte, 64),
		quit: make(chan struct{}),
		done: make(chan struct{}),
		subs: map[*pubTrack]*subTrack{}, published: map[*webrtc.RTPReceiver]*pubTrack{},
	}
}

func (p *peer) serve() {
	go p.writeLoop()
	reason, err := p.readLoop()
	p.close(reason, err)
}

func (p *peer) readLoop() (closeReason, error) {
	cfg := &p.s.cfg
	p.ws.SetReadLimit(cfg.MaxMessageBytes)
	_ = p.ws.SetReadDeadline(time.Now().Add(cfg.JoinTimeout))
	joined, bad := false, 0
	// A token bucket: MessageBurst messages at once, MessageRate a second on average.
	tokens, last := float64(cfg.MessageBurst), time.Now()
	p.ws.SetPongHandler(func(string) error {
		if joined {
			return p.ws.SetReadDeadline(time.Now().Add(cfg.PongTimeout))
		}
		return nil
	})
	for {
		mt, data, err := p.ws.ReadMessage()
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, websocket.ErrReadLimit):
				return closeError, &signal.Error{Code: signal.CodeBadRequest,
					Message: fmt.Sprintf("message longer than %d bytes", cfg.MaxMessageBytes)}
			case errors.As(err, &ne) && ne.Timeout() && !joined:
				return closeTimeout, &signal.Error{Code: signal.CodeTimeout,
					Message: fmt.Sprintf("no join within %v", cfg.JoinTimeout)}
			case errors.As(err, &ne) && ne.Timeout():
				return closeTimeout, nil
			}
			return closeSocket, nil
		}
		if joined {
			_ = p.ws.SetReadDeadline(time.Now().Add(cfg.PongTimeout))
		}
		var msg any
		if mt != websocket.TextMessage {
			err = &signal.Error{Code: signal.CodeBadRequest, Message: "messages are JSON text frames"}
		} else {
			msg, err = signal.Decode(data)
		}
		// Answers to the server's own offers are what it asked for, however busy the room;
		// everything else draws on the bucket.
		if a, ok := msg.(signal.Answer); !ok || !p.awaits(a.Seq) {
			now := time.Now()
			tokens = min(float64(cfg.MessageBurst), tokens+now.Sub(last).Seconds()*cfg.MessageRate)
			last = now
			if tokens < 1 {
				return closeRate, &signal.Error{Code: signal.CodeRateLimit,
					Message: fmt.Sprintf("more than %d messages at once or %g a second", cfg.MessageBurst, cfg.MessageRate)}
			}
			tokens--
		}
		switch m := msg.(type) {
		case signal.Join:
			if joined {
				err = &signal.Error{Code: signal.CodeBadState, Message: "already joined"}
				break
			}
			if err := p.join(m); err != nil {
				return closeError, err
			}
			joined = true
			_ = p.ws.SetReadDeadline(time.Now().Add(cfg.PongTimeout))
		case signal.Answer:
			if !joined {
				err = &signal.Error{Code: signal.CodeBadState, Message: "join first"}
				break
			}
			err = p.handleAnswer(m)
			var se *signal.Error
			if err != nil && (!errors.As(err, &se) || se.Code != signal.CodeBadState) {
				return closeError, err
			}
		case signal.Layer:
			if !joined {
				err = &signal.Error{Code: signal.CodeBadState, Message: "join first"}
				break
			}
			err = p.setLayer(m)
		case signal.Leave:
			return closeLeft, nil
		}
		if err != nil {
			p.s.m.badMessages.Add(1)
			if bad++; bad >= maxBadMessages {
				return closeError, &signal.Error{Code: signal.CodeBadRequest, Message: "too many invalid messages"}
			}
			p.send(signal.EncodeError(err))
		}
	}
}

// awaits says whether seq is the offer waiting for its answer.
func (p *peer) awaits(seq uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.awaiting != 0 && p.awaiting == seq
}

func (p *peer) writeLoop() {
	const writeWait = 5 * time.Second
	ping := time.NewTicker(p.s.cfg.PingInterval)
	defer ping.Stop()
	defer p.ws.Close()
	write := func(b []byte) error {
		_ = p.ws.SetWriteDeadline(time.Now().Add(writeWait))
		return p.ws.WriteMessage(websocket.TextMessage, b)
	}
	for {
		select {
		case b := <-p.out:
			if write(b) != nil {
				go p.close(closeSocket, nil)
			}
		case <-ping.C:
			if p.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)) != nil {
				go p.close(closeSocket, nil)
			}
		case <-p.quit:
			for {
				select {
				case b := <-p.out:
					if write(b) == nil {
						continue
					}
				default:
				}
				break
			}
			_ = p.ws.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			return
		}
	}
}

// send queues a message; a client too slow to take 64 is dropped.
func (p *peer) send(b []byte) {
	select {
	case p.out <- b:
	default:
		go p.close(closeSlow, nil)
	}
}

func (p *peer) join(j signal.Join) error {
	pc, direct, err := p.s.direct.NewPeerConnection(p.s.api, webrtc.Configuration{BundlePolicy: webrtc.BundlePolicyMaxBundle})
	if err != nil {
		return err
	}
	in := newDirectIn(pc)
	var pubVideo *webrtc.RTPTransceiver
	for _, k := range []webrtc.RTPCodecType{webrtc.RTPCodecTypeAudio, webrtc.RTPCodecTypeVideo} {
		tr, err := pc.AddTransceiverFromKind(k, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly})
		if err != nil {
			pc.Close()
			return err
		}
		pubVideo = tr
	}
	pc.OnTrack(p.onTrack)
	pc.OnConnectionStateChange(func(st webrtc.PeerConnectionState) {
		switch st {
		case webrtc.PeerConnectionStateConnected:
			p.mu.Lock()
			if p.connectTimer != nil {
				p.connectTimer.Stop()
			}
			p.mu.Unlock()
			if err := p.s.startDirect(pc, direct, in); err != nil {
				p.s.cfg.Log.Warn("pion's paths kept", "user", j.User, "err", err)
			}
		case webrtc.PeerConnectionStateFailed, webrtc.PeerConnectionStateClosed:
			p.close(closeICE, nil)
		}
	})
	p.mu.Lock()
	closed := p.closed
	p.user, p.pc, p.in, p.layers, p.pubVideo = j.User, pc, in, j.Layers, pubVideo
	p.mu.Unlock()
	if closed {
		in.close(p.s.reader)
		return pc.Close()
	}
	// "joined" is queued as the room admits p: a participant publishing
	// meanwhile would otherwise have its offer reach p first.
	tracks, replaced, err := p.s.join(p, j.Room, func() {
		p.send(signal.Encode(signal.Joined{Type: "joined", Room: j.Room, User: j.User}))
	})
	if err != nil {
		return err
	}
	if replaced != nil {
		replaced.close(closeReplaced, errReplaced)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.connectTimer = time.AfterFunc(p.s.cfg.ConnectTimeout, func() {
		if pc.ConnectionState() != webrtc.PeerConnectionStateConnected {
			p.close(closeTimeout, &signal.Error{Code: signal.CodeTimeout,
				Message: fmt.Sprintf("media not connected within %v", p.s.cfg.ConnectTimeout)})
		}
	})
	for _, t := range tracks {
		p.subscribeLocked(t)
	}
	p.negotiateLocked()
	return nil
}

// onTrack takes a track the participant publishes, or one simulcast layer of
// it: the first of its layers publishes it, the others join it.
func (p *peer) onTrack(tr *webrtc.TrackRemote, recv *webrtc.RTPReceiver) {
	layer := 0
	if rid := tr.RID(); rid != "" {
		if layer = signal.LayerIndex(rid); layer < 0 {
			return // a stream the SFU did not ask for
		}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	t, known := p.published[recv]
	if !known {
		t = newPubTrack(p, tr)
		p.published[recv] = t
		p.pubs = append(p.pubs, t)
	}
	src := t.addSource(tr, uint8(layer))
	p.in.add(src, recv)
	p.mu.Unlock()
	// The publisher's sender reports date the receiver reports.
	go func() {
		buf := make([]byte, 1500)
		for {
			n, _, err := recv.ReadSimulcast(buf, tr.RID())
			if err != nil {
				return
			}
			p.in.readRTCP(buf[:n], time.Now())
		}
	}()
	go src.run()
	if known {
		return
	}
	subs, ok := p.s.publish(t)
	if !ok {
		return
	}
	for _, q := range subs {
		q.subscribe(t)
	}
}

// close ends the session and releases everything it holds. err, if any, is
// sent to the client first.
func (p *peer) close(reason closeReason, err error) {
	p.once.Do(func() {
		p.s.m.closed[reason].Add(1)
		p.mu.Lock()
		p.closed = true
		subs, pubs, pc, in := p.subs, p.pubs, p.pc, p.in
		p.subs = nil
		for _, t := range []*time.Timer{p.answerTimer, p.connectTimer} {
			if t != nil {
				t.Stop()
			}
		}
		p.mu.Unlock()

		for t, s := range subs {
			t.fanout.Remove(s.dt)
		}
		tracks, others := p.s.leave(p)
		for _, q := range others {
			q.unsubscribe(tracks)
		}
		if in != nil {
			in.close(p.s.reader)
		}
		if pc != nil {
			_ = pc.Close()
		}
		// A sender added while pion was already closing the connection is
		// not among those pc.Close stops.
		for _, s := range subs {
			_ = s.sender.Stop()
		}
		for _, t := range pubs {
			t.wait()
		}
		if err != nil {
			select {
			case p.out <- signal.EncodeError(err):
			default:
			}
		}
		close(p.quit)
		close(p.done)
	})
}
