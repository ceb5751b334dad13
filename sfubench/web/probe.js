// The shared probe: every SFU client page includes it first. It measures whatever the page does —
// every RTCPeerConnection the page (or its SFU library) opens is wrapped at construction — and talks
// to the engine over the page's own origin: it posts its records to /collect, and the answer to its
// twice-a-second health record carries the engine's commands, so no connection stays open (a browser
// allows only six per host, and a tab holds many participants). Nothing SFU-specific runs in the
// engine. Contract: docs/contracts.md.
//
// A load generator must not spend its CPU on what nobody measures: remote audio is decoded and
// played out muted (what its jitter buffer played is measured), videos are not rendered, and the
// microphone's echo canceller, noise suppressor and gain control stay off, unless the engine's
// settings (the `probe` URL parameter) ask for them. Frame codes are read off the decoded frames
// in a worker (sampler.js).
(function () {
  'use strict';
  const params = Object.freeze(Object.fromEntries(new URLSearchParams(location.search)));
  const settings = JSON.parse(params.probe || '{}');
  const self = params.user;
  const conns = [];                 // every RTCPeerConnection opened in this page
  const owners = new Map();         // MediaStreamTrack id -> the user it shows (self for local)
  const HEARTBEAT_MS = 100;         // main-thread lag is this timer's lateness
  const HEALTH_EVERY = 5;           // heartbeats per health record (and per look for commands)

  const api = {
    params,
    // Video layers the page publishes (simulcast), when its adapter says it can (sfu.toml
    // `simulcast = true`).
    simulcast: settings.simulcast || 1,
    // The video codec the run asks browsers to publish: 'vp8', 'h264', 'vp9' or 'av1' (the names of
    // sfu.toml's `codecs`).
    codec: settings.codec || 'vp8',
    // An offer with that codec alone in its video sections, then the retransmission format of it:
    // for a page whose SFU offers several, as the browser sends the offer's first from the moment it
    // applies it (an answer narrowed by setCodecPreferences may start on another, which an SFU then
    // cannot place), or whose SFU answers with every codec of the page's own offer. H.264 as
    // constrained baseline in packetization mode 1, VP9 and AV1 as profile 0: the forms every SFU of
    // the comparison takes. VP8, Chrome's default, changes nothing.
    offerWithCodec(sdp) {
      if (api.codec === 'vp8') return sdp;
      const form = {h264: [/packetization-mode=1/, /profile-level-id=42e01f/], vp9: [/profile-id=0/],
                    av1: [/profile=0/]}[api.codec] || [];
      return sdp.split(/\r\n(?=m=)/).map((section) => {
        if (!section.startsWith('m=video')) return section;
        const lines = section.split('\r\n');
        const attr = (name, pt) => (lines.find((l) => l.startsWith(`a=${name}:${pt} `)) || '').replace(/^[^ ]* /, '');
        const [m, ...rest] = lines;
        const [head, pts] = [m.split(' ').slice(0, 3), m.split(' ').slice(3)];
        const media = pts.filter((pt) => attr('rtpmap', pt).toLowerCase().startsWith(api.codec + '/')
                                 && form.every((re) => re.test(attr('fmtp', pt))));
        const kept = new Set([...media, ...pts.filter((pt) => attr('rtpmap', pt).toLowerCase().startsWith('rtx/')
                                                       && media.some((x) => attr('fmtp', pt) === `apt=${x}`))]);
        const other = (l) => (/^a=(rtpmap|fmtp|rtcp-fb):(\d+)[ ]/.exec(l) || [])[2];
        return [[...head, ...pts.filter((pt) => kept.has(pt))].join(' '),
                ...rest.filter((l) => !other(l) || kept.has(other(l)))].join('\r\n');
      }).join('\r\n');
    },
    // The scalability mode of the run's SVC (--svc, e.g. 'L3T3_KEY'): the --simulcast layers as the
    // spatial layers of one stream; null for simulcast streams.
    svc: settings.svc || null,
    // Whether this participant publishes its camera and microphone; a viewer (false) only receives.
    publishes: settings.publish !== false,
    // The layer this participant asks its SFU for: 'largest' (the SFU's default), 'half' or 'smallest'.
    receiveLayer: settings.receive_layer || 'largest',
    // That layer's index among those published, smallest first (its rid's in q, h, f; its spatial
    // layer or substream), or null to leave the choice to the SFU ('largest', or one layer).
    receiveIndex() {
      if (api.receiveLayer === 'largest' || api.simulcast < 2) return null;
      return api.receiveLayer === 'smallest' ? 0 : api.simulcast - 2;
    },
    // Those layers for a camera of width x height, largest first: the full picture, then half and a
    // quarter of its size, each capped at what Chrome gives a simulcast layer of its size when a
    // page sets nothing (webrtc's kSimulcastFormats), so that every SFU is sent the same.
    simulcastLayers(width, height) {
      const cap = (px) => px >= 960 * 540 ? 1200000 : px >= 640 * 360 ? 700000 : px >= 480 * 270 ? 450000 : 200000;
      return [1, 2, 4].slice(0, api.simulcast).map((down, i) => {
        const w = Math.round(width / down), h = Math.round(height / down);
        return {rid: ['f', 'h', 'q'][i], scaleResolutionDownBy: down, width: w, height: h, maxBitrate: cap(w * h)};
      });
    },
    state: 'joining',
    reason: null,
    setState(state, reason) {
      // A failure is final: a late 'joined' must not hide why a participant broke.
      if (api.state === 'failed' || (api.state === state && !reason)) return;
      api.state = state;
      api.reason = reason || null;
      post('state', {state, reason: api.reason});
    },
    // The page names the participant each track shows: a local track with the page's own user,
    // a received one with its sender. That is all the probe needs to attribute stats and frames.
    addTrack(user, track) {
      if (owners.has(track.id)) return;
      owners.set(track.id, String(user));
      if (track.kind === 'video') {
        sampler.follow(String(user), track);
        if (settings.render) show(track, 'video');
        return;
      }
      recorder.add(String(user), track);
      if (user !== self) {
        // Chromium's jitter buffer runs only while something plays the track out: without it a
        // received audio track counts no sample (reports/audio.py reads what it played). A muted
        // element pulls it, decoding and concealing as a played one, and sends nothing to a device.
        show(track, 'audio', !settings.play_audio);
      }
    },
    // Set by a page that can leave and rejoin on command (the adapter conformance suite uses it).
    onleave: null,
    onrejoin: null,
  };
  window.sfubench = api;
  window.addEventListener('error', (e) => api.setState('failed', 'page error: ' + e.message));
  window.addEventListener('unhandledrejection', (e) => api.setState('failed',
    'unhandled rejection: ' + (e.reason && e.reason.message || e.reason)));

  const Native = window.RTCPeerConnection;
  window.RTCPeerConnection = class extends Native {
    constructor(...args) {
      super(...args);
      conns.push(this);
      // An ICE restart, whoever makes it, leaves a new local ufrag once its offer and answer settle
      let ufrag = null;
      this.addEventListener('signalingstatechange', () => {
        const m = this.signalingState === 'stable' && /a=ice-ufrag:(\S+)/.exec(this.localDescription?.sdp || '');
        if (!m) return;
        if (ufrag !== null && m[1] !== ufrag) post('ice_restart', {});
        ufrag = m[1];
      });
    }
  };

  const gum = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
  navigator.mediaDevices.getUserMedia = (constraints) => {
    if (constraints && constraints.audio && !settings.audio_processing) {
      const audio = typeof constraints.audio === 'object' ? {...constraints.audio} : {};
      Object.assign(audio, {echoCancellation: false, noiseSuppression: false, autoGainControl: false});
      constraints = {...constraints, audio};
    }
    return gum(constraints);
  };

  function show(track, tag, muted = tag === 'video') {
    const el = document.createElement(tag);
    el.autoplay = true;
    el.muted = muted;
    el.srcObject = new MediaStream([track]);
    el.dataset.user = owners.get(track.id);
    document.body.appendChild(el);
  }

  // The run's token (from this page's URL) goes with every post: the engine reads nothing without it.
  const headers = {'X-Sfubench-Token': settings.token || ''};

  function post(type, body) {
    return fetch('/collect', {method: 'POST', headers, body: JSON.stringify({type, user: self, ...body})})
      .catch(() => null);
  }

  // -- frames: one worker reads every video track's frames -----------------------------------
  const sampler = (() => {
    const worker = new Worker('/sampler.js');
    worker.postMessage({config: {user: self, code: settings.code, token: settings.token || ''}});
    return {
      follow(user, track) {
        if (typeof MediaStreamTrackProcessor === 'undefined') return;
        const readable = new MediaStreamTrackProcessor({track: track.clone()}).readable;
        worker.postMessage({user, readable}, [readable]);
      },
      capture(cmd) { worker.postMessage({capture: cmd}); },
      setFollow(on) { worker.postMessage({follow: on}); },
    };
  })();

  // -- audio: a stated span of each received track and of the microphone, recorded in a window ----
  // Recorded as PCM in an AudioWorklet (recorder.js) and posted to /audio with the epoch time of its
  // first sample: the engine scores what was heard against the microphone's speech after the run and
  // times its audio codes (quality/speech.py). The microphone's own recording gives the codes' send
  // times, as the sampler's camera frames give the frame codes'.
  const recorder = (() => {
    const tracks = new Map();       // user -> the audio track that is theirs (self: the microphone)
    let ctx = null;
    let loaded = null;
    let recording = 0;              // recordings under way: the context runs while there is one
    async function context() {
      if (!ctx) {
        ctx = new AudioContext({sampleRate: 16000, latencyHint: 'playback'});
        loaded = ctx.audioWorklet.addModule('/recorder.js');
      }
      await loaded;
      if (ctx.state !== 'running') await ctx.resume();
      return ctx;
    }
    function epoch(contextTime) {
      const now = ctx.getOutputTimestamp();
      return performance.timeOrigin + now.performanceTime + (contextTime - now.contextTime) * 1000;
    }
    function done(c) {
      // between recordings the context renders nothing: it costs the page no audio thread
      if (--recording === 0) c.suspend().catch(() => {});
    }
    function all(c, users, cmd) {
      const node = new AudioWorkletNode(c, 'sfubench-recorder', {
        numberOfInputs: users.length, numberOfOutputs: 1,
        processorOptions: {frames: Math.round(cmd.record * c.sampleRate)}});
      const sources = users.map((user, k) => {
        const source = c.createMediaStreamSource(new MediaStream([tracks.get(user)]));
        source.connect(node, 0, k);
        return source;
      });
      const mute = c.createGain();
      mute.gain.value = 0;   // the graph pulls the node only if it leads to the destination
      node.connect(mute).connect(c.destination);
      node.port.onmessage = (e) => {
        const t0 = epoch(e.data.started);
        sources.forEach((s) => s.disconnect());
        node.disconnect();
        mute.disconnect();
        done(c);
        users.forEach((user, k) => {
          const q = new URLSearchParams({user: self, peer: user, phase: cmd.phase, window: cmd.window,
                                         participants: cmd.participants, rate: c.sampleRate, t0});
          fetch('/audio?' + q, {method: 'POST', headers, body: e.data.pcm[k].buffer}).catch(() => {});
        });
      };
    }
    return {
      add(user, track) { tracks.set(user, track); },
      async record(cmd) {
        recording++;
        const c = await context();
        const wait = cmd.at - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const users = [...tracks.keys()].filter((user) => tracks.get(user).readyState === 'live');
        if (users.length) all(c, users, cmd);
        else done(c);
      },
    };
  })();

  // -- stats: one sample per RTP stream, normalised to the schema in docs/contracts.md ---------
  function num(v) { return typeof v === 'number' && isFinite(v) ? v : null; }
  const AUDIO_PLAYOUT = ['totalSamplesReceived', 'concealedSamples', 'silentConcealedSamples', 'concealmentEvents',
                         'insertedSamplesForDeceleration', 'removedSamplesForAcceleration', 'jitterBufferDelay',
                         'jitterBufferEmittedCount', 'jitterBufferMinimumDelay', 'packetsDiscarded'];

  async function stats() {
    const out = [];
    for (const pc of conns) {
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
        // Only what participants send: a received stream the page named no sender for is the SFU's
        // own (mediasoup's bandwidth "probator", say), not anyone's video.
        if (!send && !owners.has(s.trackIdentifier)) return;
        const remote = send && s.remoteId ? byId.get(s.remoteId) : null;
        const limits = s.qualityLimitationDurations;
        const codec = s.codecId ? byId.get(s.codecId) : null;
        const sample = {
          t: s.timestamp,
          direction: send ? 'send' : 'recv',
          kind: s.kind,
          peer: send ? null : owners.get(s.trackIdentifier),
          ssrc: s.ssrc,
          codec: codec && codec.mimeType ? codec.mimeType.split('/')[1].toLowerCase() : null,
          bytes: num(send ? s.bytesSent : s.bytesReceived),
          packets: num(send ? s.packetsSent : s.packetsReceived),
          packetsLost: send ? (remote ? num(remote.packetsLost) : null) : num(s.packetsLost),
          jitter: send ? (remote ? num(remote.jitter) : null) : num(s.jitter),
          framesEncoded: num(s.framesEncoded),
          framesDecoded: num(s.framesDecoded),
          framesDropped: num(s.framesDropped),
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
          qualityLimitationReason: s.qualityLimitationReason || null,
          qualityLimitationCpu: limits ? num(limits.cpu) : null,
          qualityLimitationBandwidth: limits ? num(limits.bandwidth) : null,
        };
        if (!send && s.kind === 'audio') {
          // what the jitter buffer played out (reports/audio.py)
          for (const key of AUDIO_PLAYOUT) sample[key] = num(s[key]);
        }
        out.push(sample);
      });
    }
    return out;
  }

  // A measurement: n samples `interval` s apart from the epoch time `at`, each posted as soon as it
  // is taken with the time the getStats round itself took (a slow round is a sign of a starved
  // client). Every page starts at the same instant, whenever it got the command; a sample whose
  // time passed while the page was held up is not taken late, it is missing.
  async function measure(cmd) {
    for (let i = 0; i < cmd.n; i++) {
      const wait = cmd.at + i * cmd.interval * 1000 - Date.now();
      if (wait < -cmd.interval * 500) continue;
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const started = performance.now();
      let samples = [];
      try {
        samples = await stats();
      } catch (e) {
        api.setState('failed', 'getStats: ' + (e && e.message || e));
      }
      post('samples', {phase: cmd.phase, window: cmd.window, i, took_ms: performance.now() - started,
                       samples});
    }
  }

  function obey(cmd) {
    if (cmd.cmd === 'measure') {
      measure(cmd);
      // a recording that cannot start (no AudioContext here) is missing from the window's, said there
      if (cmd.record) recorder.record(cmd).catch(() => {});
    }
    else if (cmd.cmd === 'capture') sampler.capture(cmd);
    else if (cmd.cmd === 'follow') sampler.setFollow(Boolean(cmd.on));
    else if (cmd.cmd === 'leave' && api.onleave) api.onleave();
    else if (cmd.cmd === 'rejoin' && api.onrejoin) api.onrejoin();
  }

  // -- health: the main thread's lag, measured by a timer's lateness; the answer holds commands ---
  let lags = [];
  let last = performance.now();
  setInterval(() => {
    const now = performance.now();
    lags.push(Math.max(0, now - last - HEARTBEAT_MS));
    last = now;
    if (lags.length >= HEALTH_EVERY) {
      post('health', {state: api.state, lag_max_ms: Math.max(...lags),
                      lag_mean_ms: lags.reduce((a, b) => a + b, 0) / lags.length})
        .then((r) => r && r.ok ? r.json() : [])
        .then((cmds) => { for (const cmd of cmds) obey(cmd); })
        .catch(() => {});
      lags = [];
    }
  }, HEARTBEAT_MS);
  post('state', {state: api.state, reason: null});
})();
