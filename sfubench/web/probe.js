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
    follow,
    drain,
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

  // Per-frame code sampling while a measurement runs: for every frame a received track delivers
  // (MediaStreamTrackProcessor on a clone of the track), the mean luma of each code cell's centre,
  // copied straight from the decoded frame's Y plane: no canvas, no RGB conversion, a few KB per
  // frame, so sampling does not cost the page the frames it measures. Only these levels leave the
  // page; quality/framecode.py decides the number, so there is one decoder. Frames counted here
  // are those delivered and decoded; what a headless compositor then shows is not the SFU's doing.
  // A processor takes about a second to deliver its first frame, longer than a ramp measurement,
  // so readers keep running once started; each drain() hands over what came since the last one.
  // Each sample: [read time, ms since the epoch; the frame's own timestamp, ms; cell levels]. Reads
  // wait whenever the main thread is busy (getStats, captures), so frames are timed by their own
  // timestamps, set as they arrive off the main thread; the engine puts them on the epoch.
  const series = {};   // user -> {reader, samples: [[read ms, frame ms, [levels]]]}

  async function pump(s, code) {
    for (;;) {
      const {value: frame, done} = await s.reader.read();
      if (done) return;
      try {
        const sx = frame.codedWidth / code.width, sy = frame.codedHeight / code.height;
        const w = Math.min(frame.codedWidth, 2 * Math.ceil(code.cells * code.cell * sx / 2));
        const h = Math.min(frame.codedHeight, 2 * Math.ceil(code.rows * code.cell * sy / 2));
        const buf = new Uint8Array(frame.allocationSize({rect: {x: 0, y: 0, width: w, height: h}}));
        const planes = await frame.copyTo(buf, {rect: {x: 0, y: 0, width: w, height: h}});
        const {offset, stride} = planes[0];   // Y comes first in I420 and NV12
        const cw = code.cell * sx, ch = code.cell * sy;
        const levels = [];
        for (let r = 0; r < code.rows; r++) {
          for (let k = 0; k < code.cells; k++) {
            let sum = 0, n = 0;
            for (let y = Math.floor((r + 0.25) * ch); y < Math.ceil((r + 0.75) * ch); y++) {
              for (let x = Math.floor((k + 0.25) * cw); x < Math.ceil((k + 0.75) * cw); x++) {
                sum += buf[offset + y * stride + x];
                n++;
              }
            }
            levels.push(Math.round(sum / n));
          }
        }
        s.samples.push([performance.timeOrigin + performance.now(), frame.timestamp / 1000, levels]);
      } finally {
        frame.close();
      }
    }
  }

  function follow(code) {
    if (typeof MediaStreamTrackProcessor === 'undefined') return;
    for (const [user, v] of Object.entries(videos)) {
      const track = user !== params.user && !series[user] && v.srcObject && v.srcObject.getVideoTracks()[0];
      if (!track) continue;
      const clone = track.clone();
      const s = series[user] = {clone, samples: [],
        reader: new MediaStreamTrackProcessor({track: clone, maxBufferSize: 30}).readable.getReader()};
      pump(s, code).catch(() => {});
    }
  }

  function drain() {
    const out = {};
    for (const [user, s] of Object.entries(series)) {
      out[user] = s.samples;
      s.samples = [];
    }
    return out;
  }

  function capture(user) {
    const c = snapshot(user);
    return c && c.toDataURL('image/png');
  }
})();
