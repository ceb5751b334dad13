// The audio recorder, an AudioWorklet of probe.js: one node records every track a page hears and
// its microphone at once, an input each, so a page pays one call per render quantum however many
// it hears. It keeps `frames` samples of each input from the first block it is given, then posts
// them once as 16-bit PCM with the context time of their first sample, and stops. An input with
// nothing connected or nothing flowing (a track that carries nothing) counts as silence, so a
// recording always ends.
'use strict';

class Recorder extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const {frames} = options.processorOptions;
    this.pcm = Array.from({length: options.numberOfInputs}, () => new Int16Array(frames));
    this.filled = 0;
    this.started = null;
  }

  process(inputs) {
    if (this.started === null) this.started = currentTime;
    const n = Math.min(128, this.pcm[0].length - this.filled);
    for (let k = 0; k < this.pcm.length; k++) {
      const channel = inputs[k] && inputs[k][0];
      const out = this.pcm[k];
      for (let i = 0; i < n; i++) {
        const v = channel ? channel[i] : 0;
        out[this.filled + i] = v >= 1 ? 32767 : v <= -1 ? -32768 : Math.round(v * 32767);
      }
    }
    this.filled += n;
    if (this.filled < this.pcm[0].length) return true;
    this.port.postMessage({started: this.started, pcm: this.pcm}, this.pcm.map((a) => a.buffer));
    return false;
  }
}

registerProcessor('sfubench-recorder', Recorder);
