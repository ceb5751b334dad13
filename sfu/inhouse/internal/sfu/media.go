package sfu

import (
	"fmt"
	"net"

	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/interceptor/pkg/report"
	"github.com/pion/logging"
	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"

	"sfubench/sfu/inhouse/directrtp"
)

// Payload types offered. The SFU forwards payloads untouched, so publisher
// and subscribers must agree on the codec: Opus, and VP8 first (the KITE
// studies' and Janus's default video room's), then H.264 (constrained
// baseline, packetization mode 1), VP9 and AV1 (profile 0), which a browser
// picks by narrowing the offer. rtpfwd must tell each video codec's keyframes.
const (
	ptOpus     = 111
	ptVP8      = 96
	ptRTX      = 97
	ptVP9      = 98
	ptVP9RTX   = 99
	ptH264     = 102
	ptH264RTX  = 103
	ptAV1      = 45
	ptAV1RTX   = 46
	h264Params = "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f"
)

func newAPI(cfg *Config, mux ice.UDPMux, direct *directrtp.Factory) (*webrtc.API, error) {
	me := &webrtc.MediaEngine{}
	videoFB := []webrtc.RTCPFeedback{
		{Type: "ccm", Parameter: "fir"},
		{Type: webrtc.TypeRTCPFBNACK},
		{Type: webrtc.TypeRTCPFBNACK, Parameter: "pli"},
	}
	opus := webrtc.RTPCodecParameters{RTPCodecCapability: webrtc.RTPCodecCapability{
		MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2, SDPFmtpLine: "minptime=10;useinbandfec=1",
	}, PayloadType: ptOpus}
	if err := me.RegisterCodec(opus, webrtc.RTPCodecTypeAudio); err != nil {
		return nil, err
	}
	for _, v := range []struct {
		mime, fmtp string
		pt, rtx    webrtc.PayloadType
	}{
		{webrtc.MimeTypeVP8, "", ptVP8, ptRTX},
		{webrtc.MimeTypeH264, h264Params, ptH264, ptH264RTX},
		{webrtc.MimeTypeVP9, "profile-id=0", ptVP9, ptVP9RTX},
		{webrtc.MimeTypeAV1, "level-idx=5;profile=0;tier=0", ptAV1, ptAV1RTX},
	} {
		media := webrtc.RTPCodecCapability{MimeType: v.mime, ClockRate: 90000, SDPFmtpLine: v.fmtp, RTCPFeedback: videoFB}
		rtx := webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeRTX, ClockRate: 90000, SDPFmtpLine: fmt.Sprintf("apt=%d", v.pt)}
		for _, c := range []webrtc.RTPCodecParameters{{RTPCodecCapability: media, PayloadType: v.pt},
			{RTPCodecCapability: rtx, PayloadType: v.rtx}} {
			if err := me.RegisterCodec(c, webrtc.RTPCodecTypeVideo); err != nil {
				return nil, err
			}
		}
	}

	// Publishers get NACKs and transport-wide congestion feedback, so
	// Chrome's sender recovers losses and adapts its rate; RTCP reports
	// go both ways. The receive side's feedback is not pion's chain: it is
	// bound to the published tracks (directin.go), which the direct read
	// path feeds as well. Retransmissions to subscribers are served by the
	// SFU itself from one history per publisher track (rtpfwd.History)
	// instead of pion's responder, which copies every packet per subscriber.
	ir := &interceptor.Registry{}
	// First, so it is innermost: every other interceptor sees its packets.
	ir.Add(direct)
	reports, err := report.NewSenderInterceptor()
	if err != nil {
		return nil, err
	}
	ir.Add(reports)
	for _, kind := range []webrtc.RTPCodecType{webrtc.RTPCodecTypeVideo, webrtc.RTPCodecTypeAudio} {
		me.RegisterFeedback(webrtc.RTCPFeedback{Type: webrtc.TypeRTCPFBTransportCC}, kind)
		ext := webrtc.RTPHeaderExtensionCapability{URI: sdp.TransportCCURI}
		if err := me.RegisterHeaderExtension(ext, kind); err != nil {
			return nil, err
		}
	}
	// A simulcast layer's stream is declared by no SSRC: its packets name
	// their section and layer (simulcast.go).
	for _, uri := range []string{sdp.SDESMidURI, sdp.SDESRTPStreamIDURI, sdp.SDESRepairRTPStreamIDURI} {
		if err := me.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: uri}, webrtc.RTPCodecTypeVideo); err != nil {
			return nil, err
		}
	}

	se := webrtc.SettingEngine{}
	se.SetICEUDPMux(mux)
	// ICE-lite, as media servers do: the browser runs the checks and the
	// server answers them on its single host candidate.
	se.SetLite(true)
	se.SetIncludeLoopbackCandidate(true)
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	se.SetICETimeouts(cfg.ICEDisconnectedTimeout, cfg.ICEFailedTimeout, cfg.ICEKeepalive)
	se.SetNetworkTypes([]webrtc.NetworkType{networkType(cfg.UDP.LocalAddr())})
	if cfg.Announce != "" {
		se.SetNAT1To1IPs([]string{cfg.Announce}, webrtc.ICECandidateTypeHost)
	}
	lf := logging.NewDefaultLoggerFactory()
	lf.DefaultLogLevel = logging.LogLevelError
	se.LoggerFactory = lf

	return webrtc.NewAPI(webrtc.WithMediaEngine(me), webrtc.WithInterceptorRegistry(ir),
		webrtc.WithSettingEngine(se)), nil
}

func networkType(a net.Addr) webrtc.NetworkType {
	if ua, ok := a.(*net.UDPAddr); ok {
		if ap := ua.AddrPort(); ap.Addr().Is6() && !ap.Addr().Is4In6() {
			return webrtc.NetworkTypeUDP6
		}
	}
	return webrtc.NetworkTypeUDP4
}

// newMux puts pion's ICE demultiplexer on the shared socket, as the direct
// read path leaves it.
func newMux(conn *directReader) ice.UDPMux {
	lf := logging.NewDefaultLoggerFactory()
	lf.DefaultLogLevel = logging.LogLevelError
	return ice.NewUDPMuxDefault(ice.UDPMuxParams{UDPConn: conn, Logger: lf.NewLogger("udpmux")})
}
