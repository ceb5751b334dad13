// A minimal mediasoup SFU for sfubench: rooms of participants who each publish audio and video on one
// send transport and consume everyone else's on one receive transport. One router per room; rooms are
// spread over the workers (one per core in the tuned profile, as mediasoup's scalability guide advises).
//
//   node server.js ADDRESS PORT WORKERS RTC_MIN RTC_MAX
//
// Signalling is JSON over a WebSocket at ws://ADDRESS:PORT/: requests {id, method, data} are answered
// {id, ok, data} or {id, ok: false, error}; the server also sends {notification, data}. GET /healthz
// answers ok once the workers are up.
'use strict';
const http = require('http');
const os = require('os');
const mediasoup = require('mediasoup');
const {WebSocketServer} = require('ws');

const [address, port, workerCount, rtcMin, rtcMax] = process.argv.slice(2);
const MAX_MESSAGE = 256 << 10;
const CODECS = [
  {kind: 'audio', mimeType: 'audio/opus', clockRate: 48000, channels: 2},
  {kind: 'video', mimeType: 'video/VP8', clockRate: 90000, parameters: {'x-google-start-bitrate': 1000}},
  // what a run's --codec may ask browsers for instead; VP8 stays first: producers take it by default
  {kind: 'video', mimeType: 'video/H264', clockRate: 90000, parameters: {'packetization-mode': 1,
    'profile-level-id': '42e01f', 'level-asymmetry-allowed': 1, 'x-google-start-bitrate': 1000}},
  {kind: 'video', mimeType: 'video/VP9', clockRate: 90000, parameters: {'profile-id': 0, 'x-google-start-bitrate': 1000}},
];

const workers = [];
const rooms = new Map();       // room id -> {router, peers: Map<user, peer>}
let nextWorker = 0;
let ready = false;

async function startWorkers() {
  const n = Math.max(1, Number(workerCount) || 1);
  const span = Math.floor((Number(rtcMax) - Number(rtcMin) + 1) / n);
  for (let i = 0; i < n; i++) {
    const worker = await mediasoup.createWorker({
      logLevel: 'warn', rtcMinPort: Number(rtcMin) + i * span, rtcMaxPort: Number(rtcMin) + (i + 1) * span - 1,
    });
    worker.on('died', () => {
      console.error(`mediasoup worker ${worker.pid} died`);
      process.exit(1);
    });
    workers.push(worker);
  }
  console.log(`mediasoup ${mediasoup.version}: ${n} worker(s) of ${os.cpus().length} cores, ports ${rtcMin}-${rtcMax}`);
}

async function roomFor(id) {
  let room = rooms.get(id);
  if (!room) {
    const worker = workers[nextWorker++ % workers.length];
    room = {router: null, peers: new Map(), ready: worker.createRouter({mediaCodecs: CODECS})};
    rooms.set(id, room);
    room.router = await room.ready;
  } else if (!room.router) {
    room.router = await room.ready;
  }
  return room;
}

function send(ws, msg) {
  if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(msg));
}

function notifyRoom(room, except, notification, data) {
  for (const peer of room.peers.values()) if (peer !== except) send(peer.ws, {notification, data});
}

async function handle(peer, method, data) {
  switch (method) {
    case 'join': {
      if (peer.room) throw new Error('already joined');
      if (typeof data.room !== 'string' || typeof data.user !== 'string') throw new Error('room and user are strings');
      const room = await roomFor(data.room);
      if (room.peers.has(data.user)) throw new Error(`user ${data.user} has a live session in room ${data.room}`);
      peer.room = room;
      peer.user = data.user;
      room.peers.set(data.user, peer);
      const producers = [];
      for (const other of room.peers.values()) {
        if (other === peer) continue;
        for (const p of other.producers.values()) producers.push({producerId: p.id, user: other.user, kind: p.kind});
      }
      return {routerRtpCapabilities: room.router.rtpCapabilities, producers};
    }
    case 'createTransport': {
      const transport = await peer.room.router.createWebRtcTransport({
        listenInfos: [{protocol: 'udp', ip: address}],
        initialAvailableOutgoingBitrate: 1000000,
      });
      peer.transports.set(transport.id, transport);
      return {id: transport.id, iceParameters: transport.iceParameters, iceCandidates: transport.iceCandidates,
              dtlsParameters: transport.dtlsParameters};
    }
    case 'connectTransport': {
      await transportOf(peer, data.transportId).connect({dtlsParameters: data.dtlsParameters});
      return {};
    }
    case 'produce': {
      const producer = await transportOf(peer, data.transportId).produce({kind: data.kind, rtpParameters: data.rtpParameters});
      peer.producers.set(producer.id, producer);
      notifyRoom(peer.room, peer, 'newProducer', {producerId: producer.id, user: peer.user, kind: producer.kind});
      return {id: producer.id};
    }
    case 'consume': {
      const {router} = peer.room;
      if (!router.canConsume({producerId: data.producerId, rtpCapabilities: data.rtpCapabilities})) {
        throw new Error(`cannot consume ${data.producerId}`);
      }
      // preferredLayers: the simulcast layer the participant asks for (mediasoup's default: the largest)
      const consumer = await transportOf(peer, data.transportId).consume({
        producerId: data.producerId, rtpCapabilities: data.rtpCapabilities, paused: true,
        preferredLayers: data.preferredLayers});
      peer.consumers.set(consumer.id, consumer);
      consumer.on('producerclose', () => {
        peer.consumers.delete(consumer.id);
        send(peer.ws, {notification: 'consumerClosed', data: {consumerId: consumer.id}});
      });
      return {id: consumer.id, producerId: data.producerId, kind: consumer.kind, rtpParameters: consumer.rtpParameters};
    }
    case 'resume': {
      const consumer = peer.consumers.get(data.consumerId);
      if (!consumer) throw new Error(`no consumer ${data.consumerId}`);
      await consumer.resume();
      return {};
    }
    default:
      throw new Error(`unknown method ${method}`);
  }
}

function transportOf(peer, id) {
  const t = peer.transports.get(id);
  if (!t) throw new Error(`no transport ${id}`);
  return t;
}

function leave(peer) {
  for (const t of peer.transports.values()) t.close();
  const room = peer.room;
  if (!room) return;
  if (room.peers.get(peer.user) === peer) room.peers.delete(peer.user);
  if (room.peers.size === 0) {
    room.router.close();
    for (const [id, r] of rooms) if (r === room) rooms.delete(id);
  }
}

const server = http.createServer((req, res) => {
  res.writeHead(ready && req.url === '/healthz' ? 200 : 503);
  res.end(ready ? 'ok\n' : 'starting\n');
});
const wss = new WebSocketServer({server, maxPayload: MAX_MESSAGE});
wss.on('connection', (ws) => {
  const peer = {ws, room: null, user: null, transports: new Map(), producers: new Map(), consumers: new Map()};
  ws.on('message', async (raw) => {
    let msg;
    try {
      msg = JSON.parse(raw);
    } catch (e) {
      return send(ws, {error: 'not JSON'});
    }
    try {
      const data = await handle(peer, msg.method, msg.data || {});
      send(ws, {id: msg.id, ok: true, data});
    } catch (e) {
      send(ws, {id: msg.id, ok: false, error: String(e && e.message || e)});
    }
  });
  ws.on('close', () => leave(peer));
});

startWorkers().then(() => {
  server.listen(Number(port), address, () => {
    ready = true;
    console.log(`listening on ${address}:${port}`);
  });
}).catch((e) => {
  console.error(e);
  process.exit(1);
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
