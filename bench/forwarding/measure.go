package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pion/webrtc/v4"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; 100 on every
// Linux architecture sfubench runs on.
const clockTicks = 100

// cpuSeconds is the user+system CPU time of a whole process, all threads.
func cpuSeconds(pid int) (float64, error) {
	user, sys, err := cpuTimes(pid)
	return user + sys, err
}

// cpuTimes is the user and the system CPU time of a whole process, all
// threads, in seconds.
func cpuTimes(pid int) (user, sys float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name may hold spaces; fields count from after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, 0, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, err
	}
	return float64(utime) / clockTicks, float64(stime) / clockTicks, nil
}

// cpuMHz is the first core's clock as the kernel reports it, or 0.
func cpuMHz() float64 {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "cpu MHz" {
			mhz, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return mhz
		}
	}
	return 0
}

// baselineLatency is the one-way latency of the same streams between two
// pion peers connected directly, no SFU: what the client stacks alone add.
func baselineLatency(cfg config) (time.Duration, error) {
	api, err := newAPI(cfg.localIP)
	if err != nil {
		return 0, err
	}
	pub, sub := newSynth(0, "base-pub"), newSynth(1, "base-sub")
	ppc, err := api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return 0, err
	}
	spc, err := api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		ppc.Close()
		return 0, err
	}
	// The synths' readers end when the connections close.
	defer func() {
		ppc.Close()
		spc.Close()
		pub.close()
		sub.close()
	}()
	for _, t := range []webrtc.TrackLocal{pub.audio, pub.video} {
		s, err := ppc.AddTrack(t)
		if err != nil {
			return 0, err
		}
		pub.readRTCP(s)
	}
	spc.OnTrack(func(t *webrtc.TrackRemote, _ *webrtc.RTPReceiver) { sub.receive(0, t) })
	if err := connect(ppc, spc); err != nil {
		return 0, err
	}
	pub.publish(cfg.load)
	deadline := time.Now().Add(10 * time.Second)
	for len(sub.received()) < 2 {
		if time.Now().After(deadline) {
			return 0, errors.New("no media between two direct peers")
		}
		time.Sleep(20 * time.Millisecond)
	}
	sub.collecting.Store(true)
	time.Sleep(3 * time.Second)
	sub.collecting.Store(false)
	sub.mu.Lock()
	lat := slices.Clone(sub.latUS)
	sub.mu.Unlock()
	slices.Sort(lat)
	return pct(lat, 0.5), nil
}

func connect(offerer, answerer *webrtc.PeerConnection) error {
	offer, err := offerer.CreateOffer(nil)
	if err != nil {
		return err
	}
	done := webrtc.GatheringCompletePromise(offerer)
	if err := offerer.SetLocalDescription(offer); err != nil {
		return err
	}
	<-done
	if err := answerer.SetRemoteDescription(*offerer.LocalDescription()); err != nil {
		return err
	}
	answer, err := answerer.CreateAnswer(nil)
	if err != nil {
		return err
	}
	done = webrtc.GatheringCompletePromise(answerer)
	if err := answerer.SetLocalDescription(answer); err != nil {
		return err
	}
	<-done
	return offerer.SetRemoteDescription(*answerer.LocalDescription())
}

// row is one result in the units it is reported in.
type row struct {
	Rooms        int     `json:"rooms"`
	Participants int     `json:"participants"`
	Published    int     `json:"published_streams"`
	Forwarded    int     `json:"forwarded_streams"`
	Seconds      float64 `json:"seconds"`
	SFUCPUPct    float64 `json:"sfu_cpu_pct"`
	SFUKernelPct float64 `json:"sfu_kernel_pct"` // share of the SFU's CPU time spent in the kernel
	CPUMsPerFwdS float64 `json:"cpu_ms_per_fwd_stream_s"`
	MHzPerPub    float64 `json:"mhz_per_pub_stream"`
	MHzPerFwd    float64 `json:"mhz_per_fwd_stream"`
	OutPackets   uint64  `json:"out_packets"`
	Expected     uint64  `json:"expected_packets"`
	OutPPS       float64 `json:"out_pkt_per_s"`
	LossPct      float64 `json:"loss_pct"`
	P50          float64 `json:"p50_ms"`
	P95          float64 `json:"p95_ms"`
	P99          float64 `json:"p99_ms"`
	AddedP50     float64 `json:"added_p50_ms"`
	BenchCPUPct  float64 `json:"bench_cpu_pct"`
}

