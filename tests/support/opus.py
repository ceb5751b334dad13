"""Audio through a real Opus encoder and decoder (ffmpeg's libopus), as WebRTC codes it."""
import subprocess

import numpy as np


def opus(pcm, rate=48_000, kbps=32):
    """`pcm` (float, mono, at `rate`) through libopus and back: 20-ms frames, the voice mode."""
    raw = (np.clip(pcm, -1, 1) * 32767).astype("<i2").tobytes()
    enc = subprocess.run(["ffmpeg", "-v", "error", "-f", "s16le", "-ar", str(rate), "-ac", "1", "-i", "-",
                          "-c:a", "libopus", "-b:a", f"{kbps}k", "-application", "voip", "-frame_duration", "20",
                          "-f", "ogg", "-"], input=raw, capture_output=True, check=True).stdout
    dec = subprocess.run(["ffmpeg", "-v", "error", "-i", "-", "-f", "s16le", "-ar", str(rate), "-ac", "1", "-"],
                         input=enc, capture_output=True, check=True).stdout
    return np.frombuffer(dec, "<i2") / 32768.0
