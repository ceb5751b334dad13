package sfu

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/webrtc/v4"
)

func dial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// next reads the next server message, failing the test after 5 s.
func next(t *testing.T, ws *websocket.Conn) map[string]any {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, b, err := ws.ReadMessage()
	if err != nil {
		t.Fatalf("reading: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("server sent %q: %v", b, err)
	}
	return m
}

func expectError(t *testing.T, ws *websocket.Conn, code, mention string) {
	t.Helper()
	m := next(t, ws)
	if m["type"] != "error" || m["code"] != code || !strings.Contains(m["message"].(string), mention) {
		t.Fatalf("got %v, want a %s error mentioning %q", m, code, mention)
	}
}

func expectClosed(t *testing.T, ws *websocket.Conn) {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("connection still open")
			}
			return
		}
	}
}

func TestGarbageGetsClearErrors(t *testing.T) {
	s, url := startServer(t, func(c *Config) { c.MaxMessageBytes = 4096 })
	ws := dial(t, url)
	send := func(mt int, b string) {
		if err := ws.WriteMessage(mt, []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	send(websocket.BinaryMessage, "\x00\x01")
	expectError(t, ws, "bad_request", "text")
	send(websocket.TextMessage, "{{{{")
	expectError(t, ws, "bad_request", "JSON")
	send(websocket.TextMessage, `{"type":"answer","seq":1,"sdp":"v=0"}`)
	expectError(t, ws, "bad_state", "join first")
	send(websocket.TextMessage, `{"type":"join","room":"1","user":"a b"}`)
	expectError(t, ws, "bad_request", "user")
	send(websocket.TextMessage, `{"type":"join","room":"1","user":"alice"}`)
	if m := next(t, ws); m["type"] != "joined" {
		t.Fatalf("got %v", m)
	}
	offer := next(t, ws)
	if offer["type"] != "offer" || offer["seq"] != 1.0 {
		t.Fatalf("got %v", offer)
	}
	send(websocket.TextMessage, `{"type":"join","room":"1","user":"alice"}`)
	expectError(t, ws, "bad_state", "already joined")
	send(websocket.TextMessage, `{"type":"answer","seq":7,"sdp":"v=0"}`)
	expectError(t, ws, "bad_state", "outstanding offer (1)")
	send(websocket.TextMessage, `{"type":"answer","seq":1,"sdp":"v=0\r\nnonsense"}`)
	expectError(t, ws, "bad_request", "answer rejected")
	expectClosed(t, ws)

	ws = dial(t, url)
	send = func(mt int, b string) { _ = ws.WriteMessage(mt, []byte(b)) }
	send(websocket.TextMessage, `{"type":"leave","pad":"`+strings.Repeat("x", 5000)+`"}`)
	expectClosed(t, ws)

	ws = dial(t, url)
	for range maxBadMessages {
		send(websocket.TextMessage, "nope")
	}
	for range maxBadMessages - 1 {
		expectError(t, ws, "bad_request", "JSON")
	}
	expectError(t, ws, "bad_request", "too many")
	expectClosed(t, ws)

	waitFor(t, "sessions to end", 5*time.Second, func() bool { return s.Snapshot() == Snapshot{} })
	if s.m.badMessages.Load() < 8 {
		t.Errorf("counted %d bad messages", s.m.badMessages.Load())
	}
}

func TestTimeoutsFreeEverything(t *testing.T) {
	s, url := startServer(t, func(c *Config) {
		c.JoinTimeout = 300 * time.Millisecond
		c.AnswerTimeout = 300 * time.Millisecond
		c.ConnectTimeout = 500 * time.Millisecond
		c.PingInterval = 100 * time.Millisecond
		c.PongTimeout = 400 * time.Millisecond
	})
	t.Run("no join", func(t *testing.T) {
		ws := dial(t, url)
		expectError(t, ws, "timeout", "no join")
		expectClosed(t, ws)
	})
	t.Run("no answer", func(t *testing.T) {
		ws := dial(t, url)
		_ = ws.WriteJSON(map[string]string{"type": "join", "room": "1", "user": "a"})
		next(t, ws) // joined
		next(t, ws) // offer
		expectError(t, ws, "timeout", "no answer to offer 1")
		expectClosed(t, ws)
	})
	t.Run("no media connection", func(t *testing.T) {
		c := join(t, url, "1", "b", clientOptions{noUDP: true})
		defer c.close()
		select {
		case <-c.sess.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("session still up")
		}
		if err := c.sess.Err(); err == nil || !strings.Contains(err.Error(), "media not connected") {
			t.Fatalf("session ended with %v", err)
		}
	})
	waitFor(t, "sessions to end", 5*time.Second, func() bool { return s.Snapshot() == Snapshot{} })
	if n := s.m.closed[closeTimeout].Load(); n != 3 {
		t.Errorf("%d sessions closed by timeout, want 3", n)
	}
}

func TestSilentClientIsDropped(t *testing.T) {
	s, url := startServer(t, func(c *Config) {
		c.PingInterval = 100 * time.Millisecond
		c.PongTimeout = 400 * time.Millisecond
	})
	ws := dial(t, url)
	_ = ws.WriteJSON(map[string]string{"type": "join", "room": "1", "user": "a"})
	// Never reading means never answering pings. The room may not exist yet
	// when the wait starts, so wait for an ended session, not an empty server.
	waitFor(t, "the silent session to be dropped", 5*time.Second, func() bool {
		var ended uint64
		for i := range s.m.closed {
			ended += s.m.closed[i].Load()
		}
		return ended > 0
	})
	if s.m.closed[closeTimeout].Load() != 1 {
		t.Error("not counted as a timeout")
	}
	waitFor(t, "the server to be empty", 5*time.Second, func() bool { return s.Snapshot() == Snapshot{} })
}

// holeConn is a UDP socket that can be made to swallow every write, as when
// a participant's machine vanishes without a goodbye.
type holeConn struct {
	net.PacketConn
	dead atomic.Bool
}

func (h *holeConn) WriteTo(b []byte, a net.Addr) (int, error) {
	if h.dead.Load() {
		return len(b), nil
	}
	return h.PacketConn.WriteTo(b, a)
}

func TestVanishedPeerIsDropped(t *testing.T) {
	s, url := startServer(t, func(c *Config) {
		c.ICEDisconnectedTimeout = 500 * time.Millisecond
		c.ICEFailedTimeout = 500 * time.Millisecond
		c.ICEKeepalive = 200 * time.Millisecond
	})
	stay := join(t, url, "1", "stay", clientOptions{})
	stay.publish()
	defer stay.close()
	uc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hole := &holeConn{PacketConn: uc}
	gone := join(t, url, "1", "gone", clientOptions{conn: hole})
	gone.publish()
	defer gone.close()
	waitFor(t, "media both ways", 10*time.Second, func() bool {
		return gone.received("stay", "video") > 5 && stay.received("gone", "video") > 5
	})
	hole.dead.Store(true)
	waitFor(t, "the vanished peer to be dropped", 10*time.Second, func() bool {
		return s.Snapshot() == Snapshot{Rooms: 1, Peers: 1, Tracks: 2}
	})
	if s.m.closed[closeICE].Load() != 1 {
		t.Error("not counted as an ICE failure")
	}
	if st := stay.pc.ConnectionState(); st != webrtc.PeerConnectionStateConnected {
		t.Errorf("the remaining participant is %v", st)
	}
}

func dialWith(url string, header http.Header) (*websocket.Conn, int, error) {
	ws, resp, err := websocket.DefaultDialer.Dial(url, header)
	if resp != nil {
		return ws, resp.StatusCode, err
	}
	return ws, 0, err
}

func TestOriginsOutsideTheListAreRefused(t *testing.T) {
	s, url := startServer(t, func(c *Config) { c.AllowOrigins = []string{"127.0.0.9", "https://pages.example:8443"} })
	for origin, ok := range map[string]bool{
		"":                           true, // not a browser
		"http://127.0.0.9:41234":     true, // a bare host allows any port
		"https://pages.example:8443": true,
		"http://pages.example:8443":  false, // another scheme
		"http://evil.example":        false,
		"null":                       false,
	} {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		ws, status, err := dialWith(url, h)
		if ok != (err == nil) {
			t.Errorf("origin %q: err %v, status %d", origin, err, status)
		}
		if err == nil {
			ws.Close()
		} else if status != http.StatusForbidden {
			t.Errorf("origin %q refused with %d", origin, status)
		}
	}
	if s.m.refused[refusedOrigin].Load() != 3 {
		t.Errorf("%d refusals counted", s.m.refused[refusedOrigin].Load())
	}
}

func TestConnectionsAndRoomsAreBounded(t *testing.T) {
	_, url := startServer(t, func(c *Config) { c.MaxPeers = 2; c.MaxRooms = 1 })
	a, b := dial(t, url), dial(t, url)
	if _, status, err := dialWith(url, nil); err == nil || status != http.StatusServiceUnavailable {
		t.Fatalf("a third connection: %v, %d", err, status)
	}
	_ = a.WriteJSON(map[string]string{"type": "join", "room": "1", "user": "a"})
	if m := next(t, a); m["type"] != "joined" {
		t.Fatalf("got %v", m)
	}
	_ = b.WriteJSON(map[string]string{"type": "join", "room": "2", "user": "b"})
	expectError(t, b, "room_full", "no room for another room")
}

func TestALiveUserIdIsNotTakenOver(t *testing.T) {
	_, url := startServer(t, nil)
	first, second := dial(t, url), dial(t, url)
	_ = first.WriteJSON(map[string]string{"type": "join", "room": "1", "user": "a"})
	if m := next(t, first); m["type"] != "joined" {
		t.Fatalf("got %v", m)
	}
	_ = second.WriteJSON(map[string]string{"type": "join", "room": "1", "user": "a"})
	expectError(t, second, "user_active", "live session")
	if m := next(t, first); m["type"] != "offer" {
		t.Fatalf("the first session was disturbed: %v", m)
	}

	_, url = startServer(t, func(c *Config) { c.ReplaceSessions = true })
	first, second = dial(t, url), dial(t, url)
	_ = first.WriteJSON(map[string]string{"type": "join", "room": "1", "user": "a"})
	next(t, first)
	_ = second.WriteJSON(map[string]string{"type": "join", "room": "1", "user": "a"})
	if m := next(t, second); m["type"] != "joined" {
		t.Fatalf("got %v", m)
	}
	next(t, first) // its offer
	expectError(t, first, "replaced", "joined again")
}

func TestMessageFloodsAreCutOff(t *testing.T) {
	s, url := startServer(t, func(c *Config) { c.MessageRate = 5; c.MessageBurst = 10 })
	ws := dial(t, url)
	_ = ws.WriteJSON(map[string]string{"type": "join", "room": "1", "user": "a"})
	next(t, ws) // joined
	for range 30 {
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"answer","seq":99,"sdp":"v=0"}`)); err != nil {
			break
		}
	}
	for {
		m := next(t, ws)
		if m["type"] == "error" && m["code"] == "rate_limited" {
			break
		}
	}
	expectClosed(t, ws)
	waitFor(t, "the session to end", 5*time.Second, func() bool { return s.m.closed[closeRate].Load() == 1 })
}

func TestMetricsAnswerPrivateAddressesOnly(t *testing.T) {
	s, _ := startServer(t, nil)
	h := s.Handler()
	for addr, want := range map[string]int{"127.0.0.1:5000": 200, "10.1.2.3:5000": 200, "[fe80::1]:5000": 200,
		"8.8.8.8:5000": 403, "[2001:db8::1]:5000": 403} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.RemoteAddr = addr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("%s: %d, want %d", addr, w.Code, want)
		}
	}
}
