package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pion/sdp/v3"
)

// mediasoup speaks ORTC: transports, producers and consumers described by
// parameters, not by SDP. What the driver (mediasoup.go) exchanges with the
// server, and the server's side of each description, which it writes from
// those parameters as mediasoup-client does.

// The router's header extensions the driver asks for: the ones pion's stack
// here handles (transport-wide congestion feedback) and the mid.
var mediasoupExtensions = map[string]bool{
	sdp.SDESMidURI:               true,
	sdp.TransportCCURI:           true,
	sdp.SDESRTPStreamIDURI:       true, // a simulcast layer's packets name it
	sdp.SDESRepairRTPStreamIDURI: true,
}

type msProducerInfo struct {
	ProducerID string `json:"producerId"`
	User       string `json:"user"`
}

type msTransport struct {
	ID            string `json:"id"`
	IceParameters struct {
		UsernameFragment string `json:"usernameFragment"`
		Password         string `json:"password"`
	} `json:"iceParameters"`
	IceCandidates []struct {
		Foundation string `json:"foundation"`
		Priority   uint32 `json:"priority"`
		IP         string `json:"ip"`
		Protocol   string `json:"protocol"`
		Port       int    `json:"port"`
		Type       string `json:"type"`
	} `json:"iceCandidates"`
	DtlsParameters struct {
		Fingerprints []struct {
			Algorithm string `json:"algorithm"`
			Value     string `json:"value"`
		} `json:"fingerprints"`
	} `json:"dtlsParameters"`
}

type msCodec struct {
	MimeType     string            `json:"mimeType"`
	Kind         string            `json:"kind,omitempty"`
	PayloadType  int               `json:"payloadType,omitempty"`
	PreferredPT  int               `json:"preferredPayloadType,omitempty"`
	ClockRate    int               `json:"clockRate"`
	Channels     int               `json:"channels,omitempty"`
	Parameters   map[string]any    `json:"parameters"`
	RtcpFeedback []msFeedback      `json:"rtcpFeedback"`
	extra        map[string]string // not sent
}

type msFeedback struct {
	Type      string `json:"type"`
	Parameter string `json:"parameter,omitempty"`
}

type msExtension struct {
	Kind        string `json:"kind,omitempty"`
	URI         string `json:"uri"`
	ID          int    `json:"id,omitempty"`
	PreferredID int    `json:"preferredId,omitempty"`
}

// msEncoding is one RTP stream of a producer: a simulcast layer, or with a
// scalability mode ("L3T3_KEY") every spatial layer of an SVC stream.
type msEncoding struct {
	SSRC            uint32 `json:"ssrc"`
	ScalabilityMode string `json:"scalabilityMode,omitempty"`
}

type msRTPParameters struct {
	Mid              string        `json:"mid,omitempty"`
	Codecs           []msCodec     `json:"codecs"`
	HeaderExtensions []msExtension `json:"headerExtensions"`
	Encodings        []msEncoding  `json:"encodings"`
	Rtcp             struct {
		Cname       string `json:"cname"`
		ReducedSize bool   `json:"reducedSize"`
	} `json:"rtcp"`
}

type msConsumer struct {
	ID            string          `json:"id"`
	Kind          string          `json:"kind"`
	RtpParameters msRTPParameters `json:"rtpParameters"`
	user          string
	closed        bool
}

// mediasoup probes the receive bandwidth with padding on a stream of its
// own; mediasoup-client gives it a section of its own with these values, so
// the client's transport-wide feedback covers it.
const (
	msProbator     = "probator"
	msProbatorSSRC = 1234
	msProbatorPT   = 127
)

// probator is the probation stream's pseudo-consumer, made from the first
// video consumer's parameters.
func probator(video *msConsumer) *msConsumer {
	rp := video.RtpParameters
	codec := rp.Codecs[0]
	codec.PayloadType = msProbatorPT
	rp.Mid, rp.Codecs = msProbator, []msCodec{codec}
	rp.Encodings = []msEncoding{{SSRC: msProbatorSSRC}}
	rp.Rtcp.Cname = msProbator
	return &msConsumer{ID: msProbator, Kind: "video", RtpParameters: rp, user: msProbator}
}

