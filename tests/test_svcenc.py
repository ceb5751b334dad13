"""VP9 SVC for synthetic publishers (svcenc, real libvpx; decoded by real ffmpeg): the clip in 2 or
3 spatial layers and 3 temporal layers as Chrome's L3T3_KEY, one IVF file per spatial layer, which
together decode to the clip at any layer's size, and without the upper temporal layers."""
import subprocess

import numpy as np
import pytest

from quality import framecode
from sfubench import encoding, svcenc
from sfubench.media import MediaError

TEMPORAL_PATTERN = (0, 2, 1, 2)   # libvpx's 0212 mode, restarting at each key picture


def ivf(path) -> tuple[tuple[int, int], list[bytes]]:
    """An IVF file's picture size (its header's) and frames, checking that frame i has pts i."""
    data = path.read_bytes()
    assert data[:4] == b"DKIF" and data[8:12] == b"VP90"
    size = (int.from_bytes(data[12:14], "little"), int.from_bytes(data[14:16], "little"))
    frames, off = [], int.from_bytes(data[6:8], "little")
    while off < len(data):
        length, pts = int.from_bytes(data[off:off + 4], "little"), int.from_bytes(data[off + 4:off + 12], "little")
        assert pts == len(frames)
        frames.append(data[off + 12:off + 12 + length])
        off += 12 + length
    return size, frames


def is_keyframe(frame: bytes) -> bool:
    """A VP9 uncompressed header's frame_type (profile 0, as libvpx's 8-bit 4:2:0)."""
    b = frame[0]
    assert b >> 6 == 2 and (b >> 4) & 3 == 0 and not (b >> 3) & 1   # frame marker, profile 0, no repeat
    return not (b >> 2) & 1


