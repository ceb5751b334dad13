package client

import (
	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
)

// repairNamer names a simulcast layer's retransmissions as Chrome does: an
// RTX packet carries its layer's rid as the repaired rid (RFC 8852), not as
// its rid. pion's NACK responder copies the media packet's header, rid
// included, and LiveKit, taking the RTX stream for the layer the rid named,
// lost that layer (a receiver asking for it got the next one up). It sits
// inside the NACK responder (pion's, or a Sender), which writes the
// retransmissions through it.
type repairNamer struct{ interceptor.NoOp }

type repairNamerFactory struct{}

func (repairNamerFactory) NewInterceptor(string) (interceptor.Interceptor, error) {
	return &repairNamer{}, nil
}

func (*repairNamer) BindLocalStream(info *interceptor.StreamInfo, w interceptor.RTPWriter) interceptor.RTPWriter {
	var rid, rrid uint8
	for _, e := range info.RTPHeaderExtensions {
		switch e.URI {
		case sdp.SDESRTPStreamIDURI:
			rid = uint8(e.ID)
		case sdp.SDESRepairRTPStreamIDURI:
			rrid = uint8(e.ID)
		}
	}
	rtx := info.SSRCRetransmission
	if rtx == 0 || rid == 0 || rrid == 0 {
		return w
	}
	return interceptor.RTPWriterFunc(func(h *rtp.Header, payload []byte, a interceptor.Attributes) (int, error) {
		if h.SSRC == rtx {
			if name := h.GetExtension(rid); name != nil {
				if err := h.DelExtension(rid); err == nil {
					_ = h.SetExtension(rrid, name)
				}
			}
		}
		return w.Write(h, payload, a)
	})
}
