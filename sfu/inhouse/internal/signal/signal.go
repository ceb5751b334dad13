// Package signal is the in-house SFU's WebSocket JSON protocol.
//
// The server always makes the offers, so there is no glare: a client joins,
// then answers every offer it gets, in order.
//
//	client → server  {"type":"join","room":"1","user":"alice","layers":3}
//	server → client  {"type":"joined","room":"1","user":"alice"}
//	server → client  {"type":"offer","seq":1,"sdp":"v=0..."}
//	client → server  {"type":"answer","seq":1,"sdp":"v=0..."}
//	client → server  {"type":"layer","user":"bob","layer":"q"}
//	client → server  {"type":"leave"}
//	server → client  {"type":"error","code":"bad_request","message":"..."}
//
// Each remote participant's tracks arrive in a media stream whose id is that
// participant's user id. A join may ask to publish video in simulcast layers
// ("layers", 1-3, default 1): the offers then ask for them by rid, "q" (a
// quarter of the picture's size), "h" (half) and "f" (full), as many as
// asked, smallest first. A subscriber receives the largest layer a publisher
// sends unless it asks for another ("layer").
package signal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Error codes sent to clients.
const (
	CodeBadRequest = "bad_request" // the message is malformed or breaks the schema
	CodeBadState   = "bad_state"   // the message is fine but not expected now
	CodeRoomFull   = "room_full"
	CodeReplaced   = "replaced"    // the same user joined again from elsewhere
	CodeUserActive = "user_active" // a join for a user id whose session is live
	CodeRateLimit  = "rate_limited"
	CodeTimeout    = "timeout"
	CodeInternal   = "internal"
)

// MaxSDP bounds an answer's SDP; a room of 50 is about 120 kB.
const MaxSDP = 512 << 10

// Error is a protocol error, sent back to the client as an "error" message.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func badRequest(format string, args ...any) *Error {
	return &Error{Code: CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

// Join asks to enter a room; Layers is how many simulcast layers the
// client's video will be published in.
type Join struct {
	Room   string
	User   string
	Layers int
}

// Layer asks for one layer of a participant's video, by rid.
type Layer struct {
	User  string
	Layer string
}

// Rids are the layers' names, smallest first: a layer's index is its rid's.
var Rids = [...]string{"q", "h", "f"}

// Answer answers the offer with the same Seq.
type Answer struct {
	Seq uint64
	SDP string
}

// Leave ends the session.
type Leave struct{}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// wire is every field any client message may carry.
type wire struct {
	Type   *string         `json:"type"`
	Room   json.RawMessage `json:"room"`
	User   *string         `json:"user"`
	Seq    *uint64         `json:"seq"`
	SDP    *string         `json:"sdp"`
	Layers *int            `json:"layers"`
	Layer  *string         `json:"layer"`
}

// Decode parses and validates one client message. It returns a Join, an
// Answer or a Leave, or an *Error that says what is wrong.
func Decode(data []byte) (any, error) {
	var w wire
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, badRequest("not a JSON message of the protocol: %v", err)
	}
	if dec.More() {
		return nil, badRequest("trailing data after the message")
	}
	if w.Type == nil {
		return nil, badRequest(`missing "type"`)
	}
	allowed := map[string]bool{}
	var msg any
	switch *w.Type {
	case "join":
		allowed["room"], allowed["user"], allowed["layers"] = true, true, true
		room, err := decodeRoom(w.Room)
		if err != nil {
			return nil, err
		}
		if w.User == nil || !idPattern.MatchString(*w.User) {
			return nil, badRequest(`"user" must be 1-64 characters of A-Z a-z 0-9 _ . -`)
		}
		layers := 1
		if w.Layers != nil {
			if layers = *w.Layers; layers < 1 || layers > len(Rids) {
				return nil, badRequest(`"layers" must be 1 to %d`, len(Rids))
			}
		}
		msg = Join{Room: room, User: *w.User, Layers: layers}
	case "layer":
		allowed["user"], allowed["layer"] = true, true
		if w.User == nil || !idPattern.MatchString(*w.User) {
			return nil, badRequest(`"user" must be 1-64 characters of A-Z a-z 0-9 _ . -`)
		}
		if w.Layer == nil || LayerIndex(*w.Layer) < 0 {
			return nil, badRequest(`"layer" must be one of %q`, Rids)
		}
		msg = Layer{User: *w.User, Layer: *w.Layer}
	case "answer":
		allowed["seq"], allowed["sdp"] = true, true
		if w.Seq == nil || *w.Seq == 0 {
			return nil, badRequest(`"seq" must be the positive number of the offer answered`)
		}
		if w.SDP == nil || !strings.HasPrefix(*w.SDP, "v=0") {
			return nil, badRequest(`"sdp" must be a session description starting with v=0`)
		}
		if len(*w.SDP) > MaxSDP {
			return nil, badRequest(`"sdp" is longer than %d bytes`, MaxSDP)
		}
		msg = Answer{Seq: *w.Seq, SDP: *w.SDP}
	case "leave":
		msg = Leave{}
	default:
		return nil, badRequest("unknown message type %q", *w.Type)
	}
	for name, present := range map[string]bool{"room": w.Room != nil, "user": w.User != nil, "seq": w.Seq != nil,
		"sdp": w.SDP != nil, "layers": w.Layers != nil, "layer": w.Layer != nil} {
		if present && !allowed[name] {
			return nil, badRequest("%q is not a field of a %q message", name, *w.Type)
		}
	}
	return msg, nil
}

// LayerIndex is the index of the layer rid names, or -1.
func LayerIndex(rid string) int {
	for i, r := range Rids {
		if r == rid {
			return i
		}
	}
	return -1
}

// decodeRoom accepts the room as an id string or as a non-negative integer,
// since a page passes its URL parameter either way.
func decodeRoom(raw json.RawMessage) (string, error) {
	bad := badRequest(`"room" must be a non-negative integer or 1-64 characters of A-Z a-z 0-9 _ . -`)
	if raw == nil {
		return "", bad
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if !idPattern.MatchString(s) {
			return "", bad
		}
		return s, nil
	}
	n, err := strconv.ParseUint(string(raw), 10, 63)
	if err != nil {
		return "", bad
	}
	return strconv.FormatUint(n, 10), nil
}

// Server messages.

type Joined struct {
	Type string `json:"type"`
	Room string `json:"room"`
	User string `json:"user"`
}

type Offer struct {
	Type string `json:"type"`
	Seq  uint64 `json:"seq"`
	SDP  string `json:"sdp"`
}

type ErrorMessage struct {
	Type string `json:"type"`
	Error
}

// Encode marshals a server message.
func Encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("signal: unencodable server message: " + err.Error())
	}
	return b
}

// EncodeError builds the "error" message for err.
func EncodeError(err error) []byte {
	e, ok := err.(*Error)
	if !ok {
		e = &Error{Code: CodeInternal, Message: err.Error()}
	}
	return Encode(ErrorMessage{Type: "error", Error: *e})
}
