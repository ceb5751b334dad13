package client

import (
	"net"
	"syscall"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/logging"
	"github.com/pion/sdp/v3"
	"github.com/pion/transport/v4"
	"github.com/pion/transport/v4/stdnet"
	"github.com/pion/webrtc/v4"
)

// APIOptions tune a synthetic participant's pion stack.
type APIOptions struct {
	// IPFilter picks the local addresses ICE may gather from.
	IPFilter func(net.IP) bool
	// First are interceptors that see packets before the browser-like set
	// (tests use one to drop packets as a lossy network would).
	First []interceptor.Factory
	// NetworkTypes default to UDP over IPv4.
	NetworkTypes []webrtc.NetworkType
	// Conn, if set, carries all of the participant's ICE traffic.
	Conn net.PacketConn
	// ReadBuffer, if set, is the receive buffer of every UDP socket ICE
	// opens, in bytes, whatever the system's cap (it needs CAP_NET_ADMIN).
	ReadBuffer int
	// WrapNet, if set, wraps the network ICE opens its sockets on (a caller
	// that reads the media off them itself).
	WrapNet func(transport.Net) transport.Net
	// OwnFeedback leaves the receive side's feedback (NACKs, receiver
	// reports, transport-wide congestion feedback) to the caller, who feeds
	// the media it reads itself to recvfb and a twcc.Recorder, and the send
	// side's to a Sender, Sender's if set (a factory per API, so per
	// connection: its Made Sender is the connection's). The session
	// description offers the same either way.
	OwnFeedback bool
	Sender      *SenderFactory
	// Simulcast names each stream's section and layer in its packets (the
	// MID and rid header extensions, and the repaired rid on a layer's
	// retransmissions), as a sender of simulcast layers must.
	Simulcast bool
	// Dependencies offers the dependency descriptor for video, as Chrome
	// does for the frames of an SVC stream.
	Dependencies bool
	// LinkRTT is the round trip of the participant's link, from which its
	// DTLS handshake times its first retransmission (DTLSTimeout).
	LinkRTT time.Duration
}

// DTLSTimeout is the first DTLS retransmission timeout Chrome takes on a
// link of round trip rtt, as its DtlsTransport sets it once ICE has measured
// the round trip: twice that, within 50 ms and 3 s. pion's own is a second
// whatever the link: a first flight lost to an endpoint not yet ready cost a
// synthetic participant's join a second that a browser's does not.
func DTLSTimeout(rtt time.Duration) time.Duration {
	return min(max(2*rtt, 50*time.Millisecond), 3*time.Second)
}

// DependencyURI names the dependency descriptor (the AV1 RTP
// specification's header extension).
const DependencyURI = "https://aomediacodec.github.io/av1-rtp-spec/#dependency-descriptor-rtp-header-extension"

// NewAPI builds the stack a browser would bring: NACK, RTCP reports and
// transport-wide congestion feedback, on loopback, without mDNS. The stats
// interceptor is left out: it keeps a record of every SSRC it ever saw,
// which would blur the SFU's leak check.
func NewAPI(o APIOptions) (*webrtc.API, error) {
	me := &webrtc.MediaEngine{}
	if err := me.RegisterDefaultCodecs(); err != nil {
		return nil, err
	}
	ir := &interceptor.Registry{}
	for _, f := range o.First {
		ir.Add(f)
	}
	if o.Simulcast {
		ir.Add(repairNamerFactory{})
	}
	var sender *SenderFactory
	if o.OwnFeedback {
		if sender = o.Sender; sender == nil {
			sender = &SenderFactory{}
		}
	}
	if err := configureFeedback(me, ir, sender); err != nil {
		return nil, err
	}
	if o.Simulcast {
		for _, uri := range []string{sdp.SDESMidURI, sdp.SDESRTPStreamIDURI, sdp.SDESRepairRTPStreamIDURI} {
			if err := me.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: uri}, webrtc.RTPCodecTypeVideo); err != nil {
				return nil, err
			}
		}
	}
	if o.Dependencies {
		if err := me.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: DependencyURI}, webrtc.RTPCodecTypeVideo); err != nil {
			return nil, err
		}
	}
	se := webrtc.SettingEngine{}
	lf := logging.NewDefaultLoggerFactory()
	lf.DefaultLogLevel = logging.LogLevelError
	se.LoggerFactory = lf
	se.SetIncludeLoopbackCandidate(true)
	se.SetDTLSRetransmissionInterval(DTLSTimeout(o.LinkRTT))
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	if o.IPFilter != nil {
		se.SetIPFilter(o.IPFilter)
	}
	types := o.NetworkTypes
	if types == nil {
		types = []webrtc.NetworkType{webrtc.NetworkTypeUDP4}
	}
	se.SetNetworkTypes(types)
	if o.Conn != nil {
		se.SetICEUDPMux(ice.NewUDPMuxDefault(ice.UDPMuxParams{UDPConn: o.Conn}))
	}
	if o.ReadBuffer > 0 || o.WrapNet != nil {
		var n transport.Net
		n, err := stdnet.NewNet()
		if err != nil {
			return nil, err
		}
		if o.ReadBuffer > 0 {
			n = bufferedNet{n.(*stdnet.Net), o.ReadBuffer}
		}
		if o.WrapNet != nil {
			n = o.WrapNet(n)
		}
		se.SetNet(n)
	}
	return webrtc.NewAPI(webrtc.WithMediaEngine(me), webrtc.WithInterceptorRegistry(ir), webrtc.WithSettingEngine(se)), nil
}