// acceptLayers answers an offered section's simulcast layers: each rid the
// offer sends, received.
func acceptLayers(b *strings.Builder, m *sdp.MediaDescription) {
	layers, ok := m.Attribute("simulcast")
	if !ok {
		return
	}
	for _, a := range m.Attributes {
		if rid, ok := strings.CutSuffix(a.Value, " send"); a.Key == "rid" && ok {
			fmt.Fprintf(b, "a=rid:%s recv\r\n", rid)
		}
	}
	fmt.Fprintf(b, "a=simulcast:recv %s\r\n", strings.TrimPrefix(layers, "send "))
}

// producerParameters picks from one offered m-section the router's codec
// of its kind (by name, with the offer's payload type) and the offered
// extensions mediasoup takes.
func (s *msSession) producerParameters(m *sdp.MediaDescription) (msRTPParameters, error) {
	var rp msRTPParameters
	rp.Mid, _ = m.Attribute("mid")
	for _, c := range s.caps.Codecs {
		if c.Kind != m.MediaName.Media {
			continue
		}
		name := strings.SplitN(c.MimeType, "/", 2)[1]
		for _, f := range m.MediaName.Formats {
			pt, _ := strconv.Atoi(f)
			rtpmap, _ := attrFor(m, "rtpmap", f)
			fmtp, _ := attrFor(m, "fmtp", f)
			offered := fmtpParameters(fmtp)
			if strings.HasPrefix(strings.ToLower(rtpmap), strings.ToLower(name)+"/") && sameFormat(c.Parameters, offered) {
				c.PayloadType, c.PreferredPT, c.Kind, c.Parameters = pt, 0, "", offered
				if fmtp != "" {
					c.extra = map[string]string{"fmtp": fmtp}
				}
				rp.Codecs = []msCodec{c}
				break
			}
		}
		if rp.Codecs != nil {
			break
		}
	}
	if rp.Codecs == nil {
		return rp, fmt.Errorf("no codec the router takes in the offer's %s section", m.MediaName.Media)
	}
	for _, a := range m.Attributes {
		if a.Key != "extmap" {
			continue
		}
		id, uri, ok := strings.Cut(a.Value, " ")
		n, err := strconv.Atoi(strings.SplitN(id, "/", 2)[0])
		if ok && err == nil && mediasoupExtensions[uri] {
			rp.HeaderExtensions = append(rp.HeaderExtensions, msExtension{URI: uri, ID: n})
		}
	}
	return rp, nil
}

// formatKeys are the parameters mediasoup matches a producer's codec to the
// router's by: an offer carries H.264 in several profiles, and mediasoup
// takes the one its router has.
var formatKeys = []string{"packetization-mode", "profile-level-id", "profile-id"}

func sameFormat(router, offered map[string]any) bool {
	for _, k := range formatKeys {
		if v, ok := router[k]; ok && fmt.Sprint(v) != fmt.Sprint(offered[k]) {
			return false
		}
	}
	return true
}

// fmtpParameters are a format's parameters as mediasoup-client gives them
// (sdp-transform's): numbers as numbers, which mediasoup compares strictly
// (H.264's packetization-mode, its profile for a producer).
func fmtpParameters(fmtp string) map[string]any {
	ps := map[string]any{}
	for _, kv := range strings.Split(fmtp, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		if k == "" {
			continue
		}
		if n, err := strconv.Atoi(v); err == nil {
			ps[k] = n
		} else {
			ps[k] = v
		}
	}
	return ps
}

// sessionHead writes the session part of mediasoup's side of a description.
func sessionHead(b *strings.Builder, t *msTransport, sections []*sdp.MediaDescription) {
	var mids []string
	for _, m := range sections {
		if mid, ok := m.Attribute("mid"); ok {
			mids = append(mids, mid)
		}
	}
	fmt.Fprintf(b, "v=0\r\no=mediasoup 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\na=ice-lite\r\n")
	fmt.Fprintf(b, "a=group:BUNDLE %s\r\na=msid-semantic: WMS *\r\n", strings.Join(mids, " "))
	for _, f := range t.DtlsParameters.Fingerprints {
		if f.Algorithm == "sha-256" {
			fmt.Fprintf(b, "a=fingerprint:%s %s\r\n", f.Algorithm, f.Value)
		}
	}
}

