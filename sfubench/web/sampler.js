// The frame sampler, a worker of probe.js: it reads every frame each video track delivers (the
// page's own camera and every received video), off the page's main thread. From each frame it keeps
// only the mean luma of the frame-code cells' centres and a row of picture points, copied straight
// from the decoded frame's Y plane (no canvas, no RGB conversion, a few KB per frame), and posts
// them twice a second; quality/framecode.py decides the number, so there is one decoder. On command
// it also encodes received frames as PNG for the after-run scores (BRISQUE, PSNR, VMAF).
//
// It reads levels only while the engine follows the videos (checks, measurement windows): frames
// that arrive otherwise are dropped at once.
//
// Each sample: [the epoch time the frame reached this worker, ms; cell levels; picture points]. A
// camera frame reaches it the moment it is captured, a received one the moment it is decoded for
// display; this worker does nothing else, so these times are the glass-to-glass clock
// (sfubench/collector.py says why not the frames' own timestamps).
'use strict';

const FLUSH_MS = 500;
const PICTURE_POINTS = 16;
const GRID = 4;
let self = null;
let code = null;
let headers = {};        // the run's token, which every post carries
let following = false;
const batches = {};      // user -> samples since the last flush
const captures = {};     // user -> pending capture orders: {cmd, left, next, i}

onmessage = (e) => {
  const m = e.data;
  if (m.config) {
    self = m.config.user;
    code = m.config.code;
    headers = {'X-Sfubench-Token': m.config.token};
  } else if (m.readable) {
    pump(m.user, m.readable.getReader()).catch(() => {});
  } else if ('follow' in m) {
    following = m.follow;
  } else if (m.capture) {
    for (const peer of m.capture.peers) {
      (captures[peer] = captures[peer] || []).push({cmd: m.capture, left: m.capture.count, next: 0, i: 0});
    }
  }
};

async function pump(who, reader) {
  batches[who] = batches[who] || [];
  for (;;) {
    const {value: frame, done} = await reader.read();
    if (done) return;
    const read = performance.timeOrigin + performance.now();
    try {
      if (code && following) {
        const [cells, picture] = await levels(frame);
        batches[who].push([read, cells, picture]);
      }
      if (captures[who] && captures[who].length) await capture(who, frame, read);
    } finally {
      frame.close();
    }
  }
}

// Mean Y of each code cell's central half (on a GRID x GRID lattice of points), row by row, and
// PICTURE_POINTS 2x2 means along one row of the picture just below the code band (enough to tell a
// picture from a blank fill). Only the code strip's corner of the frame is copied.
async function levels(frame) {
  const fw = frame.codedWidth, fh = frame.codedHeight;
  const sx = fw / code.width, sy = fh / code.height;
  const even = (v, max) => Math.min(max - (max % 2), 2 * Math.ceil(v / 2));
  const rect = {x: 0, y: 0, width: even(code.cells * code.cell * sx, fw),
                height: even((code.rows + 1) * code.cell * sy, fh)};
  const buf = new Uint8Array(frame.allocationSize({rect}));
  let planes;
  try {
    planes = await frame.copyTo(buf, {rect});
  } catch (e) {
    return [null, null];   // a format without a Y plane first: nothing to read
  }
  const {offset, stride} = planes[0];
  const Y = (x, y) => buf[offset + y * stride + x];
  const cw = code.cell * sx, ch = code.cell * sy;
  const cells = [];
  for (let r = 0; r < code.rows; r++) {
    for (let k = 0; k < code.cells; k++) {
      let sum = 0;
      for (let i = 0; i < GRID; i++) {
        const y = Math.floor((r + 0.25 + 0.5 * (i + 0.5) / GRID) * ch);
        for (let j = 0; j < GRID; j++) sum += Y(Math.floor((k + 0.25 + 0.5 * (j + 0.5) / GRID) * cw), y);
      }
      cells.push(Math.round(sum / (GRID * GRID)));
    }
  }
  const py = Math.min(rect.height - 2, Math.floor((code.rows + 0.5) * ch));
  const picture = [];
  for (let i = 0; i < PICTURE_POINTS; i++) {
    const px = Math.min(rect.width - 2, Math.floor((i + 0.5) * rect.width / PICTURE_POINTS));
    picture.push((Y(px, py) + Y(px + 1, py) + Y(px, py + 1) + Y(px + 1, py + 1)) >> 2);
  }
  return [cells, picture];
}

// Encodes this frame for every capture order that wants one now: `count` frames per order, at
// least `gap_ms` apart, each posted as PNG (JPEG would shift BRISQUE).
async function capture(who, frame, read) {
  const due = captures[who].filter((o) => read >= o.next);
  if (!due.length) return;
  const canvas = new OffscreenCanvas(frame.displayWidth, frame.displayHeight);
  canvas.getContext('2d', {alpha: false}).drawImage(frame, 0, 0);
  const png = await canvas.convertToBlob({type: 'image/png'});
  for (const o of due) {
    const q = new URLSearchParams({user: self, peer: who, phase: o.cmd.phase, window: o.cmd.window,
                                   participants: o.cmd.participants, i: o.i, read});
    fetch('/frame?' + q, {method: 'POST', headers, body: png}).catch(() => {});
    o.i++;
    o.left--;
    o.next = read + o.cmd.gap_ms;
  }
  captures[who] = captures[who].filter((o) => o.left > 0);
}

setInterval(() => {
  const series = {};
  let any = false;
  for (const [who, samples] of Object.entries(batches)) {
    if (!samples.length) continue;
    series[who] = samples.splice(0);
    any = true;
  }
  if (any) {
    fetch('/collect', {method: 'POST', headers, body: JSON.stringify({type: 'frames', user: self, series})})
      .catch(() => {});
  }
}, FLUSH_MS);
