package client

import (
	"testing"

	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
)

func TestALayersRetransmissionsNameItAsTheirRepairedRid(t *testing.T) {
	const media, rtx, ridID, rridID = 10, 11, 3, 4
	withRRID := []interceptor.RTPHeaderExtension{{URI: sdp.SDESRTPStreamIDURI, ID: ridID}, {URI: sdp.SDESRepairRTPStreamIDURI, ID: rridID}}
	for _, c := range []struct {
		name      string
		exts      []interceptor.RTPHeaderExtension
		ssrc      uint32
		rid, rrid string
	}{
		{"media packet", withRRID, media, "q", ""},
		{"retransmission", withRRID, rtx, "", "q"},
		{"retransmission, no repaired rid negotiated", withRRID[:1], rtx, "q", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got *rtp.Header
			sink := interceptor.RTPWriterFunc(func(h *rtp.Header, _ []byte, _ interceptor.Attributes) (int, error) {
				got = h
				return 0, nil
			})
			i, _ := repairNamerFactory{}.NewInterceptor("")
			w := i.BindLocalStream(&interceptor.StreamInfo{SSRC: media, SSRCRetransmission: rtx, RTPHeaderExtensions: c.exts}, sink)
			h := &rtp.Header{Version: 2, SSRC: c.ssrc}
			if err := h.SetExtension(ridID, []byte("q")); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(h, nil, nil); err != nil {
				t.Fatal(err)
			}
			if rid, rrid := string(got.GetExtension(ridID)), string(got.GetExtension(rridID)); rid != c.rid || rrid != c.rrid {
				t.Errorf("rid %q, repaired rid %q; want %q, %q", rid, rrid, c.rid, c.rrid)
			}
		})
	}
}
