// Package srtpkeys gives the SRTP contexts of a connection pion has
// negotiated, for code that encrypts or decrypts media outside pion's own
// pipeline: the in-house SFU's writes, the synthetic participants' reads.
package srtpkeys

import (
	"errors"
	"reflect"
	"unsafe"

	"github.com/pion/dtls/v3"
	"github.com/pion/sdp/v3"
	"github.com/pion/srtp/v3"
	"github.com/pion/webrtc/v4"
)

// Contexts returns fresh SRTP contexts for the connection dt carries, with
// this side taken as the DTLS client (asClient) or server: local encrypts
// what this side sends, remote decrypts what it receives. A context keeps
// its own rollover counters, so a stream must go through one context only.
func Contexts(dt *webrtc.DTLSTransport, asClient bool) (local, remote *srtp.Context, err error) {
	conn, profile, err := dtlsState(dt)
	if err != nil {
		return nil, nil, err
	}
	state, ok := conn.ConnectionState()
	if !ok {
		return nil, nil, errors.New("no DTLS state")
	}
	cfg := srtp.Config{Profile: profile}
	if err := cfg.ExtractSessionKeysFromDTLS(&state, asClient); err != nil {
		return nil, nil, err
	}
	if local, err = srtp.CreateContext(cfg.Keys.LocalMasterKey, cfg.Keys.LocalMasterSalt, profile); err != nil {
		return nil, nil, err
	}
	if remote, err = srtp.CreateContext(cfg.Keys.RemoteMasterKey, cfg.Keys.RemoteMasterSalt, profile); err != nil {
		return nil, nil, err
	}
	return local, remote, nil
}

// LocalIsClient reads this side's DTLS role from the descriptions: an
// answer's setup attribute says which role its writer took.
func LocalIsClient(pc *webrtc.PeerConnection) (bool, error) {
	for _, d := range []struct {
		desc    *webrtc.SessionDescription
		isLocal bool
	}{{pc.CurrentLocalDescription(), true}, {pc.CurrentRemoteDescription(), false}} {
		if d.desc == nil || d.desc.Type != webrtc.SDPTypeAnswer {
			continue
		}
		// parsed here: the description is pion's own, and its Unmarshal
		// writes the result into it while pion may be reading it
		parsed := &sdp.SessionDescription{}
		if err := parsed.UnmarshalString(d.desc.SDP); err != nil {
			return false, err
		}
		for _, m := range parsed.MediaDescriptions {
			switch v, _ := m.Attribute("setup"); v {
			case "active":
				return d.isLocal, nil
			case "passive":
				return !d.isLocal, nil
			}
		}
	}
	return false, errors.New("no answer chose a DTLS role")
}

// dtlsState reads the DTLS connection and SRTP profile pion negotiated; pion
// does not export them (pinned version: the tests of both users fail if they
// move).
func dtlsState(dt *webrtc.DTLSTransport) (*dtls.Conn, srtp.ProtectionProfile, error) {
	v := reflect.ValueOf(dt).Elem()
	conn, profile := v.FieldByName("conn"), v.FieldByName("srtpProtectionProfile")
	if !conn.IsValid() || !profile.IsValid() || conn.Type() != reflect.TypeFor[*dtls.Conn]() ||
		profile.Type() != reflect.TypeFor[srtp.ProtectionProfile]() {
		return nil, 0, errors.New("pion's DTLSTransport has no conn or srtpProtectionProfile field")
	}
	dc := *(**dtls.Conn)(unsafe.Pointer(conn.UnsafeAddr()))
	if dc == nil {
		return nil, 0, errors.New("no DTLS connection yet")
	}
	return dc, *(*srtp.ProtectionProfile)(unsafe.Pointer(profile.UnsafeAddr())), nil
}
