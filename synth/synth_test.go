package main

import (
	"encoding/json"
	"math"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/rtp/codecs"
	"golang.org/x/sys/unix"
)

// testClip encodes a second of test pattern and tone with the real ffmpeg,
// as the media step does (VP8 in IVF with a keyframe every 15 frames, Opus
// in Ogg in 20 ms packets): one layer, 160x96.
func testClip(t testing.TB) *clip {
	t.Helper()
	c, err := loadClip(encodeLayers(t, 15, "160x96"), encodeAudio(t), false)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// encodeLayers encodes the test pattern at each size, a keyframe every gop
// frames, and returns the IVF files.
func encodeLayers(t testing.TB, gop int, sizes ...string) []string {
	t.Helper()
	var out []string
	for _, size := range sizes {
		ivf := filepath.Join(t.TempDir(), size+".ivf")
		ffmpeg(t, "-f", "lavfi", "-i", "testsrc=size="+size+":rate=15", "-frames:v", "30", "-c:v", "libvpx", "-deadline",
			"realtime", "-b:v", "300k", "-g", strconv.Itoa(gop), "-keyint_min", strconv.Itoa(gop), "-auto-alt-ref", "0",
			"-lag-in-frames", "0", ivf)
		out = append(out, ivf)
	}
	return out
}

func encodeAudio(t testing.TB) string {
	t.Helper()
	ogg := filepath.Join(t.TempDir(), "a.ogg")
	ffmpeg(t, "-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-c:a", "libopus", "-frame_duration", "20", "-ar", "48000", ogg)
	return ogg
}

func ffmpeg(t testing.TB, args ...string) {
	t.Helper()
	cmd := exec.Command("ffmpeg", append([]string{"-v", "error", "-nostdin", "-y"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v\n%s", err, out)
	}
}

func TestClipIsReadAsEncoded(t *testing.T) {
	c := testClip(t)
	if l := c.full(); len(c.layers) != 1 || len(l.frames) != 30 || l.width != 160 || l.height != 96 {
		t.Fatalf("%d layers, the full one %d frames of %dx%d, want 1 of 30 frames of 160x96", len(c.layers), len(l.frames), l.width, l.height)
	}
	for i, want := range map[int]int{0: 0, 1: 15, 14: 15, 15: 15, 16: 0, 29: 0} {
		if c.nextKey[i] != want {
			t.Errorf("next keyframe after %d is %d, want %d (the clip loops)", i, c.nextKey[i], want)
		}
	}
	if len(c.codes) != 30 {
		t.Errorf("%d frames recognisable by their bytes, want all 30", len(c.codes))
	}
	// One second of audio in 20 ms packets, the header packets left out.
	if n := len(c.audio); n < 49 || n > 51 {
		t.Errorf("%d Opus packets, want 50", n)
	}
}

// packets are frame i of the clip as a VP8 packetizer sends it.
func packets(c *clip, pk rtp.Packetizer, i int) []*rtp.Packet {
	return pk.Packetize(c.full().frames[i], 6000)
}

func TestReceiverCountsRecognisesAndTimesFrames(t *testing.T) {
	c := testClip(t)
	video := &series{}
	video.follow(true)
	in := &inbound{peer: "r1u2", kind: "video", clock: 90000, clip: c, video: video}
	in.reads(vp8Codec)
	pk := rtp.NewPacketizer(mtu, 96, 1, &codecs.VP8Payloader{EnablePictureID: true}, rtp.NewFixedSequencer(1), 90000)
	at := epoch.Add(time.Second)
	send := func(i int, drop int) {
		for j, p := range packets(c, pk, i) {
			if j == drop {
				continue
			}
			in.packet(&p.Header, p.Payload, at)
		}
	}
	for i := range 10 { // 15 fps, in time
		send(i, -1)
		at = at.Add(time.Second / 15)
	}
	if s := in.sample(at); s["framesReceived"] != uint64(10) || s["packetsLost"] != int64(0) || s["freezeCount"] != uint64(0) {
		t.Fatalf("after 10 whole frames: %v", s)
	}
	if j := in.sample(at)["jitter"].(float64); j > 1e-3 {
		t.Errorf("jitter %.4f s for packets sent and received in step, want ~0", j)
	}
	// A frame that lost its first packet is not complete, and the loss shows.
	send(10, 0)
	at = at.Add(500 * time.Millisecond) // then a half-second gap: a freeze
	send(11, -1)
	s := in.sample(at)
	if s["framesReceived"] != uint64(11) || s["packetsLost"] != int64(1) || s["freezeCount"] != uint64(1) {
		t.Fatalf("after a lost packet and a gap: %v", s)
	}
	got := video.take()
	if len(got) != 11 {
		t.Fatalf("%d frames followed, want 11", len(got))
	}
	for k, e := range got {
		want := k
		if k == 10 {
			want = 11 // frame 10 never completed
		}
		if e.code != want {
			t.Errorf("followed frame %d has code %v, want %d", k, e.code, want)
		}
	}
}

func TestAFrameNotFromTheClipIsFingerprinted(t *testing.T) {
	c := testClip(t)
	video := &series{}
	video.follow(true)
	in := &inbound{peer: "browser", kind: "video", clock: 90000, clip: c, video: video}
	in.reads(vp8Codec)
	pk := rtp.NewPacketizer(mtu, 96, 1, &codecs.VP8Payloader{}, rtp.NewFixedSequencer(1), 90000)
	frame := append([]byte(nil), c.full().frames[3]...)
	frame[len(frame)-1] ^= 0xff // a browser's frame: bytes no clip frame has
	for _, p := range pk.Packetize(frame, 6000) {
		in.packet(&p.Header, p.Payload, time.Now())
	}
	e := video.take()
	if len(e) != 1 || e[0].code >= 0 || len(e[0].points) != 8 {
		t.Fatalf("want one frame with no code and an 8-level fingerprint, got %v", e)
	}
}

func TestHistogramBucketsRoundUpToTwoDigits(t *testing.T) {
	for us, want := range map[int64]int64{-5: 0, 0: 0, 99: 99, 100: 100, 101: 110, 1234: 1300, 98765: 99000} {
		if got := bucket(us); got != want {
			t.Errorf("bucket(%d) = %d, want %d", us, got, want)
		}
	}
}

func TestPacerCallsOnScheduleAndSkipsMissedSlots(t *testing.T) {
	calls := make(chan int, 100)
	first := true
	s := schedule(10*time.Millisecond, 0, func(skipped int) {
		if first { // held up for three and a half periods once
			first = false
			time.Sleep(35 * time.Millisecond)
		}
		calls <- skipped
	})
	time.Sleep(205 * time.Millisecond)
	s.stopped.Store(true)
	n := len(calls)
	// 200 ms of 10-ms slots after a 5-ms lead, three of them missed: about 17, whatever the load.
	if n < 10 || n > 19 {
		t.Fatalf("%d sends in 205 ms of 10-ms slots", n)
	}
	if <-calls != 0 || <-calls < 2 {
		t.Fatalf("the send after a 35-ms hold-up did not skip the slots it missed")
	}
	time.Sleep(30 * time.Millisecond)
	if len(calls) > n-2+1 { // a send under way as it stopped may still land
		t.Fatalf("a stopped slot kept sending")
	}
}

// TestSendsRunOnARealTimeThreadWherePermitted: a stream's sends come from a
// SCHED_FIFO thread wherever this process may make one, else from a normal
// one, never from whatever thread the Go scheduler hands them.
func TestSendsRunOnARealTimeThreadWherePermitted(t *testing.T) {
	want := uint32(unix.SCHED_NORMAL)
	permitted := make(chan bool)
	go func() {
		runtime.LockOSThread() // and never unlocked: the thread ends with the goroutine
		permitted <- unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}, 0) == nil
	}()
	if <-permitted {
		want = unix.SCHED_FIFO
	}
	policies := make(chan uint32, 10)
	s := schedule(10*time.Millisecond, 0, func(int) {
		if a, err := unix.SchedGetAttr(0, 0); err == nil {
			policies <- a.Policy
		}
	})
	defer s.stopped.Store(true)
	select {
	case got := <-policies:
		if got != want {
			t.Fatalf("sends ran under scheduling policy %d, want %d", got, want)
		}
	case <-time.After(time.Second):
		t.Fatal("no send within a second")
	}
}

// TestCommandsOverHTTPReachTheLoopAndForgedOnesAreRefused: -listen's endpoint hands each JSON
// command carrying the run's token to the loop stdin's lines go to, and
// refuses anything else: a forged command (no token, a wrong one) with 403.
func TestCommandsOverHTTPReachTheLoopAndForgedOnesAreRefused(t *testing.T) {
	token := "t" + strconv.FormatInt(time.Now().UnixNano(), 36) // the run's: never the same twice
	lines := make(chan []byte, 1)
	srv, err := listenForCommands("127.0.0.1:0", token, lines)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	url := "http://" + srv.Addr + "/command"
	if srv.Addr == "" || strings.HasSuffix(srv.Addr, ":0") {
		t.Fatalf("no address to reach: %q", srv.Addr)
	}
	send := func(method, body, carried string) int {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		if carried != "" {
			req.Header.Set(tokenHeader, carried)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	join := `{"cmd":"join","user":"r1u2","room":1,"params":{},"collect":"http://127.0.0.1:1/collect"}`
	if code := send(http.MethodPost, join, token); code != http.StatusNoContent {
		t.Fatalf("a join: %d", code)
	}
	if got := string(<-lines); got != join {
		t.Fatalf("the loop got %q", got)
	}
	for _, forged := range []string{"", token[:len(token)-1], token + "x"} {
		if code := send(http.MethodPost, join, forged); code != http.StatusForbidden {
			t.Fatalf("a forged join (token %q): %d", forged, code)
		}
	}
	for _, bad := range []string{"not json", `{"cmd":`} {
		if code := send(http.MethodPost, bad, token); code != http.StatusBadRequest {
			t.Fatalf("%q: %d", bad, code)
		}
	}
	if code := send(http.MethodGet, "", token); code != http.StatusMethodNotAllowed {
		t.Fatalf("a GET: %d", code)
	}
	select {
	case line := <-lines:
		t.Fatalf("a refused request reached the loop: %q", line)
	default:
	}
}

func TestFrameSeriesEncodeAsEncodingJSONWritesTheirArrays(t *testing.T) {
	fs := frames{{at: 1764356996123.456, code: 12}, {at: 1764356996190.5, code: -1, points: []int{0, 255, 7, 8, 9, 10, 11, 12}},
		{at: 1764356996200, code: 0}}
	got, err := json.Marshal(map[string]frames{"r1u1": fs})
	if err != nil {
		t.Fatal(err)
	}
	var arrays [][]any
	for _, f := range fs {
		var code, points any
		if f.code >= 0 {
			code = f.code
		}
		if f.points != nil {
			points = f.points
		}
		arrays = append(arrays, []any{f.at, nil, points, code})
	}
	want, _ := json.Marshal(map[string][][]any{"r1u1": arrays})
	if string(got) != string(want) {
		t.Errorf("encoded %s, want %s", got, want)
	}
}

func TestRecordsEncodeAsEncodingJSONWritesTheirMaps(t *testing.T) {
	for _, r := range []record{
		{"t": 1764356996123.456, "peer": "r1u2", "direction": "recv", "kind": "video", "ssrc": uint32(4000000000),
			"bytes": uint64(123456789), "packets": uint64(99), "packetsLost": int64(-1), "jitter": 0.0123,
			"framesPerSecond": 15, "totalFreezesDuration": 0.0, "frameWidth": 320},
		{"t": 1.5, "peer": nil, "rtt": 3e-7, "tiny": -2e-9, "huge": 1e22, "zero": math.Copysign(0, -1)},
		{"peer": "a\"b<c>&\\d\né", "points": []int{1, 2}, "flag": true, "small": uint16(7)},
		{},
	} {
		got, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(map[string]any(r))
		if string(got) != string(want) {
			t.Errorf("encoded %s, want %s", got, want)
		}
	}
	if _, err := json.Marshal(record{"jitter": math.NaN()}); err == nil {
		t.Error("NaN encoded, want encoding/json's error")
	}
}

func TestPostedBatchesEncodeAsEncodingJSONWritesThem(t *testing.T) {
	batch := record{"type": "batch", "records": []record{
		{"type": "samples", "user": "r1u1", "window": 3, "i": 0, "took_ms": 0.25,
			"samples": []record{{"t": 1.5, "kind": "audio", "ssrc": uint32(7)}, {}}},
		{"type": "frames", "user": "r1u2", "series": map[string]frames{
			"r1u3": {{at: 2.5, code: 4}, {at: 3, code: -1, points: []int{1, 2}}}, "r1u1": {}}},
		{"type": "generator", "id": "g1", "pacing_us": map[string]int{"p99": 50}, "participants": 2},
	}}
	var err error
	got := appendJSON(nil, batch, &err)
	if err != nil {
		t.Fatal(err)
	}
	// encoding/json writes the same records through their own encoders,
	// then checks and compacts what they wrote.
	want, err := json.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("encoded %s, want %s", got, want)
	}
	if !json.Valid(got) {
		t.Errorf("not JSON: %s", got)
	}
}

// An audio stream's playout model: packets in step are played after the
// buffer's delay, a lost one and one later than the buffer are concealed,
// a stream whose timestamps start again is not read as late for ever, nor
// one whose path's delay steps up.
func TestReceivedAudioIsPlayedOutByTheModel(t *testing.T) {
	in := &inbound{peer: "r1u2", kind: "audio", clock: 48000}
	at := epoch.Add(time.Second)
	ts := uint32(1000)
	send := func(seq uint16, delay time.Duration) {
		in.packet(&rtp.Header{SequenceNumber: seq, Timestamp: ts}, make([]byte, 80), at.Add(delay))
		ts += audioStep
		at = at.Add(20 * time.Millisecond)
	}
	for seq := range uint16(10) {
		send(seq, 0)
	}
	s := in.sample(at)
	if s["totalSamplesReceived"] != uint64(10*audioStep) || s["concealedSamples"] != uint64(0) {
		t.Fatalf("10 packets in step: %v", s)
	}
	if d := s["jitterBufferDelay"].(float64) / float64(s["jitterBufferEmittedCount"].(uint64)); math.Abs(d-playoutDelay) > 1e-6 {
		t.Errorf("a packet in step waits %.4f s, want the buffer's %.3f", d, playoutDelay)
	}
	send(10, 0)
	ts += audioStep // packet 11 lost
	at = at.Add(20 * time.Millisecond)
	send(12, 100*time.Millisecond) // later than the buffer waits
	send(13, 0)
	s = in.sample(at)
	if s["totalSamplesReceived"] != uint64(14*audioStep) || s["concealedSamples"] != uint64(2*audioStep) ||
		s["packetsDiscarded"] != uint64(1) || s["packetsLost"] != int64(1) {
		t.Fatalf("a lost packet and a late one: %v", s)
	}
	ts += 1 << 30 // the sender's timestamps start again
	for seq := uint16(14); seq < 20; seq++ {
		send(seq, 0)
	}
	if s = in.sample(at); s["packetsDiscarded"] != uint64(1) {
		t.Fatalf("after the timestamps started again: %v", s)
	}
	// the path's delay steps up 100 ms for good: late until the quickest
	// packet before the step is over 2 s old, then played again
	for seq := uint16(20); seq < 270; seq++ {
		send(seq, 100*time.Millisecond)
	}
	late := s["packetsDiscarded"].(uint64)
	if s = in.sample(at); s["packetsDiscarded"].(uint64)-late < 50 || s["packetsDiscarded"].(uint64)-late > 100 {
		t.Fatalf("5 s after a 100-ms step up, %d packets late: %v", s["packetsDiscarded"].(uint64)-late, s)
	}
}
