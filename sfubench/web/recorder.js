// The audio recorder, an AudioWorklet of probe.js: it keeps `frames` samples of what flows into it
// (a received audio track, or the page's own microphone), from the first block it is given, then
// posts them once as 16-bit PCM with the context time of their first sample, and stops. A block with
// no input (a track that carries nothing) counts as silence, so a recording always ends.
'use strict';

class Recorder extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.pcm = new Int16Array(options.processorOptions.frames);
    this.filled = 0;
    this.started = null;
  }

  process(inputs) {
    if (this.started === null) this.started = currentTime;
    const channel = inputs[0] && inputs[0][0];
    const n = Math.min(channel ? channel.length : 128, this.pcm.length - this.filled);
    for (let i = 0; i < n; i++) {
      const v = channel ? channel[i] : 0;
      this.pcm[this.filled + i] = Math.max(-32768, Math.min(32767, Math.round(v * 32767)));
    }
    this.filled += n;
    if (this.filled < this.pcm.length) return true;
    this.port.postMessage({started: this.started, pcm: this.pcm}, [this.pcm.buffer]);
    return false;
  }
}

registerProcessor('sfubench-recorder', Recorder);
