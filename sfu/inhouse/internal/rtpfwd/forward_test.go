package rtpfwd

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"
)

type sent struct {
	h  rtp.Header
	pl []byte
}

type recorder struct{ got []sent }

func (r *recorder) WriteRTP(h *rtp.Header, pl []byte) (int, error) {
	r.got = append(r.got, sent{h.Clone(), append([]byte(nil), pl...)})
	return len(pl), nil
}

// vp8Payload is a minimal VP8 payload: descriptor with a 15-bit picture id,
// then the first byte of a frame (P bit clear for a keyframe).
func vp8Payload(start, key bool, body string) []byte {
	d := byte(0x80)
	if start {
		d |= 0x10
	}
	frame := byte(1)
	if key {
		frame = 0
	}
	return append([]byte{d, 0x80, 0x81, 0x02, frame}, body...)
}

func packet(t testing.TB, seq uint16, ts uint32, payload []byte, vp8 bool, ext bool) *Packet {
	t.Helper()
	h := rtp.Header{Version: 2, PayloadType: 96, SequenceNumber: seq, Timestamp: ts, SSRC: 1234, Marker: true}
	if ext {
		_ = h.SetExtension(3, []byte{1, 2, 3})
	}
	raw, err := (&rtp.Packet{Header: h, Payload: payload}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p := NewPacket()
	n := copy(p.Buf(), raw)
	codec := NoKeyframes
	if vp8 {
		codec = VP8
	}
	if err := p.Parse(n, codec); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseMatchesPion(t *testing.T) {
	for _, ext := range []bool{false, true} {
		pl := vp8Payload(true, true, "hello")
		p := packet(t, 65535, 90000, pl, true, ext)
		if p.Seq != 65535 || p.TS != 90000 || !p.Marker || p.PayloadType != 96 || !bytes.Equal(p.Payload(), pl) {
			t.Fatalf("ext=%v: parsed %+v payload %x", ext, p, p.Payload())
		}
		if !p.KeyframeStart {
			t.Fatal("keyframe start not detected")
		}
		p.Release()
	}
	padded, _ := (&rtp.Packet{Header: rtp.Header{Version: 2, Padding: true, PaddingSize: 4}, Payload: []byte("abc")}).Marshal()
	p := NewPacket()
	if err := p.Parse(copy(p.Buf(), padded), NoKeyframes); err != nil || string(p.Payload()) != "abc" {
		t.Fatalf("padded payload %q err %v", p.Payload(), err)
	}
	for _, bad := range [][]byte{nil, {0x80}, make([]byte, 12), {0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, append([]byte{0xa0}, make([]byte, 11)...)} {
		if err := p.Parse(copy(p.Buf(), bad), VP8); err == nil {
			t.Fatalf("%x parsed without error", bad)
		}
	}
	p.Release()
}

func TestDownTrackStartsAtKeyframeAndRewrites(t *testing.T) {
	rec := &recorder{}
	d := NewDownTrack(true)
	if r := d.Forward(packet(t, 10, 1000, vp8Payload(true, true, "k"), true, false), 0); r != Skipped {
		t.Fatalf("unbound track: %v", r)
	}
	d.Bind(&Binding{W: rec, SSRC: 77, PT: 100})
	if r := d.Forward(packet(t, 11, 1000, vp8Payload(true, false, "d"), true, true), 0); r != WaitingForKeyframe {
		t.Fatalf("delta frame before keyframe: %v", r)
	}
	seqs := []uint16{65534, 65535, 65533, 0, 1}
	for i, s := range seqs {
		pl := vp8Payload(i == 0, i == 0, "x")
		if r := d.Forward(packet(t, s, 3000+uint32(i), pl, true, true), 0); (r == Sent) != (s != 65533) {
			t.Fatalf("seq %d: %v", s, r)
		}
	}
	if len(rec.got) != 4 {
		t.Fatalf("forwarded %d, want 4", len(rec.got))
	}
	base, tsBase := rec.got[0].h.SequenceNumber, rec.got[0].h.Timestamp
	for i, g := range rec.got {
		if g.h.SSRC != 77 || g.h.PayloadType != 100 || g.h.Extension || len(g.h.Extensions) != 0 {
			t.Fatalf("header not rewritten: %+v", g.h)
		}
		if g.h.SequenceNumber != base+uint16(i) {
			t.Fatalf("packet %d: seq %d, want %d", i, g.h.SequenceNumber, base+uint16(i))
		}
	}
	if rec.got[3].h.Timestamp-tsBase != 4 {
		t.Fatalf("timestamp offset not kept: %d", rec.got[3].h.Timestamp-tsBase)
	}
	if d.Packets.Load() != 4 {
		t.Fatalf("counted %d packets", d.Packets.Load())
	}
}

func TestAudioStartsAtOnce(t *testing.T) {
	rec := &recorder{}
	d := NewDownTrack(false)
	d.Bind(&Binding{W: rec, SSRC: 5, PT: 111})
	if r := d.Forward(packet(t, 7, 960, []byte("opus"), false, false), 0); r != Sent {
		t.Fatalf("audio: %v", r)
	}
}

func TestRetransmitFromSharedHistory(t *testing.T) {
	var h History
	defer h.Clear()
	plain, rtx := &recorder{}, &recorder{}
	a, b := NewDownTrack(true), NewDownTrack(true)
	a.Bind(&Binding{W: plain, SSRC: 1, PT: 96})
	b.Bind(&Binding{W: rtx, SSRC: 2, PT: 96, RTXSSRC: 3, RTXPT: 97})
	var f Fanout
	f.Add(a)
	f.Add(b)
	for i := range 3 {
		p := packet(t, uint16(100+i), 9000, vp8Payload(i == 0, i == 0, "frame"), true, false)
		h.Put(p)
		if c := f.Forward(p); c.Sent != 2 {
			t.Fatalf("sent %d", c.Sent)
		}
		p.Release()
	}
	want := plain.got[1]
	if !a.Retransmit(only(&h), want.h.SequenceNumber) {
		t.Fatal("plain retransmission failed")
	}
	got := plain.got[len(plain.got)-1]
	if got.h.SequenceNumber != want.h.SequenceNumber || got.h.SSRC != 1 || !bytes.Equal(got.pl, want.pl) {
		t.Fatalf("plain retransmission %+v, want %+v", got, want)
	}
	orig := rtx.got[2]
	if !b.Retransmit(only(&h), orig.h.SequenceNumber) {
		t.Fatal("RTX retransmission failed")
	}
	got = rtx.got[len(rtx.got)-1]
	if got.h.SSRC != 3 || got.h.PayloadType != 97 || binary.BigEndian.Uint16(got.pl) != orig.h.SequenceNumber ||
		!bytes.Equal(got.pl[2:], orig.pl) || got.h.Timestamp != orig.h.Timestamp {
		t.Fatalf("RTX packet %+v for %+v", got, orig)
	}
	if b.Retransmit(only(&h), orig.h.SequenceNumber+50) {
		t.Fatal("retransmitted a packet never sent")
	}
	f.Remove(a)
	if f.Len() != 1 {
		t.Fatalf("%d subscribers after remove", f.Len())
	}
}

// only is the history of a track of one layer.
func only(h *History) func(uint8) *History {
	return func(layer uint8) *History {
		if layer != 0 {
			return nil
		}
		return h
	}
}

// layered is packet on a simulcast layer, arrived at ms.
func layered(t testing.TB, layer uint8, seq uint16, ts uint32, key bool, ms int64) *Packet {
	p := packet(t, seq, ts, vp8Payload(true, key, "l"), true, false)
	p.Layer, p.Arrived = layer, ms*1e6
	return p
}

func TestDownTrackSwitchesLayerAtTheTargetsKeyframe(t *testing.T) {
	rec := &recorder{}
	d := NewDownTrack(true)
	d.Bind(&Binding{W: rec, SSRC: 9, PT: 96})
	d.SetLayer(2)
	var hist [3]History
	defer func() {
		for i := range hist {
			hist[i].Clear()
		}
	}()
	histories := func(layer uint8) *History { return &hist[layer] }
	send := func(p *Packet) Result {
		defer p.Release()
		hist[p.Layer].Put(p)
		return d.Forward(p, 2)
	}
	// layers 0 and 2 with sequence and timestamp spaces of their own
	steps := []struct {
		p    *Packet
		want Result
	}{
		{layered(t, 0, 500, 70000, true, 0), Skipped},             // not the layer asked for
		{layered(t, 2, 9000, 1000, false, 0), WaitingForKeyframe}, // the layer asked for, mid-frame
		{layered(t, 2, 9001, 4000, true, 33), Sent},               // its keyframe: starts
		{layered(t, 2, 9002, 7000, false, 66), Sent},
		{layered(t, 0, 501, 73000, true, 66), Skipped},
	}
	for i, s := range steps {
		if r := send(s.p); r != s.want {
			t.Fatalf("step %d: %v, want %v", i, r, s.want)
		}
	}
	if l, ok := d.Layer(); !ok || l != 2 {
		t.Fatalf("layer %d %v, want 2", l, ok)
	}
	d.SetLayer(0)
	for i, s := range []struct {
		p    *Packet
		want Result
	}{
		{layered(t, 2, 9003, 10000, false, 100), Sent}, // the old layer until the new one's keyframe
		{layered(t, 0, 502, 76000, false, 100), WaitingForKeyframe},
		{layered(t, 0, 503, 79000, true, 150), Sent},      // switched
		{layered(t, 2, 9004, 13000, false, 150), Skipped}, // the old layer is left
		{layered(t, 0, 504, 82000, false, 183), Sent},
	} {
		if r := send(s.p); r != s.want {
			t.Fatalf("after SetLayer(0), step %d: %v, want %v", i, r, s.want)
		}
	}
	if len(rec.got) != 5 {
		t.Fatalf("forwarded %d packets, want 5", len(rec.got))
	}
	for i, g := range rec.got[1:] {
		if g.h.SequenceNumber != rec.got[i].h.SequenceNumber+1 {
			t.Fatalf("sequence broken at %d: %d after %d", i+1, g.h.SequenceNumber, rec.got[i].h.SequenceNumber)
		}
	}
	// the switch: 50 ms after the old layer's last packet, 4500 ticks of 90 kHz after its timestamp;
	// then the new layer's own timestamp steps
	if gap := rec.got[3].h.Timestamp - rec.got[2].h.Timestamp; gap != 4500 {
		t.Fatalf("timestamp gap at the switch %d, want 4500", gap)
	}
	if gap := rec.got[4].h.Timestamp - rec.got[3].h.Timestamp; gap != 3000 {
		t.Fatalf("timestamp step on the new layer %d, want 3000", gap)
	}
	if l, _ := d.Layer(); l != 0 {
		t.Fatalf("layer %d after the switch, want 0", l)
	}
	// a NACK for a packet of the new layer is served from its history; one from before the switch is
	// not (its layer's sequence space is another)
	if !d.Retransmit(histories, rec.got[4].h.SequenceNumber) || !bytes.Equal(rec.got[5].pl, rec.got[4].pl) {
		t.Fatal("no retransmission of the new layer's packet")
	}
	if d.Retransmit(histories, rec.got[2].h.SequenceNumber) {
		t.Fatal("retransmitted a packet from before the switch")
	}
}

func TestASubscriberGetsTheLargestLayerThereIs(t *testing.T) {
	rec := &recorder{}
	d := NewDownTrack(true)
	d.Bind(&Binding{W: rec, SSRC: 9, PT: 96})
	var f Fanout
	f.Add(d)
	f.SetTop(1) // the publisher sends two layers so far
	for i, s := range []struct {
		p    *Packet
		sent int
	}{
		{layered(t, 0, 10, 100, true, 0), 0},
		{layered(t, 1, 20, 200, true, 0), 1},
		{layered(t, 2, 30, 300, true, 10), 0}, // not announced yet
	} {
		if c := f.Forward(s.p); c.Sent != s.sent {
			t.Fatalf("packet %d: sent %d, want %d", i, c.Sent, s.sent)
		}
		s.p.Release()
	}
	f.SetTop(2) // its largest layer arrives: the subscriber moves up at its keyframe
	for i, s := range []struct {
		p     *Packet
		sent  int
		layer uint8
	}{
		{layered(t, 1, 21, 3200, false, 33), 1, 1},
		{layered(t, 2, 31, 3300, true, 40), 1, 2},
		{layered(t, 1, 22, 6200, false, 66), 0, 2},
	} {
		if c := f.Forward(s.p); c.Sent != s.sent {
			t.Fatalf("after SetTop(2), packet %d: sent %d, want %d", i, c.Sent, s.sent)
		}
		if l, _ := d.Layer(); l != s.layer {
			t.Fatalf("after SetTop(2), packet %d: layer %d, want %d", i, l, s.layer)
		}
		s.p.Release()
	}
}

func TestHistoryEvictsAndReturnsPackets(t *testing.T) {
	var h History
	first := packet(t, 0, 0, []byte("a"), false, false)
	h.Put(first)
	first.Release()
	for i := 1; i <= HistorySize; i++ {
		p := packet(t, uint16(i), 0, []byte("b"), false, false)
		h.Put(p)
		p.Release()
	}
	if h.Get(0) != nil {
		t.Fatal("evicted packet still found")
	}
	if first.refs.Load() != 0 {
		t.Fatalf("evicted packet holds %d references", first.refs.Load())
	}
	p := h.Get(HistorySize)
	if p == nil {
		t.Fatal("newest packet missing")
	}
	p.Release()
	h.Clear()
}

type nullWriter struct{ n int }

func (w *nullWriter) WriteRTP(h *rtp.Header, pl []byte) (int, error) {
	w.n += int(h.SequenceNumber) + len(pl)
	return len(pl), nil
}

// srtpWriter marshals and encrypts like a subscriber's SRTP session does,
// into buffers of its own.
type srtpWriter struct {
	ctx        *srtp.Context
	plain, out []byte
	scratch    rtp.Header
}

func (w *srtpWriter) WriteRTP(h *rtp.Header, pl []byte) (int, error) {
	n, err := rtp.MarshalPacketTo(w.plain, h, pl)
	if err != nil {
		return 0, err
	}
	out, err := w.ctx.EncryptRTP(w.out, w.plain[:n], &w.scratch)
	if err != nil {
		return 0, err
	}
	return len(out), nil
}

func benchFanout(b *testing.B, subs int, mk func(i int) Writer) {
	var f Fanout
	var h History
	defer h.Clear()
	for i := range subs {
		d := NewDownTrack(true)
		d.Bind(&Binding{W: mk(i), SSRC: uint32(i + 1), PT: 96})
		f.Add(d)
	}
	raw, _ := (&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 96, SSRC: 9},
		Payload: vp8Payload(true, true, string(make([]byte, 1000)))}).Marshal()
	seq := uint16(0)
	b.ReportAllocs()
	b.SetBytes(int64(subs * len(raw)))
	for b.Loop() {
		p := NewPacket()
		n := copy(p.Buf(), raw)
		binary.BigEndian.PutUint16(p.Buf()[2:], seq)
		seq++
		if err := p.Parse(n, VP8); err != nil {
			b.Fatal(err)
		}
		h.Put(p)
		f.Forward(p)
		p.Release()
	}
}

// BenchmarkFanout is the forwarding core alone: one 1 kB video packet to 6
// subscribers (a room of 7).
func BenchmarkFanout(b *testing.B) {
	benchFanout(b, 6, func(int) Writer { return &nullWriter{} })
}

// BenchmarkFanoutSRTP adds each subscriber's SRTP encryption, the part a real
// fan-out cannot share.
func BenchmarkFanoutSRTP(b *testing.B) {
	benchFanout(b, 6, func(i int) Writer {
		key, salt := make([]byte, 16), make([]byte, 14)
		key[0] = byte(i)
		ctx, err := srtp.CreateContext(key, salt, srtp.ProtectionProfileAes128CmHmacSha1_80)
		if err != nil {
			b.Fatal(err)
		}
		return &srtpWriter{ctx: ctx, plain: make([]byte, 2*MaxPacket), out: make([]byte, 2*MaxPacket)}
	})
}

func TestDownTrackCeilingCapsTheLayerAskedFor(t *testing.T) {
	rec := &recorder{}
	d := NewDownTrack(true)
	d.Bind(&Binding{W: rec, SSRC: 9, PT: 96})
	var hist History
	defer hist.Clear()
	for i, s := range []struct {
		p       *Packet
		ceiling uint8 // set before the packet
		want    Result
	}{
		{layered(t, 2, 9000, 1000, true, 0), 1, Skipped}, // the layer asked for, above the ceiling
		{layered(t, 1, 500, 7000, true, 0), 1, Sent},
		{layered(t, 2, 9001, 4000, true, 33), Largest, Sent}, // lifted: its keyframe switches at once
		{layered(t, 1, 501, 10000, false, 33), Largest, Skipped},
		{layered(t, 2, 9002, 7000, false, 66), 0, Skipped}, // lowered: the layer received stops at once
		{layered(t, 0, 70, 500, false, 66), 0, WaitingForKeyframe},
	} {
		d.SetCeiling(s.ceiling)
		hist.Put(s.p)
		r := d.Forward(s.p, 2)
		s.p.Release()
		if r != s.want {
			t.Fatalf("step %d: %v, want %v", i, r, s.want)
		}
	}
	// nor is what was sent of it resent: the link has no room for it
	if d.Retransmit(func(uint8) *History { return &hist }, rec.got[len(rec.got)-1].h.SequenceNumber) {
		t.Fatal("a packet of a layer above the ceiling was resent")
	}
	p := layered(t, 0, 71, 3500, true, 100)
	defer p.Release()
	if r := d.Forward(p, 2); r != Sent {
		t.Fatalf("the lower layer's keyframe: %v, want Sent", r)
	}
}
