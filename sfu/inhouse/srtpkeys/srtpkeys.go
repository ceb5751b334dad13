// Package srtpkeys gives the SRTP contexts of a connection pion has
// negotiated, for code that encrypts or decrypts media outside pion's own
// pipeline: the in-house SFU's and the synthetic participants' direct paths.
package srtpkeys

import (
	"errors"
	"reflect"
	"unsafe"

	"github.com/pion/dtls/v3"
	"github.com/pion/srtp/v3"
	"github.com/pion/webrtc/v4"
)

// Contexts returns fresh SRTP contexts for the connection dt carries: local
// encrypts what this side sends, remote decrypts what it receives. A context
// keeps its own rollover counters, so a stream must go through one context
// only.
func Contexts(dt *webrtc.DTLSTransport) (local, remote RTP, err error) {
	conn, profile, err := dtlsState(dt)
	if err != nil {
		return nil, nil, err
	}
	state, ok := conn.ConnectionState()
	if !ok {
		return nil, nil, errors.New("no DTLS state")
	}
	client, err := isClient(&state)
	if err != nil {
		return nil, nil, err
	}
	cfg := srtp.Config{Profile: profile}
	if err := cfg.ExtractSessionKeysFromDTLS(&state, client); err != nil {
		return nil, nil, err
	}
	if local, err = NewRTP(cfg.Keys.LocalMasterKey, cfg.Keys.LocalMasterSalt, profile); err != nil {
		return nil, nil, err
	}
	if remote, err = NewRTP(cfg.Keys.RemoteMasterKey, cfg.Keys.RemoteMasterSalt, profile); err != nil {
		return nil, nil, err
	}
	return local, remote, nil
}

// isClient is the role this side took in the DTLS handshake. The session
// descriptions do not always say it: after the other side re-offered, this
// side's answer may name the role its settings prefer, not the one its
// connection has (a synthetic participant's answers to Medooze's offers
// did), and keys taken for the wrong role decrypt nothing.
func isClient(s *dtls.State) (bool, error) {
	f := reflect.ValueOf(s).Elem().FieldByName("isClient")
	if !f.IsValid() || f.Kind() != reflect.Bool {
		return false, errors.New("pion's DTLS state has no isClient field")
	}
	return f.Bool(), nil
}

// dtlsState reads the DTLS connection and SRTP profile pion negotiated; pion
// does not export them (pinned versions: the tests of both users fail if
// they move).
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