// media writes one m-section of mediasoup's side: its transport, the codec
// and extensions of rp, and for a consumer its SSRC and the stream it
// belongs to (named after its publisher, which is how OnTrack tells them).
func media(b *strings.Builder, t *msTransport, rp msRTPParameters, kind, direction, setup string, c *msConsumer) {
	codec := rp.Codecs[0]
	fmt.Fprintf(b, "m=%s 7 UDP/TLS/RTP/SAVPF %d\r\nc=IN IP4 127.0.0.1\r\n", kind, codec.PayloadType)
	fmt.Fprintf(b, "a=mid:%s\r\na=%s\r\na=rtcp-mux\r\na=rtcp-rsize\r\na=setup:%s\r\n", rp.Mid, direction, setup)
	fmt.Fprintf(b, "a=ice-ufrag:%s\r\na=ice-pwd:%s\r\n", t.IceParameters.UsernameFragment, t.IceParameters.Password)
	for _, cand := range t.IceCandidates {
		fmt.Fprintf(b, "a=candidate:%s 1 %s %d %s %d typ %s\r\n", cand.Foundation, cand.Protocol, cand.Priority,
			cand.IP, cand.Port, cand.Type)
	}
	b.WriteString("a=end-of-candidates\r\n")
	name := strings.SplitN(codec.MimeType, "/", 2)[1]
	if codec.Channels > 1 {
		fmt.Fprintf(b, "a=rtpmap:%d %s/%d/%d\r\n", codec.PayloadType, name, codec.ClockRate, codec.Channels)
	} else {
		fmt.Fprintf(b, "a=rtpmap:%d %s/%d\r\n", codec.PayloadType, name, codec.ClockRate)
	}
	if fmtp := codec.extra["fmtp"]; fmtp != "" {
		fmt.Fprintf(b, "a=fmtp:%d %s\r\n", codec.PayloadType, fmtp)
	} else if len(codec.Parameters) > 0 {
		var ps []string
		for k, v := range codec.Parameters {
			ps = append(ps, fmt.Sprintf("%s=%v", k, v))
		}
		fmt.Fprintf(b, "a=fmtp:%d %s\r\n", codec.PayloadType, strings.Join(ps, ";"))
	}
	for _, fb := range codec.RtcpFeedback {
		fmt.Fprintf(b, "a=rtcp-fb:%d %s\r\n", codec.PayloadType, strings.TrimSpace(fb.Type+" "+fb.Parameter))
	}
	for _, e := range rp.HeaderExtensions {
		fmt.Fprintf(b, "a=extmap:%d %s\r\n", e.ID, e.URI)
	}
	if c != nil && len(rp.Encodings) > 0 {
		ssrc := rp.Encodings[0].SSRC
		fmt.Fprintf(b, "a=msid:%s %s\r\na=ssrc:%d cname:%s\r\n", c.user, c.ID, ssrc, rp.Rtcp.Cname)
	}
}

func attrFor(m *sdp.MediaDescription, key, pt string) (string, bool) {
	for _, a := range m.Attributes {
		if a.Key == key {
			if rest, ok := strings.CutPrefix(a.Value, pt+" "); ok {
				return rest, true
			}
		}
	}
	return "", false
}

func dtlsFingerprint(d *sdp.SessionDescription) (map[string]string, error) {
	v, ok := d.Attribute("fingerprint")
	for _, m := range d.MediaDescriptions {
		if ok {
			break
		}
		v, ok = m.Attribute("fingerprint")
	}
	alg, value, cut := strings.Cut(v, " ")
	if !ok || !cut {
		return nil, errors.New("no DTLS fingerprint in the local description")
	}
	return map[string]string{"algorithm": alg, "value": value}, nil
}

func setupOf(d *sdp.SessionDescription) string {
	for _, m := range d.MediaDescriptions {
		if v, ok := m.Attribute("setup"); ok {
			return v
		}
	}
	return ""
}