func (r result) row(cfg config, base time.Duration) row {
	util := r.sfuCPU / r.seconds
	loss := 0.0
	if r.expected > 0 && r.outPackets < r.expected {
		loss = 100 * float64(r.expected-r.outPackets) / float64(r.expected)
	}
	return row{
		Rooms: r.rooms, Participants: r.participants, Published: r.pubStreams, Forwarded: r.fwdStreams,
		Seconds: r.seconds, SFUCPUPct: 100 * util, SFUKernelPct: 100 * r.sfuSys / r.sfuCPU,
		CPUMsPerFwdS: 1000 * r.sfuCPU / (float64(r.fwdStreams) * r.seconds),
		MHzPerPub:    util * cfg.mhz / float64(r.pubStreams), MHzPerFwd: util * cfg.mhz / float64(r.fwdStreams),
		OutPackets: r.outPackets, Expected: r.expected, OutPPS: float64(r.outPackets) / r.seconds, LossPct: loss,
		P50: ms(r.p50), P95: ms(r.p95), P99: ms(r.p99), AddedP50: ms(r.p50 - base),
		BenchCPUPct: 100 * r.benchCPU / r.seconds,
	}
}
func printTable(w io.Writer, cfg config, base time.Duration, rs []result) {
	fmt.Fprintf(w, "forwarding benchmark: rooms of %d, each publishing %d B video at %d pps + %d B audio at %d pps; %v measured per row; %.0f MHz cores\n",
		cfg.roomSize, cfg.load.videoBytes, cfg.load.videoPPS, cfg.load.audioBytes, cfg.load.audioPPS, cfg.measure, cfg.mhz)
	fmt.Fprintf(w, "a forwarded stream is one published track delivered to one subscriber; latency is publisher→subscriber one way, \"added\" subtracts the direct pion↔pion median (%.2f ms)\n\n",
		ms(base))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rooms\tparticipants\tpublished\tforwarded\tSFU CPU %\tof it kernel %\tCPU ms per fwd stream-s\tMHz per pub stream\tMHz per fwd stream\tout pkt/s\tloss %\tp50 ms\tp95 ms\tp99 ms\tadded p50 ms\tbench CPU %\t")
	for _, r := range rs {
		o := r.row(cfg, base)
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.1f\t%.0f\t%.3f\t%.2f\t%.2f\t%.0f\t%.3f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t\n",
			o.Rooms, o.Participants, o.Published, o.Forwarded, o.SFUCPUPct, o.SFUKernelPct, o.CPUMsPerFwdS, o.MHzPerPub, o.MHzPerFwd,
			o.OutPPS, o.LossPct, o.P50, o.P95, o.P99, o.AddedP50, o.BenchCPUPct)
	}
	tw.Flush()
}

// printJSON is the table for programs (bench/forwarding.py compares SFUs with it).
func printJSON(w io.Writer, cfg config, base time.Duration, rs []result) error {
	out := struct {
		RoomSize      int     `json:"room_size"`
		VideoBytes    int     `json:"video_bytes"`
		VideoPPS      int     `json:"video_pps"`
		AudioBytes    int     `json:"audio_bytes"`
		AudioPPS      int     `json:"audio_pps"`
		MHz           float64 `json:"cpu_mhz"`
		BaselineP50ms float64 `json:"baseline_p50_ms"`
		Rows          []row   `json:"rows"`
	}{cfg.roomSize, cfg.load.videoBytes, cfg.load.videoPPS, cfg.load.audioBytes, cfg.load.audioPPS, cfg.mhz, ms(base), nil}
	for _, r := range rs {
		out.Rows = append(out.Rows, r.row(cfg, base))
	}
	return json.NewEncoder(w).Encode(out)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