def superframe(frames: list[bytes]) -> bytes:
    """Frames as one VP9 superframe: back to back, then their sizes between two marker bytes."""
    mag = max(1, (max(map(len, frames)).bit_length() + 7) // 8)
    marker = bytes([0b11000000 | (mag - 1) << 3 | (len(frames) - 1)])
    return b"".join(frames) + marker + b"".join(len(f).to_bytes(mag, "little") for f in frames) + marker


def write_ivf(path, size: tuple[int, int], fps: int, packets: list[bytes]) -> None:
    header = b"DKIF" + (0).to_bytes(2, "little") + (32).to_bytes(2, "little") + b"VP90" + b"".join(
        v.to_bytes(n, "little") for v, n in ((size[0], 2), (size[1], 2), (fps, 4), (1, 4), (len(packets), 4), (0, 4)))
    path.write_bytes(header + b"".join(len(p).to_bytes(4, "little") + i.to_bytes(8, "little") + p
                                       for i, p in enumerate(packets)))


def decode(path, size: tuple[int, int]) -> list[bytes]:
    """libvpx's decoder through ffmpeg (ffmpeg's own VP9 decoder outputs a superframe's first shown
    frame, the base layer's, where a receiver shows its last): RGB frames, none failing."""
    r = subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-c:v", "libvpx-vp9", "-i", str(path),
                        "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], capture_output=True)
    assert r.returncode == 0 and not r.stderr, r.stderr.decode(errors="replace")[-500:]
    n = size[0] * size[1] * 3
    assert len(r.stdout) % n == 0
    return [r.stdout[i:i + n] for i in range(0, len(r.stdout), n)]


def sent(tmp_path, media, layers, k: int, pictures) -> tuple[list[bytes], tuple[int, int]]:
    """What a receiver forwarded spatial layers 0..`k` of `pictures` decodes: one superframe each."""
    parts = [ivf(p) for p in layers[:k + 1]]
    size = parts[k][0]
    out = tmp_path / f"up-to-{k}-{len(pictures)}.ivf"
    write_ivf(out, size, media.fps, [superframe([frames[i] for _, frames in parts]) for i in pictures])
    return decode(out, size), size


@pytest.fixture(scope="module")
def svc3(local_media):
    return encoding.encoded(local_media, 3, "vp9", svc=True)


@pytest.mark.parametrize("layers", (2, 3))
def test_each_spatial_layer_is_a_file_of_the_whole_clip_keyframes_on_the_base_alone(local_media, svc3, layers):
    """Sides halved per layer from the full picture (libvpx rounds an odd side up to even), every
    picture in every layer, a key picture every second whose upper layers are predicted from the
    base (inter frames), and each layer near the bitrate asked for it."""
    e = svc3 if layers == 3 else encoding.encoded(local_media, layers, "vp9", svc=True)
    assert e.svc and len(e.video) == layers and e.keyframe_every == local_media.fps
    assert e.kbps == (75, 225, 600)[3 - layers:]
    assert e.ogg == encoding.encoded(local_media).ogg
    for s, path in enumerate(e.video):
        down = layers - 1 - s
        size, frames = ivf(path)
        w, h = local_media.width >> down, local_media.height >> down
        assert size == (w + w % 2, h + h % 2)
        assert len(frames) == encoding.video_frames(path) == local_media.frames
        keys = [i for i, f in enumerate(frames) if is_keyframe(f)]
        assert keys == (list(range(0, local_media.frames, e.keyframe_every)) if s == 0 else [])
        kbps = sum(map(len, frames)) * 8 / local_media.duration / 1000
        assert 0.5 * e.kbps[s] <= kbps <= 1.5 * e.kbps[s], (s, kbps)
    if layers == 3:
        assert [ivf(p)[0] for p in e.video] == [(80, 46), (160, 90), (320, 180)]


@pytest.mark.parametrize("k", (0, 2))
def test_the_layers_up_to_any_spatial_layer_decode_to_the_clip_at_its_size(tmp_path, local_media, svc3, k):
    """What an SFU forwards to a receiver of layer k decodes without error, every picture at layer
    k's size, each showing its own frame code (at most a few unread in the full picture, whose
    realtime encoder leaves a cell of the code stale now and then; never a wrong one)."""
    frames, (w, h) = sent(tmp_path, local_media, svc3.video, k, range(local_media.frames))
    assert len(frames) == local_media.frames
    codes = [framecode.decode(framecode.to_source_size(np.frombuffer(f, np.uint8).reshape(h, w, 3),
                                                       local_media.layout), local_media.layout) for f in frames]
    assert all(c in (i, None) for i, c in enumerate(codes))
    assert codes.count(None) <= 0.1 * len(codes), codes


def test_dropping_the_upper_temporal_layers_leaves_the_other_pictures_as_they_were(tmp_path, local_media, svc3):
    """Temporal layers 0..1 and 0 alone, at every spatial layer, decode to the same pictures as the
    whole stream: no kept picture refers to a dropped one."""
    n, top = local_media.frames, len(svc3.video) - 1
    tl = [TEMPORAL_PATTERN[i % svc3.keyframe_every % len(TEMPORAL_PATTERN)] for i in range(n)]
    whole, _ = sent(tmp_path, local_media, svc3.video, top, range(n))
    for highest in (1, 0):
        kept = [i for i in range(n) if tl[i] <= highest]
        frames, _ = sent(tmp_path, local_media, svc3.video, top, kept)
        assert frames == [whole[i] for i in kept], highest


def test_svc_is_vp9s_of_two_or_three_spatial_layers(local_media):
    for layers, codec in ((3, "vp8"), (3, "av1"), (1, "vp9")):
        with pytest.raises(MediaError, match="VP9 only, of 2 to 3 spatial layers"):
            encoding.encoded(local_media, layers, codec, svc=True)


@pytest.mark.parametrize("args", [
    [],
    ["-layers", "4", "-kbps", "1,2,3,4", "-gop", "15", "-fps", "15", "-o", "x", "in.y4m"],
    ["-layers", "3", "-kbps", "75,225", "-gop", "15", "-fps", "15", "-o", "x", "in.y4m"],
    ["-layers", "2", "-kbps", "75,225", "-gop", "0", "-fps", "15", "-o", "x", "in.y4m"],
    ["-layers", "2", "-kbps", "75,225", "-gop", "15", "-fps", "15", "-o", "x"],
    ["-layers", "2", "-kbps", "75,225", "-gop", "15", "-fps", "15", "-o", "x", "-q", "1", "in.y4m"],
])
def test_svcenc_refuses_bad_usage_in_one_line(media_cache, args):
    r = subprocess.run([str(svcenc.binary(media_cache)), *args], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("svcenc: ") and not r.stdout


def test_an_unreadable_input_fails_in_one_line_and_leaves_no_file(tmp_path, media_cache):
    bad = tmp_path / "bad.y4m"
    bad.write_bytes(b"YUV4MPEG2 W64 H48 F15:1 C420jpeg\nFRAME\n" + bytes(64 * 48))   # cut short
    with pytest.raises(MediaError, match="picture 0 is cut short"):
        svcenc.encode(svcenc.binary(media_cache), bad, tmp_path / "out", [50, 100], 15, 15)
    assert [p.name for p in tmp_path.iterdir()] == ["bad.y4m"]


def test_without_libvpx_the_build_says_how_to_install_it(tmp_path, monkeypatch):
    """pkg-config finding no libvpx (its search path emptied, as on a machine without libvpx-dev)."""
    monkeypatch.setenv("PKG_CONFIG_LIBDIR", str(tmp_path))
    monkeypatch.setenv("PKG_CONFIG_PATH", "")
    with pytest.raises(MediaError, match="scripts/deps.sh apt") as e:
        svcenc.binary(tmp_path)
    assert "\n" not in str(e.value)
