package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/webrtc/v4"
)

// The Janus WebSocket API as the videoroom driver (janus.go) uses it: one
// connection per participant, requests and their replies, the videoroom
// plugin's messages.

// janusConn is one WebSocket to Janus: requests matched to their replies by
// transaction, everything else handed to onEvent (from the reader goroutine,
// which it must not block).
type janusConn struct {
	ws      *websocket.Conn
	wmu     sync.Mutex
	session atomic.Uint64
	onEvent func(janusMsg)

	mu      sync.Mutex
	pending map[string]chan janusMsg
	next    uint64
	done    chan struct{}
}

type janusMsg struct {
	Janus       string `json:"janus"`
	Transaction string `json:"transaction"`
	Sender      uint64 `json:"sender"`
	Data        struct {
		ID uint64 `json:"id"`
	} `json:"data"`
	Error *struct {
		Code   int    `json:"code"`
		Reason string `json:"reason"`
	} `json:"error"`
	PluginData struct {
		Data json.RawMessage `json:"data"`
	} `json:"plugindata"`
	JSEP      *janusJSEP `json:"jsep"`
	Candidate *struct {
		webrtc.ICECandidateInit
		Completed bool `json:"completed"`
	} `json:"candidate"`
}

type janusJSEP struct {
	Type    string `json:"type"`
	SDP     string `json:"sdp"`
	Trickle *bool  `json:"trickle,omitempty"`
	// RidOrder says how an offer lists its simulcast layers: Janus takes
	// them largest first (janus.js's "hml") unless told "lmh".
	RidOrder string `json:"rid_order,omitempty"`
}

type janusPublisher struct {
	ID      uint64 `json:"id"`
	Display string `json:"display"`
}

type videoroomData struct {
	Videoroom  string           `json:"videoroom"`
	ErrorCode  int              `json:"error_code"`
	Error      string           `json:"error"`
	PrivateID  uint64           `json:"private_id"`
	Publishers []janusPublisher `json:"publishers"`
	Streams    []struct {
		Mid         string `json:"mid"`
		Type        string `json:"type"`
		FeedDisplay string `json:"feed_display"`
	} `json:"streams"`
}

func dialJanus(ctx context.Context, url string, onEvent func(janusMsg)) (*janusConn, error) {
	d := websocket.Dialer{Subprotocols: []string{"janus-protocol"}, HandshakeTimeout: 10 * time.Second}
	ws, _, err := d.DialContext(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	c := &janusConn{ws: ws, onEvent: onEvent, pending: map[string]chan janusMsg{}, done: make(chan struct{})}
	go c.read()
	return c, nil
}

func (c *janusConn) read() {
	defer close(c.done)
	for {
		var m janusMsg
		if err := c.ws.ReadJSON(&m); err != nil {
			return
		}
		c.mu.Lock()
		ch := c.pending[m.Transaction]
		c.mu.Unlock()
		switch {
		case ch != nil:
			ch <- m
		default:
			c.onEvent(m)
		}
	}
}

func (c *janusConn) close() {
	_ = c.ws.Close()
	<-c.done
}

// call sends req on the session and waits for its reply: "success" for
// Janus requests, the plugin's "event" for asynchronous plugin requests,
// "ack" for keepalives. An "error" reply is returned as one.
func (c *janusConn) call(ctx context.Context, req map[string]any, reply *janusMsg, handle *uint64) error {
	c.mu.Lock()
	c.next++
	tx := strconv.FormatUint(c.next, 10)
	ch := make(chan janusMsg, 4)
	c.pending[tx] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, tx)
		c.mu.Unlock()
	}()
	req["transaction"] = tx
	if id := c.session.Load(); id != 0 {
		req["session_id"] = id
	}
	if handle != nil {
		req["handle_id"] = *handle
	}
	// Not WriteJSON: Janus rejects the newline it appends.
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	err = c.ws.WriteMessage(websocket.TextMessage, b)
	c.wmu.Unlock()
	if err != nil {
		return err
	}
	ackIsReply := req["janus"] == "keepalive"
	for {
		select {
		case m := <-ch:
			if m.Janus == "ack" && !ackIsReply {
				continue
			}
			if m.Error != nil {
				return fmt.Errorf("janus error %d: %s", m.Error.Code, m.Error.Reason)
			}
			if req["janus"] == "create" {
				c.session.Store(m.Data.ID)
			}
			if reply != nil {
				*reply = m
			}
			return nil
		case <-c.done:
			return errors.New("janus closed the connection")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *janusConn) attach(ctx context.Context) (uint64, error) {
	var m janusMsg
	if err := c.call(ctx, map[string]any{"janus": "attach", "plugin": "janus.plugin.videoroom"}, &m, nil); err != nil {
		return 0, fmt.Errorf("attach videoroom: %w", err)
	}
	return m.Data.ID, nil
}

// message sends a videoroom request (with a description when jsep is set)
// and decodes the plugin's reply into data and the description Janus
// returned into answer, either of which may be nil. A plugin error is
// returned as an error with data still filled in.
func (c *janusConn) message(ctx context.Context, handle uint64, body map[string]any, jsep *janusJSEP, data *videoroomData, answer *janusJSEP) error {
	req := map[string]any{"janus": "message", "body": body}
	if jsep != nil {
		req["jsep"] = jsep
	}
	var m janusMsg
	if err := c.call(ctx, req, &m, &handle); err != nil {
		return err
	}
	var d videoroomData
	if err := json.Unmarshal(m.PluginData.Data, &d); err != nil {
		return fmt.Errorf("videoroom reply: %w", err)
	}
	if data != nil {
		*data = d
	}
	if answer != nil && m.JSEP != nil {
		*answer = *m.JSEP
	}
	if d.ErrorCode != 0 {
		return fmt.Errorf("videoroom error %d: %s", d.ErrorCode, d.Error)
	}
	return nil
}
