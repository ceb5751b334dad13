/* svcenc: the clip encoded as Chrome's VP9 SVC (L2T3_KEY, L3T3_KEY) for synthetic publishers, one
 * IVF file per spatial layer. ffmpeg cannot encode spatial layers, so this drives libvpx directly.
 *
 *   svcenc -layers N -kbps K0,K1[,K2] -gop G -fps F -o PREFIX INPUT.y4m
 *
 * INPUT is 4:2:0 8-bit y4m. Spatial layer s (0 the smallest) has sides 1/2^(N-1-s) of the input's
 * (libvpx rounds an odd result up to even) and K_s kbit/s; its three temporal layers (pattern
 * 0,2,1,2) take 50, 70 and 100 % of it cumulatively, as libwebrtc allocates. Inter-layer
 * prediction only on key pictures (libwebrtc's InterLayerPredMode::kOnKeyPic), a key picture every
 * G pictures from the first. Writes PREFIX-s0.ivf .. PREFIX-s{N-1}.ivf: frame i of each is that
 * layer's frame of picture i, pts i. Prints nothing on success; bad usage: exit 2, a failure: exit
 * 1, one line on stderr either way. Outputs appear (by rename) only when complete: callers cache
 * them. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vpx/vp8cx.h>
#include <vpx/vpx_encoder.h>

#define MAX_SPATIAL 3
#define TEMPORAL 3
/* VP9E_SET_SVC_INTER_LAYER_PRED's values are documented in vp8cx.h but their enum is internal to
 * libvpx: 0 on, 1 off, 2 off but on key pictures (INTER_LAYER_PRED_OFF_NONKEY). */
#define INTER_LAYER_PRED_OFF_NONKEY 2

static int layers;
static char tmp_names[MAX_SPATIAL][4096], out_names[MAX_SPATIAL][4096];

static void usage(const char *why) {
  fprintf(stderr, "svcenc: %s (usage: svcenc -layers 2|3 -kbps K0,K1[,K2] -gop G -fps F -o PREFIX INPUT.y4m)\n",
          why);
  exit(2);
}

/* One line, and no half-written output left behind. */
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("svcenc: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  for (int s = 0; s < layers; s++)
    if (tmp_names[s][0]) unlink(tmp_names[s]);
  exit(1);
}

static int positive(const char *s, int max) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  return (errno || end == s || *end || v < 1 || v > max) ? -1 : (int)v;
}

