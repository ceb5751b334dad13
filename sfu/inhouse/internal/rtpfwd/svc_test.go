package rtpfwd

import (
	"testing"

	"github.com/pion/rtp"
)

// svcPicture is one picture of a three-layer VP9 SVC stream in flexible
// mode, two packets per spatial layer: the packets' payloads in order.
func svcPicture(key bool) [][]byte {
	var out [][]byte
	for sid := byte(0); sid < 3; sid++ {
		for part := 0; part < 2; part++ {
			flags := byte(0x80 | 0x20 | 0x10) // I, L, F
			if !key {
				flags |= 0x40 // P
			}
			if part == 0 {
				flags |= 0x08 // B
			}
			if part == 1 {
				flags |= 0x04 // E
			}
			d := []byte{flags, 0x80, 0x01, sid << 1}
			if !key {
				d = append(d, 1<<1) // P_DIFF 1
			}
			if key && sid == 0 && part == 0 {
				d[0] |= 0x02 // V: three spatial layers, no sizes
				d = append(d, 2<<5)
			}
			out = append(out, append(d, 's', '0'+sid))
		}
	}
	return out
}

// svcStream feeds pictures (true: a key picture) to d from sequence number
// seq on, the picture's last packet marked, dropping the source sequence
// numbers in lost; it returns the next sequence number.
func svcStream(t *testing.T, d *DownTrack, h *History, seq uint16, keys []bool, lost map[uint16]bool) uint16 {
	t.Helper()
	for i, key := range keys {
		pl := svcPicture(key)
		for j, payload := range pl {
			raw, _ := (&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 98, SequenceNumber: seq,
				Timestamp: uint32(i) * 3000, Marker: j == len(pl)-1}, Payload: payload}).Marshal()
			p := NewPacket()
			if err := p.Parse(copy(p.Buf(), raw), VP9); err != nil {
				t.Fatal(err)
			}
			if !lost[seq] {
				h.Put(p)
				d.ForwardSVC(p, 2)
			}
			p.Release()
			seq++
		}
	}
	return seq
}

// spatial is the SID of each packet a subscriber got, the marker bits as
// "|" after a packet, and whether its sequence numbers went on one by one.
func spatial(got []sent) (layers string, contiguous bool) {
	contiguous = true
	for i, s := range got {
		layers += string('0' + s.pl[3]>>1)
		if s.h.Marker {
			layers += "|"
		}
		if i > 0 && s.h.SequenceNumber != got[i-1].h.SequenceNumber+1 {
			contiguous = false
		}
	}
	return layers, contiguous
}

// smallestSubscriber is a bound video DownTrack asking for the smallest
// layer, and what it sends.
func smallestSubscriber() (*recorder, *DownTrack) {
	rec := &recorder{}
	d := NewDownTrack(true)
	d.Bind(&Binding{W: rec, SSRC: 1, PT: 98})
	d.SetLayer(0)
	return rec, d
}

func TestSVCSubscriberGetsTheSpatialLayersUpToItsOwn(t *testing.T) {
	rec, d := smallestSubscriber()
	var h History
	seq := svcStream(t, d, &h, 100, []bool{false, true, false}, nil)
	if got, ok := spatial(rec.got); got != "00|00|" || !ok {
		t.Fatalf("smallest: got %q (contiguous %v), want the base layer of the key picture on, closed up", got, ok)
	}
	// Up waits for a key picture; down goes at the next picture.
	rec.got = nil
	d.SetLayer(2)
	seq = svcStream(t, d, &h, seq, []bool{false, true}, nil)
	if got, ok := spatial(rec.got); got != "00|001122|" || !ok {
		t.Fatalf("up: got %q (contiguous %v)", got, ok)
	}
	if l, _ := d.Layer(); l != 2 {
		t.Fatalf("Layer() = %d after the key picture, want 2", l)
	}
	rec.got = nil
	d.SetLayer(1)
	svcStream(t, d, &h, seq, []bool{false}, nil)
	if got, ok := spatial(rec.got); got != "0011|" || !ok {
		t.Fatalf("down: got %q (contiguous %v), want the marker on layer 1's last packet", got, ok)
	}
}

func TestSVCRetransmitsWhatTheSubscriberKnowsBySeq(t *testing.T) {
	rec, d := smallestSubscriber()
	var h History
	// the first packet of the second picture's base layer is lost on the way in
	svcStream(t, d, &h, 500, []bool{true, false}, map[uint16]bool{506: true})
	if got, _ := spatial(rec.got); got != "00|0|" {
		t.Fatalf("got %q", got)
	}
	// the subscriber sees the gap after its second packet and asks for it
	missing := rec.got[1].h.SequenceNumber + 1
	if rec.got[2].h.SequenceNumber != missing+1 {
		t.Fatalf("a packet lost upstream must leave a gap: %d after %d", rec.got[2].h.SequenceNumber, rec.got[1].h.SequenceNumber)
	}
	// what it got is found by its own numbers; what never came is not
	layer0 := func(uint8) *History { return &h }
	if !d.Retransmit(layer0, rec.got[2].h.SequenceNumber) {
		t.Fatal("a forwarded packet was not retransmitted")
	}
	if last := rec.got[len(rec.got)-1]; last.h.SequenceNumber != rec.got[2].h.SequenceNumber || string(last.pl[len(last.pl)-2:]) != "s0" {
		t.Fatalf("retransmitted %d %q", last.h.SequenceNumber, last.pl)
	}
	if d.Retransmit(layer0, missing) {
		t.Fatal("retransmitted a packet the SFU never had")
	}
}
