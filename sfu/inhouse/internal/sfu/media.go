package sfu

import (
	"net"

	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/interceptor/pkg/report"
	"github.com/pion/logging"
	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"
)

// Payload types offered. The SFU forwards payloads untouched, so publisher
// and subscribers must agree on one codec per kind: VP8 and Opus, as in the
// KITE studies and Janus's default video room.
const (
	ptOpus = 111
	ptVP8  = 96
	ptRTX  = 97
)

func newAPI(cfg *Config, mux ice.UDPMux, direct *directFactory) (*webrtc.API, error) {
	me := &webrtc.MediaEngine{}
	videoFB := []webrtc.RTCPFeedback{
		{Type: "ccm", Parameter: "fir"},
		{Type: webrtc.TypeRTCPFBNACK},
		{Type: webrtc.TypeRTCPFBNACK, Parameter: "pli"},
	}
	codecs := []struct {
		c    webrtc.RTPCodecParameters
		kind webrtc.RTPCodecType
	}{
		{webrtc.RTPCodecParameters{RTPCodecCapability: webrtc.RTPCodecCapability{
			MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2, SDPFmtpLine: "minptime=10;useinbandfec=1",
		}, PayloadType: ptOpus}, webrtc.RTPCodecTypeAudio},
		{webrtc.RTPCodecParameters{RTPCodecCapability: webrtc.RTPCodecCapability{
			MimeType: webrtc.MimeTypeVP8, ClockRate: 90000, RTCPFeedback: videoFB,
		}, PayloadType: ptVP8}, webrtc.RTPCodecTypeVideo},
		{webrtc.RTPCodecParameters{RTPCodecCapability: webrtc.RTPCodecCapability{
			MimeType: webrtc.MimeTypeRTX, ClockRate: 90000, SDPFmtpLine: "apt=96",
		}, PayloadType: ptRTX}, webrtc.RTPCodecTypeVideo},
	}
	for _, c := range codecs {
		if err := me.RegisterCodec(c.c, c.kind); err != nil {
			return nil, err
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