static void put_le(uint8_t *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The IVF file header (32 bytes); written last, once the picture size and frame count are known. */
static void ivf_header(FILE *f, unsigned w, unsigned h, int fps, uint32_t frames) {
  uint8_t b[32] = "DKIF";
  put_le(b + 4, 0, 2);  /* version */
  put_le(b + 6, 32, 2); /* header size */
  memcpy(b + 8, "VP90", 4);
  put_le(b + 12, w, 2);
  put_le(b + 14, h, 2);
  put_le(b + 16, (uint32_t)fps, 4); /* time base: 1/fps, so pts counts pictures */
  put_le(b + 20, 1, 4);
  put_le(b + 24, frames, 4);
  put_le(b + 28, 0, 4);
  if (fseek(f, 0, SEEK_SET) || fwrite(b, 1, 32, f) != 32) die("writing an IVF header: %s", strerror(errno));
}

/* The frames of a packet. libvpx gives a picture's spatial layers as one VP9 superframe: the
 * frames back to back, then an index whose first and last byte are the marker 0b110mmfff (mm+1
 * bytes per frame size, fff+1 frames) around the sizes, little-endian. No index: one frame. */
static int split(const uint8_t *buf, size_t sz, const uint8_t **frame, size_t *size, int max) {
  uint8_t marker = sz ? buf[sz - 1] : 0;
  if ((marker & 0xe0) == 0xc0) {
    int mag = ((marker >> 3) & 3) + 1, n = (marker & 7) + 1;
    size_t index = 2 + (size_t)mag * n;
    if (sz >= index && buf[sz - index] == marker) {
      const uint8_t *p = buf + sz - index + 1, *data = buf;
      size_t left = sz - index;
      if (n > max) return -1;
      for (int i = 0; i < n; i++, p += mag) {
        size_t s = 0;
        for (int b = 0; b < mag; b++) s |= (size_t)p[b] << (8 * b);
        if (s == 0 || s > left) return -1; /* a dropped layer, or a corrupt index */
        frame[i] = data, size[i] = s;
        data += s, left -= s;
      }
      return left ? -1 : n;
    }
  }
  if (max < 1 || sz == 0) return -1;
  frame[0] = buf, size[0] = sz;
  return 1;
}

/* Whether a VP9 frame is a keyframe, from its uncompressed header's first byte: frame_marker (2
 * bits, must be 2), profile (low bit, high bit), a reserved zero bit in profile 3,
 * show_existing_frame, then frame_type (0: key). */
static int is_keyframe(const uint8_t *f, size_t sz) {
  if (sz < 1 || (f[0] >> 6) != 2) return 0;
  int profile = ((f[0] >> 5) & 1) | (((f[0] >> 4) & 1) << 1), bit = profile == 3 ? 3 : 4;
  if ((f[0] >> (7 - bit)) & 1) return 0; /* show_existing_frame: a repeat, no frame_type */
  return ((f[0] >> (6 - bit)) & 1) == 0;
}

/* The next y4m picture into `buf`: 1, or 0 at the end of the clip. */
static int read_picture(FILE *in, const char *input, uint8_t *buf, size_t bytes, uint32_t number) {
  char tag[256];
  if (!fgets(tag, sizeof tag, in)) {
    if (ferror(in)) die("%s: %s", input, strerror(errno));
    return 0;
  }
  if (strncmp(tag, "FRAME", 5) || !strchr(tag, '\n'))
    die("%s: picture %u does not start with FRAME", input, number);
  if (fread(buf, 1, bytes, in) != bytes) die("%s: picture %u is cut short", input, number);
  return 1;
}

int main(int argc, char **argv) {
  int kbps[MAX_SPATIAL], gop = -1, fps = -1, nkbps = 0;
  const char *prefix = NULL, *input = NULL, *kbps_arg = NULL;
  layers = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || !strcmp(a, "-")) {
      if (input) usage("more than one INPUT");
      input = a;
      continue;
    }
    if (i + 1 >= argc) usage("a flag without its value");
    const char *v = argv[++i];
    if (!strcmp(a, "-layers")) {
      if ((layers = positive(v, MAX_SPATIAL)) < 2) usage("-layers must be 2 or 3");
    } else if (!strcmp(a, "-kbps")) {
      kbps_arg = v;
    } else if (!strcmp(a, "-gop")) {
      if ((gop = positive(v, 100000)) < 0) usage("-gop must be a positive number of pictures");
    } else if (!strcmp(a, "-fps")) {
      if ((fps = positive(v, 1000)) < 0) usage("-fps must be a positive whole number");
    } else if (!strcmp(a, "-o")) {
      prefix = v;
    } else {
      usage("unknown flag");
    }
  }
  if (layers < 0 || !kbps_arg || gop < 0 || fps < 0 || !prefix || !input) usage("missing arguments");
  for (const char *p = kbps_arg; *p; nkbps++) {
    char item[16];
    size_t len = strcspn(p, ",");
    if (nkbps == layers || len == 0 || len >= sizeof item) usage("-kbps needs one kbit/s per layer");
    memcpy(item, p, len), item[len] = 0;
    if ((kbps[nkbps] = positive(item, 100000)) < 0) usage("-kbps needs one kbit/s per layer");
    p += len + (p[len] == ',');
  }
  if (nkbps != layers) usage("-kbps needs one kbit/s per layer");

  /* The y4m header: "YUV4MPEG2 W.. H.. F num:den ..." and optional tags; C must be a 4:2:0. */
  FILE *in = fopen(input, "rb");
  if (!in) die("%s: %s", input, strerror(errno));
  char line[1024];
  if (!fgets(line, sizeof line, in) || strncmp(line, "YUV4MPEG2 ", 10)) die("%s is not a y4m file", input);
  int w = 0, h = 0, fnum = 0, fden = 1;
  for (char *t = strtok(line + 10, " \n"); t; t = strtok(NULL, " \n")) {
    if (t[0] == 'W') w = atoi(t + 1);
    else if (t[0] == 'H') h = atoi(t + 1);
    else if (t[0] == 'F') sscanf(t + 1, "%d:%d", &fnum, &fden);
    else if (t[0] == 'C' && strncmp(t + 1, "420", 3)) die("%s: only 4:2:0 8-bit y4m, not %s", input, t + 1);
  }
  if (w < 2 || h < 2) die("%s: no picture size in its y4m header", input);
  if (fnum && (fden < 1 || fnum != fps * fden)) die("%s is %d:%d fps, not the %d of -fps", input, fnum, fden, fps);

  /* Realtime one-pass CBR as libwebrtc configures VP9 SVC, but no frame ever dropped: frame i of
   * each file must be loop position i. */
  vpx_codec_enc_cfg_t cfg;
  if (vpx_codec_enc_config_default(vpx_codec_vp9_cx(), &cfg, 0)) die("libvpx has no VP9 encoder");
  cfg.g_w = (unsigned)w, cfg.g_h = (unsigned)h;
  cfg.g_timebase.num = 1, cfg.g_timebase.den = fps;
  cfg.g_pass = VPX_RC_ONE_PASS;
  cfg.g_lag_in_frames = 0;
  /* As libwebrtc's VP9 SVC (g_error_resilient = is_svc_ ? VPX_ERROR_RESILIENT_DEFAULT : 0): without
   * it every layer frame reads and adapts the same probability context (index 0) after the one
   * before it, whatever its layer, so a receiver sent layers 0..k < N-1 fails to decode ("Failed to
   * decode tile data" from the second picture on, libvpx 1.12). With it each frame starts from the
   * default probabilities and no frame's motion vectors seed the next's. */
  cfg.g_error_resilient = VPX_ERROR_RESILIENT_DEFAULT;
  cfg.g_threads = w * h > 640 * 360 ? 2 : 1; /* libwebrtc's rule (it needs more than two cores) */
  cfg.rc_end_usage = VPX_CBR;
  cfg.rc_dropframe_thresh = 0;
  cfg.rc_resize_allowed = 0;
  cfg.rc_min_quantizer = 2, cfg.rc_max_quantizer = 52;
  cfg.rc_undershoot_pct = 50, cfg.rc_overshoot_pct = 50;
  cfg.rc_buf_initial_sz = 500, cfg.rc_buf_optimal_sz = 600, cfg.rc_buf_sz = 1000;
  cfg.kf_mode = VPX_KF_AUTO;
  cfg.kf_min_dist = cfg.kf_max_dist = (unsigned)gop;
  cfg.ss_number_layers = (unsigned)layers;
  cfg.ts_number_layers = TEMPORAL;
  cfg.temporal_layering_mode = VP9E_TEMPORAL_LAYERING_MODE_0212;
  /* The 0,2,1,2 pattern: layer 0 every 4th picture, 1 every 4th from the 3rd, 2 every other. */
  static const unsigned decimator[TEMPORAL] = {4, 2, 1}, pattern[4] = {0, 2, 1, 2};
  static const unsigned share[TEMPORAL] = {50, 70, 100};
  cfg.ts_periodicity = 4;
  memcpy(cfg.ts_rate_decimator, decimator, sizeof decimator);
  memcpy(cfg.ts_layer_id, pattern, sizeof pattern);
  cfg.rc_target_bitrate = 0;
  memset(cfg.ts_target_bitrate, 0, sizeof cfg.ts_target_bitrate);
  for (int s = 0; s < layers; s++) {
    cfg.ss_target_bitrate[s] = (unsigned)kbps[s];
    cfg.rc_target_bitrate += (unsigned)kbps[s];
    for (int t = 0; t < TEMPORAL; t++) {
      cfg.layer_target_bitrate[s * TEMPORAL + t] = (unsigned)kbps[s] * share[t] / 100;
      cfg.ts_target_bitrate[t] += cfg.layer_target_bitrate[s * TEMPORAL + t];
    }
  }

  vpx_codec_ctx_t codec;
  if (vpx_codec_enc_init(&codec, vpx_codec_vp9_cx(), &cfg, 0))
    die("libvpx refused the VP9 SVC configuration: %s",
        vpx_codec_error_detail(&codec) ? vpx_codec_error_detail(&codec) : vpx_codec_error(&codec));
  vpx_svc_extra_cfg_t svc;
  memset(&svc, 0, sizeof svc); /* loopfilter_ctrl 0: the loop filter on every frame */
  for (int l = 0; l < VPX_MAX_LAYERS; l++) /* quantizers are per spatial/temporal layer */
    svc.min_quantizers[l] = (int)cfg.rc_min_quantizer, svc.max_quantizers[l] = (int)cfg.rc_max_quantizer;
  for (int s = 0; s < layers; s++) {
    svc.scaling_factor_num[s] = 1, svc.scaling_factor_den[s] = 1 << (layers - 1 - s);
    /* the small layers are cheap: a little more effort there, as libwebrtc gives them */
    svc.speed_per_layer[s] = s == layers - 1 ? 8 : 7;
  }
  /* libwebrtc's controls: cyclic-refresh AQ, keyframes capped at a few frames' worth of bits (its
   * MaxIntraTarget), no golden frame as a second temporal reference. Each takes an int or an
   * unsigned int, passed alike. */
  struct { int id; const char *name; int value; } ctrl[] = {
    {VP8E_SET_CPUUSED, "VP8E_SET_CPUUSED", 8},
    {VP9E_SET_SVC, "VP9E_SET_SVC", 1},
    {VP9E_SET_SVC_INTER_LAYER_PRED, "VP9E_SET_SVC_INTER_LAYER_PRED", INTER_LAYER_PRED_OFF_NONKEY},
    {VP9E_SET_AQ_MODE, "VP9E_SET_AQ_MODE", 3},
    {VP9E_SET_ROW_MT, "VP9E_SET_ROW_MT", 1},
    {VP8E_SET_MAX_INTRA_BITRATE_PCT, "VP8E_SET_MAX_INTRA_BITRATE_PCT", fps > 10 ? 30 * fps : 300},
    {VP9E_SET_SVC_GF_TEMPORAL_REF, "VP9E_SET_SVC_GF_TEMPORAL_REF", 0},
  };
  for (size_t c = 0; c < sizeof ctrl / sizeof *ctrl; c++)
    if (vpx_codec_control_(&codec, ctrl[c].id, ctrl[c].value)) die("libvpx refused %s", ctrl[c].name);
  if (vpx_codec_control(&codec, VP9E_SET_SVC_PARAMETERS, &svc))
    die("libvpx refused the SVC parameters: %s", vpx_codec_error(&codec));

  FILE *out[MAX_SPATIAL];
  unsigned lw[MAX_SPATIAL] = {0}, lh[MAX_SPATIAL] = {0};
  for (int s = 0; s < layers; s++) {
    snprintf(out_names[s], sizeof out_names[s], "%s-s%d.ivf", prefix, s);
    snprintf(tmp_names[s], sizeof tmp_names[s], "%s-s%d.ivf.%ld.tmp", prefix, s, (long)getpid());
    if (!(out[s] = fopen(tmp_names[s], "wb"))) die("%s: %s", tmp_names[s], strerror(errno));
    ivf_header(out[s], 0, 0, fps, 0); /* a placeholder until the end */
  }

  /* y4m 4:2:0 planes as libvpx lays out an I420 image of stride alignment 1. */
  size_t cw = ((size_t)w + 1) / 2, ch = ((size_t)h + 1) / 2, frame_bytes = (size_t)w * h + 2 * cw * ch;
  uint8_t *buf = malloc(frame_bytes);
  vpx_image_t img;
  if (!buf || !vpx_img_wrap(&img, VPX_IMG_FMT_I420, (unsigned)w, (unsigned)h, 1, buf)) die("out of memory");
  uint32_t pictures = 0;
  for (;;) {
    int more = read_picture(in, input, buf, frame_bytes, pictures);
    /* past the end a flush: nothing may remain inside a zero-lag encoder */
    vpx_enc_frame_flags_t flags = more && pictures % (unsigned)gop == 0 ? VPX_EFLAG_FORCE_KF : 0;
    if (vpx_codec_encode(&codec, more ? &img : NULL, pictures, 1, flags, VPX_DL_REALTIME))
      die("encoding picture %u: %s", pictures, vpx_codec_error(&codec));
    const uint8_t *frame[MAX_SPATIAL];
    size_t size[MAX_SPATIAL];
    int n = 0;
    vpx_codec_iter_t iter = NULL;
    const vpx_codec_cx_pkt_t *pkt;
    while ((pkt = vpx_codec_get_cx_data(&codec, &iter))) {
      if (pkt->kind != VPX_CODEC_CX_FRAME_PKT) continue;
      if (!more) die("libvpx held back a picture past the end of the clip");
      int got = split(pkt->data.frame.buf, pkt->data.frame.sz, frame + n, size + n, layers - n);
      if (got < 0) die("picture %u: not %d layer frames in a well-formed superframe", pictures, layers);
      n += got;
      /* each layer's picture size as libvpx encoded it (it rounds odd sides up to even) */
      for (int s = 0; s < layers; s++) {
        if (!lw[s]) lw[s] = pkt->data.frame.width[s], lh[s] = pkt->data.frame.height[s];
        if (!lw[s] || lw[s] != pkt->data.frame.width[s] || lh[s] != pkt->data.frame.height[s])
          die("picture %u: spatial layer %d changed size or has none", pictures, s);
      }
    }
    if (!more) break;
    if (n != layers) die("picture %u has %d layer frames, not %d: a layer was dropped", pictures, n, layers);
    if (pictures % (unsigned)gop == 0 && !is_keyframe(frame[0], size[0]))
      die("picture %u: the base layer is not a keyframe though it was forced", pictures);
    for (int s = 0; s < layers; s++) {
      uint8_t fh[12];
      put_le(fh, size[s], 4);
      put_le(fh + 4, pictures, 8);
      if (fwrite(fh, 1, 12, out[s]) != 12 || fwrite(frame[s], 1, size[s], out[s]) != size[s])
        die("%s: %s", tmp_names[s], strerror(errno));
    }
    pictures++;
  }
  if (pictures == 0) die("%s holds no picture", input);
  vpx_codec_destroy(&codec);
  free(buf);
  fclose(in);
  for (int s = 0; s < layers; s++) {
    ivf_header(out[s], lw[s], lh[s], fps, pictures);
    if (fclose(out[s])) die("%s: %s", tmp_names[s], strerror(errno));
  }
  for (int s = 0; s < layers; s++) {
    if (rename(tmp_names[s], out_names[s])) die("%s: %s", out_names[s], strerror(errno));
    tmp_names[s][0] = 0;
  }
  return 0;
}
