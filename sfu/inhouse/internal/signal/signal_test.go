package signal

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeAccepts(t *testing.T) {
	cases := []struct {
		in   string
		want any
	}{
		{`{"type":"join","room":"1","user":"alice"}`, Join{Room: "1", User: "alice", Layers: 1}},
		{`{"type":"join","room":"1","user":"alice","layers":3}`, Join{Room: "1", User: "alice", Layers: 3}},
		{`{"type":"layer","user":"bob","layer":"q"}`, Layer{User: "bob", Layer: "q"}},
		{`{"type":"join","room":42,"user":"r1-u.3_x"}`, Join{Room: "42", User: "r1-u.3_x", Layers: 1}},
		{`{"type":"answer","seq":3,"sdp":"v=0\r\no=- 1 2 IN IP4 0.0.0.0\r\n"}`, Answer{Seq: 3, SDP: "v=0\r\no=- 1 2 IN IP4 0.0.0.0\r\n"}},
		{`{"type":"leave"}`, Leave{}},
		{` {"user":"b","type":"join","room":"x"} `, Join{Room: "x", User: "b", Layers: 1}},
	}
	for _, c := range cases {
		got, err := Decode([]byte(c.in))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %#v, %v", c.in, got, err)
		}
	}
}

func TestDecodeRejectsWithClearErrors(t *testing.T) {
	cases := []struct{ in, mention string }{
		{``, "JSON"},
		{`garbage`, "JSON"},
		{`[]`, "JSON"},
		{`{}`, `"type"`},
		{`{"type":7}`, "JSON"},
		{`{"type":"dance"}`, "unknown message type"},
		{`{"type":"join","user":"a"}`, `"room"`},
		{`{"type":"join","room":-1,"user":"a"}`, `"room"`},
		{`{"type":"join","room":1.5,"user":"a"}`, `"room"`},
		{`{"type":"join","room":null,"user":"a"}`, `"room"`},
		{`{"type":"join","room":"a b","user":"a"}`, `"room"`},
		{`{"type":"join","room":"1"}`, `"user"`},
		{`{"type":"join","room":"1","user":""}`, `"user"`},
		{`{"type":"join","room":"1","user":"` + strings.Repeat("x", 65) + `"}`, `"user"`},
		{`{"type":"join","room":"1","user":"<script>"}`, `"user"`},
		{`{"type":"join","room":"1","user":"a","sdp":"v=0"}`, `"sdp" is not a field`},
		{`{"type":"join","room":"1","user":"a","extra":1}`, "unknown field"},
		{`{"type":"answer","sdp":"v=0"}`, `"seq"`},
		{`{"type":"answer","seq":0,"sdp":"v=0"}`, `"seq"`},
		{`{"type":"answer","seq":-2,"sdp":"v=0"}`, "JSON"},
		{`{"type":"answer","seq":1}`, `"sdp"`},
		{`{"type":"answer","seq":1,"sdp":"hello"}`, `"sdp"`},
		{`{"type":"answer","seq":1,"sdp":"v=0` + strings.Repeat("a", MaxSDP) + `"}`, "longer"},
		{`{"type":"leave","user":"a"}`, `"user" is not a field`},
		{`{"type":"join","room":"1","user":"a","layers":4}`, `"layers"`},
		{`{"type":"join","room":"1","user":"a","layers":0}`, `"layers"`},
		{`{"type":"layer","user":"a","layer":"x"}`, `"layer"`},
		{`{"type":"layer","layer":"q"}`, `"user"`},
		{`{"type":"answer","seq":1,"sdp":"v=0","layer":"q"}`, `"layer" is not a field`},
		{`{"type":"leave"} {"type":"leave"}`, "trailing"},
	}
	for _, c := range cases {
		msg, err := Decode([]byte(c.in))
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeBadRequest {
			t.Errorf("%.60s: got %#v, %v; want a bad_request error", c.in, msg, err)
			continue
		}
		if !strings.Contains(e.Message, c.mention) {
			t.Errorf("%.60s: error %q does not mention %s", c.in, e.Message, c.mention)
		}
	}
}

func TestEncodeError(t *testing.T) {
	var got map[string]string
	if err := json.Unmarshal(EncodeError(&Error{Code: CodeRoomFull, Message: "full"}), &got); err != nil {
		t.Fatal(err)
	}
	if got["type"] != "error" || got["code"] != CodeRoomFull || got["message"] != "full" {
		t.Fatalf("%v", got)
	}
	if err := json.Unmarshal(EncodeError(errors.New("boom")), &got); err != nil || got["code"] != CodeInternal {
		t.Fatalf("%v %v", got, err)
	}
}

// reencode turns a decoded message back into a client message.
func reencode(msg any) []byte {
	switch m := msg.(type) {
	case Join:
		return Encode(map[string]string{"type": "join", "room": m.Room, "user": m.User})
	case Answer:
		return Encode(map[string]any{"type": "answer", "seq": m.Seq, "sdp": m.SDP})
	case Leave:
		return Encode(map[string]string{"type": "leave"})
	}
	panic("unknown message")
}

// FuzzDecode: no input panics, every error is a protocol error, and whatever
// is accepted survives a round trip. Seeds live in testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, err := Decode(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeBadRequest || e.Message == "" {
				t.Fatalf("error %#v is not a bad_request protocol error", err)
			}
			if msg != nil {
				t.Fatalf("message %#v returned with an error", msg)
			}
			return
		}
		again, err := Decode(reencode(msg))
		if err != nil || !reflect.DeepEqual(again, msg) {
			t.Fatalf("round trip of %#v gave %#v, %v", msg, again, err)
		}
	})
}
