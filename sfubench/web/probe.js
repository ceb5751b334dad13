// The shared probe: every SFU client page includes it first. The page reports what it opens
// (peer connections, videos, state); the engine reads stats and frames through the same object,
// so no SFU-specific code ever runs in the engine. Contract: docs/contracts.md.
(function () {
  'use strict';
  const params = Object.freeze(Object.fromEntries(new URLSearchParams(location.search)));
  const conns = [];          // {pc, peer, direction}
  const trackUsers = {};     // receiving track id -> remote user
  const videos = {};         // user -> <video>

  const api = {
    params,
    state: 'joining',
    reason: null,
    videos,
    setState(state, reason) {
      // A failure is final: a late 'joined' must not hide why a participant broke.
      if (api.state === 'failed') return;
      api.state = state;
      api.reason = reason || null;
    },
    addPeerConnection(pc, {peer = null, direction = 'sendrecv'} = {}) {
      conns.push({pc, peer, direction});
    },
    mapTrack(trackId, user) { trackUsers[trackId] = user; },
    addVideo(user, el) {
      el.dataset.user = user;
      videos[user] = el;
    },
    stats,
    snapshot,
    capture,
  };
  window.sfubench = api;
  window.addEventListener('error', (e) => api.setState('failed', 'page error: ' + e.message));
  window.addEventListener('unhandledrejection', (e) => api.setState('failed', 'unhandled rejection: ' + (e.reason && e.reason.message || e.reason)));

  function num(v) { return typeof v === 'number' && isFinite(v) ? v : null; }

  // One sample per RTP stream, normalised to the schema in docs/contracts.md.
  async function stats() {
    const out = [];
    for (const {pc, peer, direction} of conns) {
      if (pc.connectionState === 'closed') continue;
      const report = await pc.getStats();
      const byId = new Map();
      report.forEach((s) => byId.set(s.id, s));
      let pair = null;
      report.forEach((s) => {
        if (s.type === 'transport' && s.selectedCandidatePairId) pair = byId.get(s.selectedCandidatePairId);
      });
      if (!pair) report.forEach((s) => { if (s.type === 'candidate-pair' && s.nominated && s.state === 'succeeded') pair = s; });
      const pairRtt = pair ? num(pair.currentRoundTripTime) : null;
      report.forEach((s) => {
        if (s.type !== 'outbound-rtp' && s.type !== 'inbound-rtp') return;
        const send = s.type === 'outbound-rtp';
        const remote = send && s.remoteId ? byId.get(s.remoteId) : null;
        out.push({
          t: s.timestamp,
          direction: send ? 'send' : 'recv',
          kind: s.kind,
          peer: send ? null : (peer !== null ? peer : (trackUsers[s.trackIdentifier] || null)),
          ssrc: s.ssrc,
          bytes: num(send ? s.bytesSent : s.bytesReceived),
          packets: num(send ? s.packetsSent : s.packetsReceived),
          packetsLost: send ? (remote ? num(remote.packetsLost) : null) : num(s.packetsLost),
          jitter: send ? (remote ? num(remote.jitter) : null) : num(s.jitter),
          framesEncoded: num(s.framesEncoded),
          framesDecoded: num(s.framesDecoded),
          framesPerSecond: num(s.framesPerSecond),
          frameWidth: num(s.frameWidth),
          frameHeight: num(s.frameHeight),
          qpSum: num(s.qpSum),
          freezeCount: num(s.freezeCount),
          totalFreezesDuration: num(s.totalFreezesDuration),
          nackCount: num(s.nackCount),
          pliCount: num(s.pliCount),
          rtt: remote && num(remote.roundTripTime) !== null ? remote.roundTripTime : pairRtt,
          availableOutgoingBitrate: pair ? num(pair.availableOutgoingBitrate) : null,
          targetBitrate: num(s.targetBitrate),
          connection: direction,
        });
      });
    }
    return out;
  }

  // The frame at the video's native size, RGB: a canvas left at its default 300x150 (KITE's bug)
  // would rescale the picture and make a still image of a moving one.
  function snapshot(user) {
    const v = videos[user];
    if (!v || !v.videoWidth || !v.videoHeight) return null;
    const c = document.createElement('canvas');
    c.width = v.videoWidth;
    c.height = v.videoHeight;
    c.getContext('2d', {alpha: false}).drawImage(v, 0, 0, c.width, c.height);
    return c;
  }

  function capture(user) {
    const c = snapshot(user);
    return c && c.toDataURL('image/png');
  }
})();