// configureFeedback registers NACK, RTCP reports and transport-wide
// congestion feedback as webrtc.ConfigureNack, ConfigureRTCPReports and
// ConfigureTWCCSender do, retransmissions kept within a browser's bounds
// (resendLimiter); with a sender, the receive side's interceptors are left
// to the caller (recvfb), the send side's to the sender (the same reports,
// responses and bounds), and the offer stays.
func configureFeedback(me *webrtc.MediaEngine, ir *interceptor.Registry, sender *SenderFactory) error {
	if sender == nil {
		ir.Add(resendLimiterFactory{}) // before the NACK responder: inside it
		if err := webrtc.ConfigureNack(me, ir); err != nil {
			return err
		}
		if err := webrtc.ConfigureRTCPReports(ir); err != nil {
			return err
		}
		return webrtc.ConfigureTWCCSender(me, ir)
	}
	ir.Add(sender)
	for _, kind := range []webrtc.RTPCodecType{webrtc.RTPCodecTypeVideo, webrtc.RTPCodecTypeAudio} {
		if kind == webrtc.RTPCodecTypeVideo {
			me.RegisterFeedback(webrtc.RTCPFeedback{Type: "nack"}, kind)
			me.RegisterFeedback(webrtc.RTCPFeedback{Type: "nack", Parameter: "pli"}, kind)
		}
		me.RegisterFeedback(webrtc.RTCPFeedback{Type: webrtc.TypeRTCPFBTransportCC}, kind)
		// The MID, as Chrome offers it: an SFU may send a new stream before the
		// description that declares it is applied, and it names its section.
		for _, uri := range []string{sdp.TransportCCURI, sdp.SDESMidURI} {
			if err := me.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: uri}, kind); err != nil {
				return err
			}
		}
	}
	return nil
}

// bufferedNet opens UDP sockets with a receive buffer of their own size: the
// default (about 200 KB) overflows when a burst of a hundred packets lands
// at once, as it does from an SFU catching up after a stall on a link with
// no queue of its own, such as a veth.
type bufferedNet struct {
	*stdnet.Net
	size int
}

func (n bufferedNet) ListenUDP(network string, addr *net.UDPAddr) (transport.UDPConn, error) {
	c, err := n.Net.ListenUDP(network, addr)
	if err != nil {
		return nil, err
	}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) {
				if syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, n.size) != nil {
					_ = c.SetReadBuffer(n.size) // unprivileged: up to the system's cap
				}
			})
		}
	}
	return c, nil
}

// AsksForLosses says whether a receiver of codec sends NACKs for what it
// lost.
func AsksForLosses(codec webrtc.RTPCodecParameters) bool { return asksForLosses(codec.RTCPFeedback) }

// asksForLosses says whether feedback negotiates "nack" without a parameter
// ("nack pli" is another thing), as pion decides whether to ask for losses
// and answer such asks. pion's webrtc and interceptor packages each have
// their own type of it.
func asksForLosses[F ~struct{ Type, Parameter string }](feedback []F) bool {
	for _, fb := range feedback {
		if f := struct{ Type, Parameter string }(fb); f.Type == webrtc.TypeRTCPFBNACK && f.Parameter == "" {
			return true
		}
	}
	return false
}
