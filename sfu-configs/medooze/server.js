// A minimal Medooze SFU for sfubench, after Medooze's own SFU example but in unified plan: each
// participant has one peer connection, managed on the server by the library's SDP manager, which
// makes an offer whenever the participant's outgoing streams change. Every published track is
// forwarded to every other participant of the room in a stream named after its sender. Rooms are
// spread over the endpoints (each its own event loop thread; one per core in the tuned profile).
//
//   node server.js ADDRESS PORT ENDPOINTS RTC_MIN RTC_MAX
//
// Signalling is JSON over a WebSocket at ws://ADDRESS:PORT/:
//   client → {type: "join", room, user, sdp}       server → {type: "answer", sdp}
//   server → {type: "offer", sdp}                  client → {type: "answer", sdp}
//   server → {type: "error", message}
// GET /healthz answers ok once the endpoints are up.
'use strict';
const http = require('http');
const MediaServer = require('medooze-media-server');
const {WebSocketServer} = require('ws');

const [address, port, endpointCount, rtcMin, rtcMax] = process.argv.slice(2);
const MAX_MESSAGE = 512 << 10;
const TWCC = 'http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01';
const CAPABILITIES = {
  audio: {codecs: ['opus'], extensions: ['urn:ietf:params:rtp-hdrext:ssrc-audio-level',
                                         'urn:ietf:params:rtp-hdrext:sdes:mid', TWCC]},
  // VP8 first, as a browser offers it; H.264 and VP9 for a run's --codec (its page offers one alone)
  video: {codecs: ['vp8', 'h264;packetization-mode=1;profile-level-id=42e01f', 'vp9'], rtx: true,
          rtcpfbs: [{id: 'goog-remb'}, {id: 'transport-cc'}, {id: 'ccm', params: ['fir']}, {id: 'nack'},
                    {id: 'nack', params: ['pli']}],
          extensions: ['urn:ietf:params:rtp-hdrext:sdes:mid', TWCC,
                       'http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time']},
};

MediaServer.enableLog(false);
MediaServer.enableDebug(false);
MediaServer.setPortRange(Number(rtcMin), Number(rtcMax));
const endpoints = Array.from({length: Math.max(1, Number(endpointCount) || 1)},
                             () => MediaServer.createEndpoint(address));
const rooms = new Map();   // room id -> {endpoint, peers: Map<user, peer>}
let nextEndpoint = 0;

function send(peer, msg) {
  if (peer.ws.readyState === peer.ws.OPEN) peer.ws.send(JSON.stringify(msg));
}

// Forwards `track` (published by `from`) to `to`, in to's outgoing stream named after from.
function forward(from, track, to) {
  let out = to.outgoing.get(from.user);
  if (!out) {
    out = to.transport.createOutgoingStream(from.user);
    to.outgoing.set(from.user, out);
  }
  out.createTrack(track.getMedia()).attachTo(track);
}

function join(peer, msg) {
  if (peer.room) throw new Error('already joined');
  if (typeof msg.room !== 'string' || typeof msg.user !== 'string' || typeof msg.sdp !== 'string') {
    throw new Error('join wants room, user and sdp strings');
  }
  let room = rooms.get(msg.room);
  if (!room) {
    room = {endpoint: endpoints[nextEndpoint++ % endpoints.length], peers: new Map()};
    rooms.set(msg.room, room);
  }
  if (room.peers.has(msg.user)) throw new Error(`user ${msg.user} has a live session in room ${msg.room}`);
  peer.room = room;
  peer.user = msg.user;
  room.peers.set(msg.user, peer);
  peer.sdp = room.endpoint.createSDPManager('unified-plan', CAPABILITIES);
  peer.sdp.on('transport', (transport) => {
    peer.transport = transport;
    transport.on('incomingtrack', (track) => {
      // The library tells of a track made within a stream twice: once for the stream, once for itself.
      if (peer.published.includes(track)) return;
      peer.published.push(track);
      for (const other of room.peers.values()) if (other !== peer && other.transport) forward(peer, track, other);
    });
  });
  peer.sdp.on('renegotiationneeded', () => send(peer, {type: 'offer', sdp: peer.sdp.createLocalDescription()}));
  peer.sdp.processRemoteDescription(msg.sdp);
  send(peer, {type: 'answer', sdp: peer.sdp.createLocalDescription()});
  for (const other of room.peers.values()) {
    if (other === peer) continue;
    for (const track of other.published) forward(other, track, peer);
  }
}

function leave(peer) {
  const room = peer.room;
  if (!room) return;
  if (room.peers.get(peer.user) === peer) room.peers.delete(peer.user);
  for (const other of room.peers.values()) {
    const out = other.outgoing.get(peer.user);
    if (out) {
      other.outgoing.delete(peer.user);
      out.stop();
    }
  }
  // Stopping its outgoing streams makes the peer's SDP manager schedule a renegotiation, which must
  // run before the manager stops: the timer of a stopped one throws.
  for (const out of peer.outgoing.values()) out.stop();
  peer.outgoing.clear();
  if (peer.sdp) setTimeout(() => peer.sdp.stop(), 0);
  if (room.peers.size === 0) for (const [id, r] of rooms) if (r === room) rooms.delete(id);
}

const server = http.createServer((req, res) => {
  res.writeHead(req.url === '/healthz' ? 200 : 404);
  res.end(req.url === '/healthz' ? 'ok\n' : '');
});
const wss = new WebSocketServer({server, maxPayload: MAX_MESSAGE});
wss.on('connection', (ws) => {
  const peer = {ws, room: null, user: null, sdp: null, transport: null, published: [], outgoing: new Map()};
  ws.on('message', (raw) => {
    try {
      const msg = JSON.parse(raw);
      if (msg.type === 'join') join(peer, msg);
      else if (msg.type === 'answer' && peer.sdp && typeof msg.sdp === 'string') peer.sdp.processRemoteDescription(msg.sdp);
      else throw new Error(`unexpected message ${String(msg.type)}`);
    } catch (e) {
      send(peer, {type: 'error', message: String(e && e.message || e)});
    }
  });
  ws.on('close', () => leave(peer));
});
server.listen(Number(port), address, () => console.log(`medooze: ${endpoints.length} endpoint(s), ${address}:${port}`));
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    for (const e of endpoints) e.stop();
    MediaServer.terminate();
    process.exit(0);
  });
}
